"""The limits storage: registration, limits' three strategies' semantics, one
command per hit, threads and tasks never admitted past the limit."""

from __future__ import annotations

import asyncio
import math
import threading
import time
import uuid

import limits
import limits.aio.strategies as aio_strategies
import pytest
import redis
import redis.asyncio
from limits import strategies
from limits.storage import storage_from_string

import tally
from tally.storage import FIXED_WINDOW_SHA, SLOTS_PER_WINDOW

SLOT_OF_A_SECOND = 1 / SLOTS_PER_WINDOW
"""The slot of a sliding window of one second, in seconds."""

SLIDING = (strategies.MovingWindowRateLimiter, strategies.SlidingWindowCounterRateLimiter)
ALL = (*SLIDING, strategies.FixedWindowRateLimiter)


@pytest.fixture
def storage(server) -> tally.TallyStorage:
    return storage_from_string(f"tally://{server.url}/0")


def ident() -> str:
    return uuid.uuid4().hex


def slot_start(epoch: float, slot: float) -> float:
    """The start of the slot of `slot` seconds holding `epoch`, in whole milliseconds as
    the server counts them."""
    ms, slot_ms = int(epoch * 1000), round(slot * 1000)
    return ms // slot_ms * slot_ms / 1000


def sleep_until(epoch: float) -> None:
    time.sleep(max(0.0, epoch - time.time()))


def test_registered_schemes(server) -> None:
    assert isinstance(storage_from_string(f"tally://{server.url}"), tally.TallyStorage)
    assert isinstance(storage_from_string(f"tally://{server.url}/0", key_prefix="x"), tally.TallyStorage)
    assert isinstance(storage_from_string(f"async+tally://{server.url}/0"), tally.AsyncTallyStorage)
    assert isinstance(tally.TallyStorage(f"tally://{server.url}"), limits.storage.Storage)
    assert storage_from_string(f"tally://{server.url}").check()
    assert not storage_from_string(f"tally://127.0.0.1:{_closed_port()}", socket_connect_timeout=0.5).check()


def _closed_port() -> int:
    from conftest import free_port

    return free_port()


def _script(limiter, item, who: str) -> list:
    """A run of hits, tests and clears inside one window; what limits answers."""
    seen = [limiter.get_window_stats(item, who).remaining, limiter.test(item, who)]
    seen += [limiter.hit(item, who) for _ in range(4)]
    seen += [limiter.test(item, who), limiter.test(item, who + "-other"),
             limiter.get_window_stats(item, who).remaining]
    limiter.clear(item, who)
    seen.append(limiter.get_window_stats(item, who).remaining)
    seen += [limiter.hit(item, who, cost=2), limiter.hit(item, who, cost=2), limiter.hit(item, who),
             limiter.test(item, who, cost=0), limiter.get_window_stats(item, who).remaining]
    seen += [limiter.hit(item, who + "-big", cost=4), limiter.test(item, who + "-big", cost=4)]
    return seen


@pytest.mark.parametrize("strategy", ALL, ids=lambda s: s.__name__)
def test_answers_as_limits_own_storage(storage, strategy) -> None:
    """Within one window, every strategy answers what limits' memory storage answers."""
    item = limits.parse("3/hour")  # an hour: the script never straddles an edge of the fixed window
    who = ident()
    expected = _script(strategy(storage_from_string("memory://")), item, who)
    assert _script(strategy(storage), item, who) == expected
    limiter = strategy(storage)
    limiter.hit(item, who)
    stats = limiter.get_window_stats(item, who)
    assert time.time() < stats.reset_time <= time.time() + 3600


class SlidingModel:
    """The hits of a sliding window of one second with slots of 5 ms, each known by when
    it leaves the window: one second after the start of its slot, which lies between the
    slots of the clock read before and after its request. A read between `asked` and
    `answered` may count each hit whose leaving falls in between, or not."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.leaves: list[tuple[float, float]] = []

    def counts(self, asked: float, answered: float) -> set[int]:
        sure = sum(1 for lo, _ in self.leaves if answered < lo)
        maybe = sum(1 for lo, hi in self.leaves if not answered < lo and asked < hi)
        return set(range(sure, sure + maybe + 1))

    def hit(self, limiter, item, who: str) -> bool:
        """One hit, checked against the counts the model allows; whether it was allowed."""
        asked = time.time()
        allowed = limiter.hit(item, who)
        answered = time.time()
        assert allowed in {count < self.limit for count in self.counts(asked, answered)}
        if allowed:
            self.leaves.append((slot_start(asked, SLOT_OF_A_SECOND) + 1,
                                slot_start(answered, SLOT_OF_A_SECOND) + 1))
        return allowed

    def remaining(self, limiter, item, who: str) -> int:
        """`remaining` of the window stats, checked against the model."""
        asked = time.time()
        remaining = limiter.get_window_stats(item, who).remaining
        answered = time.time()
        assert remaining in {self.limit - count for count in self.counts(asked, answered)}
        return remaining


@pytest.mark.parametrize("strategy", SLIDING, ids=lambda s: s.__name__)
def test_sliding_window_forgets_each_hit_one_window_later(storage, strategy) -> None:
    """Hits leave the window one by one, a window after they happened (to a slot,
    1/200 of the window), not all at once. Every reply is checked against the model at
    both ends of its request, so a busy machine changes what is asserted, never whether
    it holds."""
    limiter = strategy(storage)
    item = limits.parse("3/second")
    who = ident()
    model = SlidingModel(3)
    before = time.time()
    assert model.hit(limiter, item, who) and model.hit(limiter, item, who)
    first = time.time()
    time.sleep(0.5)
    assert model.hit(limiter, item, who)
    model.hit(limiter, item, who)
    # The first two hits leave the window one second after the start of their slot (5
    # ms), a slot that starts no earlier than `before`'s and no later than `first`'s. The
    # storage reads the clock before its request, in whole milliseconds, so its reset time
    # is never later than that, and early by at most the read's length and a millisecond.
    earliest, latest = slot_start(before, SLOT_OF_A_SECOND) + 1, slot_start(first, SLOT_OF_A_SECOND) + 1
    asked = time.time()
    start, count = storage.get_moving_window(item.key_for(who), item.amount, item.get_expiry())
    answered = time.time()
    assert count in model.counts(asked, answered)
    if count == 3:
        assert earliest - (answered - asked) - 0.001 <= start + 1 <= latest
    asked = time.time()
    stats = limiter.get_window_stats(item, who)
    read = time.time() - asked
    assert 3 - stats.remaining in model.counts(asked, asked + read)
    if stats.remaining == 0:
        # limits' sliding-window counter adds the storage's "resets in" to a clock it
        # reads after the storage answered, so its reset time may also be late by the read.
        late = 0 if strategy is strategies.MovingWindowRateLimiter else read
        assert earliest - read - 0.001 <= stats.reset_time <= latest + late
    # Past the first two hits' leaving, 0.45 s before the third's: two remain.
    sleep_until(first + 1.05)
    assert model.remaining(limiter, item, who) >= 2
    assert [model.hit(limiter, item, who) for _ in range(3)][:2] == [True, True]


def test_fixed_window_starts_at_its_first_hit(storage, server) -> None:
    """limits' fixed window: it starts at its first hit and ends `expiry` after it,
    whatever the clock's second; refused hits count too."""
    limiter = strategies.FixedWindowRateLimiter(storage)
    item = limits.parse("2/second")
    who = ident()
    # Half-way through a second: an epoch-aligned window would end 0.5 s later.
    sleep_until(math.floor(time.time()) + 1.5)
    before = time.time()
    assert [limiter.hit(item, who) for _ in range(3)] == [True, True, False]
    first = time.time()
    ttl_ms = server.client().pttl(f"LIMITS:{{{item.key_for(who)}}}:fixed-window")
    assert 1000 - (time.time() - before) * 1000 - 1 <= ttl_ms <= 1000
    asked = time.time()
    stats = limiter.get_window_stats(item, who)
    assert stats.remaining == 0
    # The window ends a second after the first hit, which lies between `before` and
    # `first`; the storage reads the clock before asking, so never late.
    assert before + 1 - (time.time() - asked) - 0.002 <= stats.reset_time <= first + 1
    sleep_until(before + 0.8)
    refused = not limiter.hit(item, who)
    if time.time() < before + 1:  # answered before the window can have ended
        assert refused
    # The key expires a second after the first hit, by `first + 1` at the latest.
    sleep_until(first + 1.01)
    assert limiter.get_window_stats(item, who).remaining == 2
    assert limiter.hit(item, who)
    assert storage.get(item.key_for(who)) == 1


def test_fixed_window_script_is_loaded_once(storage, server) -> None:
    """A server that lacks the script gets it by one `EVAL`; then every hit is the
    `EVALSHA`."""
    admin = server.client()
    admin.script_flush()
    item = limits.parse("3/minute")
    who = ident()
    limiter = strategies.FixedWindowRateLimiter(storage)
    admin.config_resetstat()
    assert [limiter.hit(item, who) for _ in range(4)] == [True, True, True, False]
    calls = _commandstats(admin)
    assert (calls["evalsha"], calls["eval"]) == (4, 1)
    assert admin.script_exists(FIXED_WINDOW_SHA) == [True]


def test_counters_get_a_resolution_from_the_window(storage, server) -> None:
    t = tally.Tally(server.client())
    item = limits.parse("10/minute")
    who = ident()
    strategies.MovingWindowRateLimiter(storage).hit(item, who)
    strategies.FixedWindowRateLimiter(storage).hit(item, who)
    key = item.key_for(who)
    assert t.counter(f"LIMITS:{{{key}}}").info()["resolutions"] == [(60_000 // SLOTS_PER_WINDOW, SLOTS_PER_WINDOW)]
    assert server.client().get(f"LIMITS:{{{key}}}:fixed-window") == b"1"
    year = limits.parse("5/year")
    assert strategies.MovingWindowRateLimiter(storage).hit(year, who)
    assert t.counter(f"LIMITS:{{{year.key_for(who)}}}").info()["resolutions"] == [(155_520_000, 200)]
    strategies.MovingWindowRateLimiter(storage).clear(item, who)
    assert server.client().exists(f"LIMITS:{{{key}}}", f"LIMITS:{{{key}}}:fixed-window") == 0


def _commandstats(client: redis.Redis) -> dict[str, int]:
    return {name.removeprefix("cmdstat_"): stats["calls"]
            for name, stats in client.info("commandstats").items()}


@pytest.mark.parametrize("strategy", ALL, ids=lambda s: s.__name__)
def test_one_command_per_hit(storage, server, strategy) -> None:
    limiter = strategy(storage)
    item = limits.parse("5/minute")
    who = ident()
    limiter.hit(item, who)  # creates the counter
    admin = server.client()
    admin.config_resetstat()
    results = [limiter.hit(item, who) for _ in range(10)]
    calls = _commandstats(admin)
    calls.pop("config|resetstat", None)
    # What the module itself calls through the server (field TTLs on some servers), and
    # the fixed window's script (its calls count as commands too).
    internal = {name: calls.pop(name) for name in ("hpttl", "memory|usage", "incrby", "pttl")
                if name in calls}
    assert results == [True] * 4 + [False] * 6
    command = "evalsha" if strategy is strategies.FixedWindowRateLimiter else "tscounter.limit"
    assert calls == {command: 10}, internal


@pytest.mark.parametrize("strategy", SLIDING, ids=lambda s: s.__name__)
def test_one_command_per_window_read(storage, server, strategy) -> None:
    """A moving or sliding window's stats (count and reset time) are one
    `TSCOUNTER.LIMIT ... DETAILS` that writes nothing."""
    limiter = strategy(storage)
    item = limits.parse("5/minute")
    who = ident()
    first = time.time()
    assert limiter.hit(item, who) and limiter.hit(item, who)
    admin = server.client()
    admin.config_resetstat()
    stats, longest = [], 0.0
    for _ in range(3):
        asked = time.time()
        stats.append(limiter.get_window_stats(item, who))
        longest = max(longest, time.time() - asked + 0.001)
    calls = _commandstats(admin)
    calls.pop("config|resetstat", None)
    internal = {name: calls.pop(name) for name in ("hpttl", "memory|usage") if name in calls}
    assert calls == {"tscounter.limit": 3}, internal
    # The first hit leaves the window a minute after it, to a slot (0.3 s); a reset time
    # is early by at most its read's length and a millisecond.
    assert all(s.remaining == 3 and first + 60 - 60 / SLOTS_PER_WINDOW - longest <= s.reset_time <= time.time() + 60
               for s in stats)
    assert limiter.hit(item, who)


def test_a_counter_that_expired_is_created_again(storage, server) -> None:
    limiter = strategies.MovingWindowRateLimiter(storage)
    item = limits.parse("2/second")
    who = ident()
    assert limiter.hit(item, who)
    counter = f"LIMITS:{{{item.key_for(who)}}}"
    # The counter disappears once its slots are gone (1 s idle); this process then
    # sends CREATE again before its next hit.
    deadline = time.time() + 5
    while server.client().exists(counter) and time.time() < deadline:
        time.sleep(0.2)
    assert not server.client().exists(counter)
    assert limiter.hit(item, who) and limiter.hit(item, who) and not limiter.hit(item, who)
    assert tally.Tally(server.client()).counter(counter).info()["resolutions"] == [(5, 200)]


@pytest.mark.parametrize("strategy", ALL, ids=lambda s: s.__name__)
def test_threads_never_pass_the_limit(server, strategy) -> None:
    storage = storage_from_string(f"tally://{server.url}/0")
    limiter = strategy(storage)
    item = limits.parse("100/hour")
    who = ident()
    allowed = []
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        allowed.append(sum(limiter.hit(item, who) for _ in range(40)))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 320 hits, 100 allowed (a fixed window could only admit more across an hour's edge).
    assert sum(allowed) == 100 or (strategy is strategies.FixedWindowRateLimiter and sum(allowed) <= 200)
    assert limiter.get_window_stats(item, who).remaining == 0


def test_asyncio_storage(server) -> None:
    async def main() -> None:
        storage = storage_from_string(f"async+tally://{server.url}/0")
        assert await storage.check()
        item = limits.parse("50/hour")
        for strategy in (aio_strategies.MovingWindowRateLimiter,
                         aio_strategies.SlidingWindowCounterRateLimiter,
                         aio_strategies.FixedWindowRateLimiter):
            limiter = strategy(storage)
            who = ident()
            results = await asyncio.gather(*(limiter.hit(item, who) for _ in range(80)))
            assert sum(results) == 50, strategy
            assert not await limiter.test(item, who)
            stats = await limiter.get_window_stats(item, who)
            assert stats.remaining == 0 and stats.reset_time > time.time()
            await limiter.clear(item, who)
            assert (await limiter.get_window_stats(item, who)).remaining == 50
            assert await limiter.hit(item, who, cost=50) and not await limiter.hit(item, who)
        assert await storage.reset() >= 1
        await storage.storage.aclose()

    asyncio.run(main())


def test_reset_deletes_only_the_prefix(server) -> None:
    prefix = f"p{ident()}"
    storage = storage_from_string(f"tally://{server.url}/0", key_prefix=prefix)
    limiter = strategies.MovingWindowRateLimiter(storage)
    item = limits.parse("1/minute")
    for who in ("a", "b", "c"):
        limiter.hit(item, who)
    server.client().set(f"{prefix}-other", 1)
    assert storage.reset() == 3
    assert server.client().exists(f"{prefix}-other")
    assert limiter.hit(item, "a")


@pytest.mark.parametrize("strategy", ALL, ids=lambda s: s.__name__)
def test_a_counter_deleted_behind_the_storage_still_answers(storage, server, strategy) -> None:
    """Deleted by someone else while this process still knows it: the next hit makes
    the server create it with its default resolutions; reads count it all the same."""
    limiter = strategy(storage)
    item = limits.parse("5/minute")
    who = ident()
    assert limiter.hit(item, who)
    key = item.key_for(who)
    assert server.client().delete(f"LIMITS:{{{key}}}", f"LIMITS:{{{key}}}:fixed-window") == 1
    assert limiter.hit(item, who) and limiter.hit(item, who)
    stats = limiter.get_window_stats(item, who)
    assert stats.remaining == 3 and time.time() < stats.reset_time <= time.time() + 61
    assert limiter.test(item, who)


def test_uri_variants() -> None:
    unix = storage_from_string("tally+unix:///run/redis.sock")
    assert unix.storage.connection_pool.connection_kwargs["path"] == "/run/redis.sock"
    tls = storage_from_string("tallys://example:6380/2", key_prefix="rl")
    kwargs = tls.storage.connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"], tls.key_prefix) == ("example", 6380, 2, "rl")
    assert issubclass(tls.storage.connection_pool.connection_class, redis.SSLConnection)
    ready = redis.Redis()
    assert storage_from_string("tally://ignored:1", client=ready).storage is ready
    assert isinstance(storage_from_string("async+tally+unix:///s.sock").storage, redis.asyncio.Redis)


def test_storage_used_directly_with_any_key(storage) -> None:
    """limits' storage API called with a key that `key_for` did not make."""
    key = f"direct-{ident()}"
    assert storage.get(key) == 0
    assert storage.incr(key, 10) == 1 and storage.incr(key, 10, amount=4) == 5
    assert storage.get(key) == 5
    now = time.time()
    assert now + 10 - 1 < storage.get_expiry(key) <= now + 10
    assert storage.acquire_entry(key, 2, 10) and storage.acquire_entry(key, 2, 10)
    assert not storage.acquire_entry(key, 2, 10)
    asked = time.time()
    start, count = storage.get_moving_window(key, 2, 10)
    early = time.time() - asked + 0.001
    # Slots of 50 ms; the reset time is early by at most the read's length and a ms.
    assert count == 2 and now + 10 - 0.05 - early <= start + 10 <= time.time() + 10
    storage.clear(key)
    assert storage.get(key) == 0 and storage.get_moving_window(key, 2, 10)[1] == 0
