"""Real servers with the module for the tests.

`TALLY_MODULE` is the module to load (default: the repository's release build);
`TALLY_SERVERS` lists the servers as `name=path,name=path` (default: Debian's Redis).
Each server kind is started once per session on a free port; every test uses keys of
its own, so tests share it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest
import redis
import redis.asyncio

import tally

ROOT = Path(__file__).resolve().parents[3]
MODULE = os.environ.get("TALLY_MODULE") or str(ROOT / "target" / "release" / "libtally.so")


def server_kinds() -> list[tuple[str, str]]:
    spec = os.environ.get("TALLY_SERVERS") or "redis=/usr/bin/redis-server"
    kinds = []
    for item in spec.split(","):
        if item.strip():
            name, _, path = item.strip().partition("=")
            kinds.append((name, path))
    return kinds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing(what: str) -> None:
    """A missing server or module fails the run in CI and skips elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(what)
    pytest.skip(what)


class Server:
    """One `redis-server --loadmodule` on a free port, in its own directory."""

    def __init__(self, name: str, binary: str, *args: str, port: int | None = None) -> None:
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            missing(f"no server binary {binary} for {name}")
        if not os.path.isfile(MODULE):
            missing(f"no module at {MODULE} (make build)")
        self.name = name
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix=f"tally-py-{name}-")
        self.log = open(os.path.join(self.dir, "server.log"), "wb")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--loadmodule", MODULE, *args],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if redis.Redis(port=self.port, socket_timeout=1).ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not start:\n{self.read_log()}")

    def read_log(self) -> str:
        return Path(self.dir, "server.log").read_text(errors="replace")

    def client(self, **options: Any) -> redis.Redis:
        return redis.Redis(port=self.port, **options)

    def async_client(self, **options: Any) -> redis.asyncio.Redis:
        return redis.asyncio.Redis(port=self.port, **options)

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session", params=server_kinds(), ids=lambda kind: kind[0])
def server(request: pytest.FixtureRequest) -> Server:
    srv = Server(*request.param)
    yield srv
    alive = srv.proc.poll() is None
    log = srv.read_log()
    srv.stop()
    assert alive, f"{srv.name} died during the tests:\n{log}"


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def protocol(request: pytest.FixtureRequest) -> int:
    return request.param


@pytest.fixture(params=[False, True], ids=["bytes", "decoded"])
def decode(request: pytest.FixtureRequest) -> bool:
    return request.param


@pytest.fixture
def r(server: Server, protocol: int, decode: bool) -> redis.Redis:
    client = server.client(protocol=protocol, decode_responses=decode)
    yield client
    client.close()


@pytest.fixture
def t(r: redis.Redis) -> tally.Tally:
    return tally.Tally(r)


@pytest.fixture
def key() -> Callable[[str], str]:
    """Fresh key names: `key("c")` -> `test:<uuid>:c`."""
    run = uuid.uuid4().hex[:12]
    return lambda name="k": f"test:{run}:{name}"


def as_member(decode: bool, member: str) -> Any:
    """A member as redis-py answers it."""
    return member if decode else member.encode()


def run_async(server: Server, fn: Callable[[tally.Tally, Any], Any], **options: Any) -> Any:
    """Runs `await fn(Tally(asyncio client), client)` in a fresh event loop."""

    async def main() -> Any:
        client = server.async_client(**options)
        try:
            return await fn(tally.Tally(client), client)
        finally:
            await client.aclose()

    return asyncio.run(main())
