"""Every helper's reply shapes, on every server, in RESP2 and RESP3, with
`decode_responses` off and on, then the same through redis.asyncio."""

from __future__ import annotations

import datetime
import statistics
import time

import pytest
import redis

import tally
from conftest import as_member, run_async

HOUR = 3_600_000
DAY = 24 * HOUR
# A day boundary a week ago: old enough for the objects below to keep it writable
# with AT, far from the edges of their kept ranges.
T = (int(time.time() * 1000) // DAY - 7) * DAY


def test_counter(t: tally.Tally, key) -> None:
    c = t.counter(key("c"))
    assert c.create(resolutions=["1h:100000", ("1d", 10000)]) is None
    with pytest.raises(redis.ResponseError, match="^key already exists$"):
        c.create()
    assert c.incrby(3, at=T) == 3
    assert c.incrby(2, at=T + HOUR) == 2
    assert c.incr(at=T + 2 * DAY) == 1
    assert c.incrby(6, at=datetime.datetime.fromtimestamp((T + 2 * DAY) / 1000, datetime.timezone.utc)) == 7

    assert c.sum("1h", "2h", "1d", datetime.timedelta(days=7), at=T + HOUR) == [2, 5, 5, 5]
    assert c.sum("1h", at=T + HOUR) == [2]
    assert c.range("1d", start=T, end=T + 3 * DAY) == [(T, 5), (T + 2 * DAY, 7)]
    assert c.range(DAY, empty=True, start=T, end=T + 3 * DAY) == [
        (T, 5), (T + DAY, 0), (T + 2 * DAY, 7), (T + 3 * DAY, 0)]
    assert c.range("1h", start=T, end=T + HOUR) == [(T, 3), (T + HOUR, 2)]

    info = c.info()
    assert set(info) == {"resolutions", "slots", "first", "last", "memory"}
    assert info["resolutions"] == [(HOUR, 100000), (DAY, 10000)]
    assert (info["slots"], info["first"], info["last"]) == (5, T, T + 2 * DAY)
    assert isinstance(info["memory"], int) and info["memory"] > 0
    assert t.counter(key("missing")).info() is None
    assert t.counter(key("missing")).sum("1h", "1d") == [0, 0]
    assert t.counter(key("missing")).range("1h") == []


def test_counter_limit(t: tally.Tally, key) -> None:
    c = t.counter(key("l"))
    c.create(resolutions=["1h:100000", "1d:10000"])
    c.incrby(3, at=T)
    c.incrby(2, at=T + HOUR)
    assert c.limit(1, {"1h": 5}, at=T + HOUR) == tally.Decision(True, 0, [3])
    refused = c.limit(1, [("1h", 5), ("2h", 6)], at=T + HOUR)
    assert refused == tally.Decision(False, HOUR, [3, 6])
    assert not refused
    assert c.limit(10, {"1h": 5}, at=T + HOUR) == tally.Decision(False, -1, [3])
    assert c.limit(0, {"1h": 5, "1d": 100}, at=T + HOUR) == tally.Decision(True, 0, [3, 6])
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        c.limit(-1, {"1h": 5})
    # Now, with the default resolutions of an auto-created key.
    fresh = t.counter(key("fresh"))
    assert [fresh.limit(1, {"1m": 2}).allowed for _ in range(3)] == [True, True, False]


def test_counter_errors_and_keys(t: tally.Tally, r: redis.Redis, key) -> None:
    r.set(key("s"), "x")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE Operation against a key holding the wrong kind of value$"):
        t.counter(key("s")).incr()
    with pytest.raises(redis.ResponseError, match="^window '365d' is longer than any resolution keeps$"):
        t.counter(key("c")).sum("365d")
    with pytest.raises(redis.ResponseError, match="^timestamp is too far in the future$"):
        t.counter(key("c")).incr(at=99999999999999)
    with pytest.raises(TypeError):
        t.counter(key("c")).sum(1.5)
    # bytes keys, even ones that are not UTF-8, name the same objects as str keys.
    as_bytes = t.counter(key("b").encode())
    assert as_bytes.incrby(4) == 4
    assert t.counter(key("b")).sum("1m") == [4]
    binary = t.counter(key("b").encode() + b"\xff\x00")
    assert binary.incr() == 1 and binary.sum(60_000) == [1]


def test_leaderboard(t: tally.Tally, decode: bool, key) -> None:
    m = lambda name: as_member(decode, name)  # noqa: E731
    b = t.leaderboard(key("daily"))
    assert b.create(window="3650d", slot=datetime.timedelta(days=1)) is None
    with pytest.raises(redis.ResponseError, match="^key already exists$"):
        b.create()
    assert b.incrby({"alice": 4, "bob": 2}, at=T) == {"alice": 4, "bob": 2}
    assert b.incr("alice", at=T + 2 * DAY) == 5
    assert b.incrby([(b"carol", 1)], at=T) == {b"carol": 1}

    assert b.top(10) == [(m("alice"), 5), (m("bob"), 2), (m("carol"), 1)]
    assert b.top(1, offset=1) == [(m("bob"), 2)]
    assert b.top(10, window="1d") == []
    assert (b.score("alice"), b.score(b"bob"), b.score("nobody")) == (5, 2, None)
    assert (b.rank("alice"), b.rank("carol"), b.rank("nobody")) == (0, 2, None)
    assert b.history("alice") == [(T, 4), (T + 2 * DAY, 1)]
    assert b.history("alice", window="1d") == []
    assert b.history("nobody") == []
    assert b.info() == {"window": 3650 * DAY, "slot": DAY, "members": 3, "slots": 2, "oldest": T}

    missing = t.leaderboard(key("missing"))
    assert (missing.info(), missing.top(10), missing.score("x")) == (None, [], None)
    with pytest.raises(redis.ResponseError, match="^increment must be a positive integer$"):
        b.incr("alice", 0)

    hourly = t.leaderboard(key("hourly"))
    assert hourly.incrby({"post:1": 1, "post:2": 3}) == {"post:1": 1, "post:2": 3}
    assert hourly.top(10) == [(m("post:2"), 3), (m("post:1"), 1)]
    assert hourly.info()["window"] == DAY and hourly.info()["members"] == 2


def test_leaderboard_binary_members(server, protocol, key) -> None:
    t = tally.Tally(server.client(protocol=protocol))
    b = t.leaderboard(key("bin"))
    odd = b"\xff\x00post"
    assert b.incrby({odd: 2, "é": 1}) == {odd: 2, "é": 1}
    assert b.top(10) == [(odd, 2), ("é".encode(), 1)]
    assert b.score(odd) == 2


def test_stats(t: tally.Tally, r: redis.Redis, key) -> None:
    s = t.stats(key("daily"))
    assert s.create(period="1d", keep=10000) is None
    assert s.add(1.5, 2.5, at=T) == 2
    assert s.add(10, at=T + 2 * DAY) == 1

    first, second = s.range()
    assert first == (T, tally.Summary(2, 4.0, 2.0, 1.5, 2.5, statistics.stdev([1.5, 2.5]), 1.5, 2.5, 2.5))
    assert second == (T + 2 * DAY, tally.Summary(1, 10.0, 10.0, 10.0, 10.0, 0.0, 10.0, 10.0, 10.0))
    assert s.range(start=T + DAY) == [second]
    assert s.get() is None  # the current period is empty
    whole = s.get(window="10000d")
    assert (whole.count, whole.sum, whole.min, whole.max) == (3, 14.0, 1.5, 10.0)
    assert whole.mean == pytest.approx(14 / 3)
    assert whole.stddev == pytest.approx(statistics.stdev([1.5, 2.5, 10]))
    assert all(isinstance(getattr(whole, f), float) for f in ("sum", "mean", "stddev", "p50"))
    assert s.quantile(0, 1, window="10000d") == [1.5, 10.0]
    assert s.quantile(0.5) is None
    info = s.info()
    assert (info["period"], info["keep"], info["periods"]) == (DAY, 10000, 2) and info["memory"] > 0
    assert t.stats(key("missing")).info() is None and t.stats(key("missing")).get() is None

    latency = t.stats(key("latency{page}"))
    assert latency.add(12, 8, 232) == 3
    assert latency.add(40, report=(key("slowest{page}"), "/checkout")) == 4
    assert latency.add(1, report=(key("slowest{page}"), b"/home", 1)) == 5
    # KEEP 1 keeps the highest mean: /checkout's 73 (12, 8, 232, 40) over /home's 58.6.
    assert r.zcard(key("slowest{page}")) == 1 and r.zscore(key("slowest{page}"), "/checkout") == 73
    now = latency.get()
    assert (now.count, now.min, now.max, now.p90) == (5, 1.0, 232.0, 232.0)
    assert latency.quantile(0.5, 0.99) == [pytest.approx(12, rel=0.01), 232.0]
    with pytest.raises(redis.ResponseError, match="^value is not a valid float$"):
        latency.add(float("inf"))
    with pytest.raises(redis.ResponseError, match="^quantile must be between 0 and 1$"):
        latency.quantile(2)


def test_stats_cdf(t: tally.Tally, key) -> None:
    s = t.stats(key("cdf"))
    try:
        s.cdf(1)
    except redis.ResponseError as e:
        if "unknown command" in str(e):
            pytest.skip("this build has no STATS.CDF")
        raise
    s.add(10, 20, 30, 40)
    assert s.cdf(5, 40, 100) == [0.0, 1.0, 1.0]
    assert s.cdf(20)[0] == pytest.approx(0.5)


def test_asyncio(server, protocol: int, decode: bool, key) -> None:
    """The same helpers through redis.asyncio answer awaitables of the same values."""

    async def scenario(t: tally.Tally, client) -> None:
        c = t.counter(key("c"))
        pending = c.create(resolutions=["1h:100000", "1d:10000"])
        assert hasattr(pending, "__await__")
        assert await pending is None
        assert await c.incrby(3, at=T) == 3
        assert await c.sum("1h", "1d", at=T) == [3, 3]
        assert await c.range("1h", start=T, end=T) == [(T, 3)]
        assert (await c.info())["resolutions"] == [(HOUR, 100000), (DAY, 10000)]
        assert await c.limit(1, {"1h": 3}, at=T) == tally.Decision(False, HOUR, [3])
        with pytest.raises(redis.ResponseError, match="^key already exists$"):
            await c.create()

        b = t.leaderboard(key("b"))
        assert await b.incrby({"x": 2, "y": 1}) == {"x": 2, "y": 1}
        assert await b.top(10) == [(as_member(decode, "x"), 2), (as_member(decode, "y"), 1)]
        assert (await b.score("y"), await b.rank("y"), await b.rank("z")) == (1, 1, None)
        assert len(await b.history("x")) == 1 and (await b.info())["members"] == 2

        s = t.stats(key("s"))
        assert await s.add(1, 2, 3) == 3
        summary = await s.get()
        assert (summary.count, summary.mean, summary.stddev) == (3, 2.0, 1.0)
        assert await s.quantile(0, 1) == [1.0, 3.0]
        assert (await s.info())["periods"] == 1 and len(await s.range()) == 1

    run_async(server, scenario, protocol=protocol, decode_responses=decode)
