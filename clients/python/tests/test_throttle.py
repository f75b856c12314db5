"""`Tally.throttle(key).allow(...)` (TSTHROTTLE.ALLOW) on every server, in RESP2 and
RESP3, with `decode_responses` off and on, then through redis.asyncio."""

from __future__ import annotations

import datetime
import time

import pytest
import redis

import tally
from conftest import run_async

# A past second: replies with `AT` are exact.
T = (int(time.time()) - 60) * 1000


def test_throttle_allow(t: tally.Tally, key, r: redis.Redis) -> None:
    th = t.throttle(key("th"))
    assert repr(th).startswith("Throttle(")
    # 30 a minute, bursts of 15: T = 2 s, tau = 32 s.
    first = th.allow(15, 30, "1m", at=T)
    assert first == tally.ThrottleDecision(True, 16, 15, 0, 2000)
    assert first
    assert th.allow(15, 30, datetime.timedelta(minutes=1), quantity=15, at=T) == tally.ThrottleDecision(
        True, 16, 0, 0, 32000
    )
    refused = th.allow(15, 30, 60_000, at=T + 500)
    assert refused == tally.ThrottleDecision(False, 16, 0, 1500, 31500)
    assert not refused
    assert th.allow(15, 30, "1m", quantity=17, at=T + 500).retry_after_ms == -1
    assert th.allow(15, 30, "1m", quantity=0, at=T + 4000) == tally.ThrottleDecision(True, 16, 2, 0, 28000)
    assert int(r.get(key("th"))) == (T + 32000) * 1_000_000
    # Without AT: the server's clock; the key expires when the burst is back.
    now = t.throttle(key("now")).allow(4, 10, "10s")
    assert now == tally.ThrottleDecision(True, 5, 4, 0, 1000)
    # Expiry in ms rounded up, PTTL counted from a later ms: at most 1001.
    assert 0 < r.pttl(key("now")) <= 1001
    with pytest.raises(redis.ResponseError, match="^rate is too high$"):
        th.allow(0, 2_000_000, "1ms")
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range: count is an integer >= 1$"):
        th.allow(1, 0, "1s")
    r.set(key("s"), "text")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        t.throttle(key("s")).allow(1, 1, "1s")


def test_throttle_asyncio(server, protocol: int, decode: bool, key) -> None:
    async def scenario(t: tally.Tally, client) -> None:
        th = t.throttle(key("a"))
        assert await th.allow(0, 1, "1m", at=T) == tally.ThrottleDecision(True, 1, 0, 0, 60000)
        assert await th.allow(0, 1, "1m", at=T) == tally.ThrottleDecision(False, 1, 0, 60000, 60000)

    run_async(server, scenario, protocol=protocol, decode_responses=decode)
