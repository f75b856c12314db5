"""flask-limiter on `tally://`: the limit answers 429 with `Retry-After`."""

from __future__ import annotations

import uuid

import pytest
from flask import Flask
from flask_limiter import Limiter

import tally  # noqa: F401  (registers tally://)


def make_app(server, strategy: str) -> Flask:
    app = Flask(__name__)
    limiter = Limiter(
        lambda: "client-1",
        app=app,
        storage_uri=f"tally://{server.url}/0",
        storage_options={"key_prefix": f"flask-{uuid.uuid4().hex}"},
        strategy=strategy,
        headers_enabled=True,
    )

    @app.route("/")
    @limiter.limit("3 per hour")  # an hour: no fixed-window edge inside the test
    def home() -> str:
        return "hello"

    @app.route("/free")
    @limiter.exempt
    def free() -> str:
        return "free"

    return app


@pytest.mark.parametrize("strategy", ["moving-window", "sliding-window-counter", "fixed-window"])
def test_flask_limiter_answers_429_with_retry_after(server, strategy: str) -> None:
    client = make_app(server, strategy).test_client()
    answers = [client.get("/") for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert [a.headers["X-RateLimit-Remaining"] for a in answers[:3]] == ["2", "1", "0"]
    assert answers[0].headers["X-RateLimit-Limit"] == "3"
    retry_after = int(answers[3].headers["Retry-After"])
    assert 0 < retry_after <= 3600
    assert client.get("/free").status_code == 200
