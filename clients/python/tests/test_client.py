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
    assert c.create(resolutions=["1h:5000", ("1d", 5000)]) is None
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
    assert info["resolutions"] == [(HOUR, 5000), (DAY, 5000)]
    assert (info["slots"], info["first"], info["last"]) == (5, T, T + 2 * DAY)
    assert isinstance(info["memory"], int) and info["memory"] > 0
    assert t.counter(key("missing")).info() is None
    assert t.counter(key("missing")).sum("1h", "1d") == [0, 0]
    assert t.counter(key("missing")).range("1h") == []


def test_counter_limit(t: tally.Tally, key) -> None:
    c = t.counter(key("l"))
    c.create(resolutions=["1h:5000", "1d:5000"])
    c.incrby(3, at=T)
    c.incrby(2, at=T + HOUR)
    assert c.limit(1, {"1h": 5}, at=T + HOUR) == tally.Decision(True, 0, [3])
    refused = c.limit(1, [("1h", 5), ("2h", 6)], at=T + HOUR)
    assert refused == tally.Decision(False, HOUR, [3, 6])
    assert not refused
    assert c.limit(10, {"1h": 5}, at=T + HOUR) == tally.Decision(False, -1, [3])
    assert c.limit(0, {"1h": 5, "1d": 100}, at=T + HOUR) == tally.Decision(True, 0, [3, 6])
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range: increment is an integer >= 0$"):
        c.limit(-1, {"1h": 5})
    # Now, with the default resolutions of an auto-created key.
    fresh = t.counter(key("fresh"))
    assert [fresh.limit(1, {"1m": 2}).allowed for _ in range(3)] == [True, True, False]


def test_counter_errors_and_keys(t: tally.Tally, r: redis.Redis, key) -> None:
    r.set(key("s"), "x")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE Operation against a key holding the wrong kind of value$"):
        t.counter(key("s")).incr()
    with pytest.raises(redis.ResponseError, match=r"^window '365d' is longer than any resolution keeps \(at most 120d\)$"):
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
    assert (b.rank("alice", ties=True), b.rank("nobody", ties=True)) == (0, None)
    assert b.scores("alice", b"nobody", "carol") == [5, None, 1]
    assert b.around("bob", 1) == [(m("alice"), 5), (m("bob"), 2), (m("carol"), 1)]
    assert b.around("alice", 0) == [(m("alice"), 5)]
    assert b.around("nobody", 3) == []
    with pytest.raises(redis.ResponseError, match="^count must be between 0 and 1000$"):
        b.around("alice", 1001)
    with pytest.raises(ValueError):
        b.scores()
    assert b.history("alice") == [(T, 4), (T + 2 * DAY, 1)]
    assert b.history("alice", window="1d") == []
    assert b.history("nobody") == []
    assert b.info() == {
        "window": 3650 * DAY,
        "slot": DAY,
        "members": 3,
        "slots": 2,
        "oldest": T,
        "capacity": 0,
        "error": 0,
    }

    missing = t.leaderboard(key("missing"))
    assert (missing.info(), missing.top(10), missing.score("x")) == (None, [], None)
    with pytest.raises(redis.ResponseError, match="^increment must be a non-zero integer$"):
        b.incr("alice", 0)

    # Unlikes lower a count in the slot of `at`, never below 0 (refused whole); REM removes
    # a member everywhere.
    assert b.incrby({"alice": -1, "bob": -2}, at=T) == {"alice": 4, "bob": 0}
    with pytest.raises(redis.ResponseError, match="^count would go below zero$"):
        b.incrby([("alice", -1), ("carol", -2)], at=T)
    assert b.top(10) == [(m("alice"), 4), (m("carol"), 1)]
    assert b.rem("alice", "nobody", "alice") == 1
    assert b.rem("alice") == 0
    assert (b.score("alice"), b.history("alice"), b.top(10)) == (None, [], [(m("carol"), 1)])
    assert b.incr("alice", at=T) == 1
    assert missing.rem("x") == 0

    # Standings: equal totals share a tie rank; AROUND follows TOP's order.
    games = t.leaderboard(key("games"))
    games.incrby({"ann": 9, "bob": 7, "cat": 7, "dan": 5})
    ranks = [games.rank(name, ties=True) for name in ("ann", "bob", "cat", "dan")]
    assert ranks == [0, 1, 1, 3]
    assert [games.rank(name) for name in ("cat", "bob")] == [1, 2]
    assert games.around("dan", 2) == [(m("cat"), 7), (m("bob"), 7), (m("dan"), 5)]

    hourly = t.leaderboard(key("hourly"))
    assert hourly.incrby({"post:1": 1, "post:2": 3}) == {"post:1": 1, "post:2": 3}
    assert hourly.top(10) == [(m("post:2"), 3), (m("post:1"), 1)]
    assert hourly.info()["window"] == DAY and hourly.info()["members"] == 2


def test_leaderboard_with_capacity(t: tally.Tally, decode: bool, key) -> None:
    m = lambda name: as_member(decode, name)  # noqa: E731
    b = t.leaderboard(key("trending"))
    assert b.create(window="3650d", slot="1d", capacity=2) is None
    at = T
    assert b.incrby({"a": 5, "b": 2}, at=at) == {"a": 5, "b": 2}
    # The slot is full: b (the smallest count) leaves, c enters with 2 + 1.
    assert b.incr("c", at=at) == 3
    assert b.top(10) == [(m("a"), 5), (m("c"), 3)]
    info = b.info()
    assert (info["capacity"], info["error"], info["members"]) == (2, 2, 2)
    with pytest.raises(
        redis.ResponseError, match="^a board with CAPACITY takes only positive increments$"
    ):
        b.incr("a", -1, at=at)
    with pytest.raises(redis.ResponseError, match="^CAPACITY must be an integer from 1 to 100000$"):
        t.leaderboard(key("other")).create(capacity=0)


def test_leaderboard_binary_members(server, protocol, key) -> None:
    t = tally.Tally(server.client(protocol=protocol))
    b = t.leaderboard(key("bin"))
    odd = b"\xff\x00post"
    assert b.incrby({odd: 2, "é": 1}) == {odd: 2, "é": 1}
    assert b.top(10) == [(odd, 2), ("é".encode(), 1)]
    assert b.score(odd) == 2


def test_stats(t: tally.Tally, r: redis.Redis, key) -> None:
    s = t.stats(key("daily"))
    assert s.create(period="1d", keep=2000) is None
    assert s.add(1.5, 2.5, at=T) == 2
    assert s.add(10, at=T + 2 * DAY) == 1

    first, second = s.range()
    assert first == (T, tally.Summary(2, 4.0, 2.0, 1.5, 2.5, statistics.stdev([1.5, 2.5]), 1.5, 2.5, 2.5))
    assert second == (T + 2 * DAY, tally.Summary(1, 10.0, 10.0, 10.0, 10.0, 0.0, 10.0, 10.0, 10.0))
    assert s.range(start=T + DAY) == [second]
    assert s.get() is None  # the current period is empty
    whole = s.get(window="2000d")
    assert (whole.count, whole.sum, whole.min, whole.max) == (3, 14.0, 1.5, 10.0)
    assert whole.mean == pytest.approx(14 / 3)
    assert whole.stddev == pytest.approx(statistics.stdev([1.5, 2.5, 10]))
    assert all(isinstance(getattr(whole, f), float) for f in ("sum", "mean", "stddev", "p50"))
    assert s.quantile(0, 1, window="2000d") == [1.5, 10.0]
    assert s.quantile(0.5) is None
    info = s.info()
    assert (info["period"], info["keep"], info["periods"]) == (DAY, 2000, 2) and info["memory"] > 0
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


def test_reads_across_keys(t: tally.Tally, r: redis.Redis, key) -> None:
    login, search = key("{svc}:/login"), key("{svc}:/search").encode()
    for k, by in ((login, 3), (search, 5)):
        t.counter(k).create(resolutions=["1h:1000", "1d:1000"])
        t.counter(k).incrby(by, at=T)
    t.counter(search).incrby(10, at=T - 3 * HOUR)
    # Each window summed over the keys; a missing key counts 0.
    assert t.msum([login, search, key("{svc}:/none")], "1h", "1d", at=T) == [8, 18]
    assert t.msum([login], "1h", at=T) == [3]
    with pytest.raises(redis.ResponseError, match=r"^window '5000d' is longer than any resolution keeps \(at most 1000d\)$"):
        t.msum([login, search], "5000d")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        t.msum([], "1h", "2h")

    cart, pay = t.stats(key("{shop}:/cart")), t.stats(key("{shop}:/pay"))
    assert cart.add(10, 20, 30) == 3
    assert pay.add(100, 300) == 2
    keys = [cart.key, pay.key, key("{shop}:/none")]
    union = t.mget(keys)
    assert (union.count, union.sum, union.min, union.max, union.mean) == (5, 460.0, 10.0, 300.0, 92.0)
    assert union.stddev == pytest.approx(statistics.stdev([10, 20, 30, 100, 300]))
    assert union.p50 == pytest.approx(30, rel=0.01)
    assert t.mget(keys, window="2h") == union
    assert t.mquantile(keys, 0, 0.5, 1) == [10.0, pytest.approx(30, rel=0.01), 300.0]
    assert t.mget([key("{shop}:/none")]) is None and t.mquantile([key("{shop}:/none")], 0.5) is None
    with pytest.raises(redis.ResponseError, match="^WINDOW must be a multiple of the period"):
        t.mget(keys, window="90m")

    # REPORT ranks by any statistic of the period.
    tail = t.stats(key("{shop}:/tail"))
    assert tail.add(1, 1, 1, 900, report=(key("{shop}:slow"), "/tail"), by="p99") == 4
    assert tail.add(1, report=(key("{shop}:slow-mean"), "/tail", 5), by="mean") == 5
    assert r.zscore(key("{shop}:slow"), "/tail") == 900
    assert r.zscore(key("{shop}:slow-mean"), "/tail") == pytest.approx(904 / 5)
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        tail.add(1, report=(key("{shop}:slow"), "/tail"), by="p95")
    with pytest.raises(ValueError):
        tail.add(1, by="p99")


def test_stats_cdf(t: tally.Tally, key) -> None:
    s = t.stats(key("cdf"))
    assert s.cdf(1) is None  # a missing key
    assert s.add(10, 20, 30, 40) == 4
    assert s.cdf(5, 40, 100, 9.99) == [0.0, 1.0, 1.0, 0.0]
    # Between data points the answer is exact; at one it lies between the shares at
    # or below 0.99 and 1.01 times the value.
    assert s.cdf(25, 35, 15) == [0.5, 0.75, 0.25]
    assert 0.25 <= s.cdf(20)[0] <= 0.5
    assert all(isinstance(x, float) for x in s.cdf(10, 25))
    assert s.cdf(40, window="1d") == [1.0]
    with pytest.raises(redis.ResponseError, match="^value is not a valid float$"):
        s.cdf(float("nan"))
    with pytest.raises(redis.ResponseError, match="^too many values, at most 1000$"):
        s.cdf(*range(1001))


def test_counter_limit_details(t: tally.Tally, key) -> None:
    c = t.counter(key("d"))
    c.create(resolutions=["1h:1000"])
    c.incrby(3, at=T)
    c.incrby(2, at=T + 2 * HOUR)
    # At T+2h the 1h window holds the 2 of T+2h (gone at T+3h); the 4h window also
    # holds the 3 of T, which leaves it at T+4h.
    now = T + 2 * HOUR
    checked = c.limit(0, {"1h": 5, "4h": 5}, at=now, details=True)
    assert checked == tally.Decision(True, 0, [2, 5], [tally.WindowState(2, 3, HOUR), tally.WindowState(5, 0, 2 * HOUR)])
    refused = c.limit(1, [("1h", 5), ("4h", 5)], at=now, details=True)
    assert refused == tally.Decision(False, 2 * HOUR, [2, 5], [tally.WindowState(2, 3, HOUR), tally.WindowState(5, 0, 2 * HOUR)])
    assert c.limit(10, {"1h": 5}, at=now, details=True) == tally.Decision(False, -1, [2], [tally.WindowState(2, 3, HOUR)])
    allowed = c.limit(1, {"1h": 5}, at=now, details=True)
    assert allowed == tally.Decision(True, 0, [3], [tally.WindowState(3, 2, HOUR)])
    assert c.sum("1h", at=now) == [3]
    # Without details the decision carries no window states.
    assert c.limit(0, {"1h": 5}, at=now) == tally.Decision(True, 0, [3])
    assert c.limit(0, {"1h": 5}, at=now).windows is None
    assert t.counter(key("missing")).limit(0, {"1m": 4}, details=True).windows == [tally.WindowState(0, 4, 0)]
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        c.limit(1, {"1h": 5, "2h": 6, "3h": 7, "4h": 8, "5h": 9, "6h": 1, "7h": 1, "8h": 1, "9h": 1, "10h": 1,
                    "11h": 1, "12h": 1, "13h": 1, "14h": 1, "15h": 1, "16h": 1, "17h": 1}, details=True)


def test_mlimit(t: tally.Tally, r: redis.Redis, key) -> None:
    user, ip = key("{m}:user"), key("{m}:ip").encode()
    for k in (user, ip):
        t.counter(k).create(resolutions=["1h:1000"])
    t.counter(user).incrby(3, at=T)
    t.counter(ip).incrby(1, at=T)
    limits = {user: {"1h": 5, "2h": 10}, ip: [("1h", 2)]}
    assert t.mlimit(limits, at=T) == tally.MultiDecision(True, 0, {user: [4, 4], ip: [2]})
    # ip is full: nothing is written anywhere; the 1h windows drop slot T at T+1h.
    refused = t.mlimit(limits, at=T, details=True)
    assert refused == tally.MultiDecision(False, HOUR, {user: [4, 4], ip: [2]}, {
        user: [tally.WindowState(4, 1, HOUR), tally.WindowState(4, 6, 2 * HOUR)],
        ip: [tally.WindowState(2, 0, HOUR)]})
    assert not refused
    assert t.counter(user).sum("1h", at=T) == [4]
    assert t.mlimit(limits, increment=10, at=T) == tally.MultiDecision(False, -1, {user: [4, 4], ip: [2]})
    assert t.mlimit({user: {"1h": 5}}, increment=0, at=T, details=True).windows == {user: [tally.WindowState(4, 1, HOUR)]}
    after = t.mlimit(limits, at=T + HOUR)
    assert after == tally.MultiDecision(True, 0, {user: [1, 5], ip: [1]})
    assert t.counter(ip).sum("2h", at=T + HOUR) == [3]
    # A key created by the call gets the default resolutions.
    fresh = key("{m}:fresh")
    assert [t.mlimit({fresh: {"1m": 2}, user: {"1m": 100}}).allowed for _ in range(3)] == [True, True, False]
    assert t.counter(fresh).sum("1m") == [2]

    with pytest.raises(redis.ResponseError, match="^wrong number of arguments for 'tscounter.mlimit' command$"):
        t.mlimit({})
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        t.mlimit([(user, {"1m": 1}), (user, {"1m": 1})])
    r.set(key("{m}:s"), "x")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        t.mlimit({key("{m}:new"): {"1m": 5}, key("{m}:s"): {"1m": 5}})
    assert r.exists(key("{m}:new")) == 0
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range: increment is an integer >= 0$"):
        t.mlimit({user: {"1m": 5}}, increment=-1)


def test_asyncio(server, protocol: int, decode: bool, key) -> None:
    """The same helpers through redis.asyncio answer awaitables of the same values."""

    async def scenario(t: tally.Tally, client) -> None:
        c = t.counter(key("c"))
        pending = c.create(resolutions=["1h:5000", "1d:5000"])
        assert hasattr(pending, "__await__")
        assert await pending is None
        assert await c.incrby(3, at=T) == 3
        assert await c.sum("1h", "1d", at=T) == [3, 3]
        assert await c.range("1h", start=T, end=T) == [(T, 3)]
        assert (await c.info())["resolutions"] == [(HOUR, 5000), (DAY, 5000)]
        assert await c.limit(1, {"1h": 3}, at=T) == tally.Decision(False, HOUR, [3])
        with pytest.raises(redis.ResponseError, match="^key already exists$"):
            await c.create()
        assert await c.limit(0, {"1h": 3}, at=T, details=True) == tally.Decision(
            True, 0, [3], [tally.WindowState(3, 0, HOUR)])
        other = key("{a}:other")
        multi = await t.mlimit({c.key: {"1h": 0}, other: {"1m": 1}}, details=True)
        assert (multi.allowed, multi.retry_after_ms, multi.sums[other]) == (False, -1, [0])
        assert multi.windows[other] == [tally.WindowState(0, 1, 0)]
        assert await t.mlimit({other: {"1m": 1}}) == tally.MultiDecision(True, 0, {other: [1]})

        b = t.leaderboard(key("b"))
        assert await b.incrby({"x": 2, "y": 1}) == {"x": 2, "y": 1}
        assert await b.top(10) == [(as_member(decode, "x"), 2), (as_member(decode, "y"), 1)]
        assert (await b.score("y"), await b.rank("y"), await b.rank("z")) == (1, 1, None)
        assert len(await b.history("x")) == 1 and (await b.info())["members"] == 2
        assert await b.scores("x", "z") == [2, None]
        assert (await b.rank("y", ties=True), await b.rank("z", ties=True)) == (1, None)
        assert await b.around("y", 5) == [(as_member(decode, "x"), 2), (as_member(decode, "y"), 1)]

        s = t.stats(key("s"))
        assert await s.add(1, 2, 3) == 3
        summary = await s.get()
        assert (summary.count, summary.mean, summary.stddev) == (3, 2.0, 1.0)
        assert await s.quantile(0, 1) == [1.0, 3.0]
        assert (await s.info())["periods"] == 1 and len(await s.range()) == 1
        assert await s.add(5, report=(key("rank"), "s"), by="max") == 4
        assert (await t.mget([s.key, key("none")])).max == 5.0
        assert await t.mquantile([s.key], 0, 1) == [1.0, 5.0]
        assert await t.msum([c.key, key("none")], "1h", "1d", at=T) == [3, 3]

    run_async(server, scenario, protocol=protocol, decode_responses=decode)
