"""A `limits` storage on tally: `tally://host:port/db` and `async+tally://host:port/db`.

Importing `tally` registers both schemes in limits' storage registry (limits has no
plugin discovery: a `Storage` subclass with `STORAGE_SCHEME` registers itself when
its class is made), so `storage_from_string`, flask-limiter and slowapi accept them.

How each strategy maps onto keys, one per limit and identity:

* **moving-window** and **sliding-window-counter**: one counter `LIMITS:{<key>}` whose
  single resolution cuts the limit's window `W` into `SLOTS_PER_WINDOW` (200) slots of
  `W/200`, kept for one window. A hit is one `TSCOUNTER.LIMIT key cost W amount`: it
  counts the hit only if the 200 slots ending now hold at most `amount - cost`. A hit
  therefore stops counting between `W - W/200` and `W` after it happened (0.995-1.0 W),
  and no stretch of `0.995 W` ever admits more than `amount`. The sliding window counter
  is answered by the same exact sliding sum instead of limits' usual estimate from two
  fixed windows, so both strategies admit the same hits.
* **fixed-window**: one native string `LIMITS:{<key>}:fixed-window`, the count, started
  by its first hit and expiring `W` after it, as in limits' own storages: a hit is one
  `EVALSHA` of `FIXED_WINDOW` (`INCRBY`, and `PEXPIRE` when the key has no expiry).

Time is the server's clock, so application servers with skewed clocks share one
window. A sliding counter is created with its resolution (`TSCOUNTER.CREATE`, sent in the same
round trip as the hit) the first time this process writes it and again whenever the
key may have expired since (an idle counter disappears once all its slots are gone);
otherwise a hit is the one `TSCOUNTER.LIMIT`.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import limits.aio.storage as aio_storage
import limits.storage as sync_storage
import redis
import redis.asyncio

from . import _protocol as p

SLOTS_PER_WINDOW = 200
"""Slots per window for the moving and sliding strategies, each kept one window: a hit
stops counting at most 0.5% of the window before limits' storages forget it, within
the 1% limits' own tests allow, and a counter holds at most 200 slot counts (one per
slot that holds hits: about 70 bytes each at the server; 500 slots took more memory
than limits' own list at 1000/minute). 1000 ms * expiry is always a multiple of 200,
so slots are whole milliseconds (5 ms per second of window) and tile the window."""

FIXED_WINDOW = """\
local count = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) == -1 then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return count
"""
"""A fixed window's hit, as limits defines the window: it starts at its first hit (the
key has no expiry yet) and ends `ARGV[2]` ms later (the key expires, the count is gone).
A script, so that the count and the expiry it starts are one atomic command; the server
replicates its effects (`INCRBY`, then `PEXPIREAT` on Redis 7 and later)."""

FIXED_WINDOW_SHA = hashlib.sha1(FIXED_WINDOW.encode()).hexdigest()

KNOWN_KEYS_MAX = 100_000
"""How many counters a storage remembers as created before it starts afresh."""

_SCHEME_TO_REDIS = {
    "tally": "redis",
    "tallys": "rediss",
    "tally+unix": "unix",
    "tally+cluster": "redis",
}


def _client(uri: str, asyncio: bool, options: dict[str, Any]) -> Any:
    """The redis-py client of a `tally...://` (or `async+tally...://`) URI."""
    scheme, rest = uri.split("://", 1)
    scheme = scheme.removeprefix("async+")
    if scheme not in _SCHEME_TO_REDIS:
        raise ValueError(f"not a tally storage URI: {uri!r}")
    url = f"{_SCHEME_TO_REDIS[scheme]}://{rest}"
    module = redis.asyncio if asyncio else redis
    if scheme == "tally+cluster":
        return module.RedisCluster.from_url(url, **options)
    return module.from_url(url, **options)


class _Plan:
    """What every operation sends and how it reads the replies, for both storages.

    Each public method here is an op (see `_protocol`): the sync storage runs it with
    `run_sync`, the asyncio storage with `run_async`.
    """

    def __init__(self, key_prefix: str) -> None:
        self.key_prefix = key_prefix
        # counter key -> monotonic time until which it surely still exists
        self._known: dict[str, float] = {}

    # ------------------------------------------------------------ keys ----

    def sliding_key(self, key: str) -> str:
        return f"{self.key_prefix}:{{{key}}}"

    def fixed_key(self, key: str) -> str:
        # Same hash tag as the sliding key: one DEL clears both, in a cluster too.
        return f"{self.key_prefix}:{{{key}}}:fixed-window"

    def _creating(self, counter: str, resolution: str, command: p.Command) -> list[p.Command]:
        """`command`, preceded by the counter's `CREATE` unless it surely exists."""
        if self._known.get(counter, 0.0) > time.monotonic():
            return [command]
        return [("TSCOUNTER.CREATE", counter, "RESOLUTIONS", resolution), command]

    def _written(self, counter: str, lives_ms: int) -> None:
        """Records that `counter` exists for at least `lives_ms` more."""
        if len(self._known) >= KNOWN_KEYS_MAX:
            self._known.clear()
        self._known[counter] = time.monotonic() + lives_ms / 1000

    @staticmethod
    def _reply_of(replies: list) -> Any:
        """The last command's reply; a `CREATE` before it may only have found the key."""
        for reply in replies[:-1]:
            if isinstance(reply, Exception) and "already exists" not in str(reply):
                raise reply
        p.raise_errors(replies[-1:])
        return replies[-1]

    # ----------------------------------------------- moving and sliding ----

    def acquire(self, key: str, limit: int, expiry: int, amount: int) -> p.Op[bool]:
        """One hit of `amount` against `limit` per `expiry` seconds."""
        if amount > limit:
            return False
        window = expiry * 1000
        slot = window // SLOTS_PER_WINDOW
        counter = self.sliding_key(key)
        limit_cmd = ("TSCOUNTER.LIMIT", counter, amount, window, limit)
        if amount <= 0:
            # A check only: it writes nothing, so it never needs to create.
            commands = [limit_cmd]
        else:
            commands = self._creating(counter, f"{slot}:{SLOTS_PER_WINDOW}", limit_cmd)
        allowed = bool(int(self._reply_of((yield commands))[0]))
        if allowed and amount > 0:
            # The hit's slot is kept one window from its start: at least `window - slot`.
            self._written(counter, window - slot)
        return allowed

    def moving_window(self, key: str, expiry: int) -> p.Op[tuple[float, int]]:
        """`(start, count)`: the hits in the window and `start` such that
        `start + expiry` is when the oldest of them leaves it (epoch seconds).

        One `TSCOUNTER.LIMIT key 0 W 0 DETAILS`: a check that writes nothing (nor
        creates the key) and answers the window's sum and the milliseconds until its
        oldest counted slot leaves it, whatever resolutions the counter has.
        """
        window = expiry * 1000
        # The clock is read before the request, in whole milliseconds as the server's is:
        # the server answers `reset_ms` from a now no earlier than this one, so the reset
        # time reported is never later than the true one (early by the round trip at most).
        asked_ms = time.time_ns() // 1_000_000
        reply = (yield [("TSCOUNTER.LIMIT", self.sliding_key(key), 0, window, 0, "DETAILS")])[0]
        count, _, reset_ms = (int(x) for x in reply[2][0])
        if count <= 0:
            return asked_ms / 1000, 0
        return (asked_ms + reset_ms) / 1000 - expiry, count

    def sliding_window(self, key: str, expiry: int) -> p.Op[tuple[int, float, int, float]]:
        """limits' `(previous, previous_ttl, current, current_ttl)`, with the whole
        sliding sum as `current` so limits' weighting leaves it as it is."""
        start, count = yield from self.moving_window(key, expiry)
        if not count:
            return 0, 0.0, 0, 0.0
        resets_in = min(max(start + expiry - time.time(), 0.0), expiry - 0.001)
        return 0, 0.0, count, resets_in

    # ------------------------------------------------------------ fixed ----

    def incr(self, key: str, expiry: int, amount: int) -> p.Op[int]:
        """Adds `amount` to the fixed window's count: one `EVALSHA` of `FIXED_WINDOW`
        (one `EVAL` the first time a server has not seen it); `amount == 0` only reads."""
        if amount == 0:
            return (yield from self.get(key))
        counter = self.fixed_key(key)
        args = (1, counter, amount, expiry * 1000)
        reply = (yield p.Tolerant([("EVALSHA", FIXED_WINDOW_SHA, *args)]))[0]
        if isinstance(reply, redis.exceptions.NoScriptError):
            reply = (yield [("EVAL", FIXED_WINDOW, *args)])[0]
        p.raise_errors([reply])
        return int(reply)

    def get(self, key: str) -> p.Op[int]:
        reply = (yield [("GET", self.fixed_key(key))])[0]
        return 0 if reply is None else int(reply)

    def get_expiry(self, key: str) -> p.Op[float]:
        """When the fixed window ends (epoch seconds), or now for no window. The clock
        is read before the request, so the time is never later than the key's expiry."""
        asked_ms = time.time_ns() // 1_000_000
        ttl_ms = int((yield [("PTTL", self.fixed_key(key))])[0])
        return (asked_ms + max(ttl_ms, 0)) / 1000

    # ------------------------------------------------------------ admin ----

    def clear(self, key: str) -> p.Op[None]:
        counters = (self.sliding_key(key), self.fixed_key(key))
        for counter in counters:
            self._known.pop(counter, None)
        yield [("DEL", *counters)]


class _Operations:
    """The methods limits calls, written once for both storages: each runs an op of
    `_Plan` through `self._run` (plain or asyncio)."""

    _ASYNCIO = False

    def __init__(self, uri: str, key_prefix: str = "LIMITS", wrap_exceptions: bool = False,
                 client: Any = None, **options: Any) -> None:
        """`key_prefix` names the keys (`<prefix>:{<limits key>}`); `client` is a ready
        redis-py client; other options go to `redis.from_url`."""
        super().__init__(uri, wrap_exceptions=wrap_exceptions)  # type: ignore[call-arg]
        self.storage = client if client is not None else _client(uri, self._ASYNCIO, options)
        self.key_prefix = key_prefix
        self._plan = _Plan(key_prefix)

    def _run(self, op: Any) -> Any:
        raise NotImplementedError

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        return redis.RedisError

    def get_connection(self) -> Any:
        """The redis-py client (for `tally.Tally(storage.get_connection())`)."""
        return self.storage

    def incr(self, key: str, expiry: int, amount: int = 1) -> Any:
        return self._run(self._plan.incr(key, expiry, amount))

    def get(self, key: str) -> Any:
        return self._run(self._plan.get(key))

    def get_expiry(self, key: str) -> Any:
        return self._run(self._plan.get_expiry(key))

    def clear(self, key: str) -> Any:
        return self._run(self._plan.clear(key))

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> Any:
        return self._run(self._plan.acquire(key, limit, expiry, amount))

    def get_moving_window(self, key: str, limit: int, expiry: int) -> Any:
        return self._run(self._plan.moving_window(key, expiry))

    def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> Any:
        return self._run(self._plan.acquire(key, limit, expiry, amount))

    def get_sliding_window(self, key: str, expiry: int) -> Any:
        return self._run(self._plan.sliding_window(key, expiry))

    def clear_sliding_window(self, key: str, expiry: int) -> Any:
        return self._run(self._plan.clear(key))


class TallyStorage(_Operations, sync_storage.Storage, sync_storage.MovingWindowSupport,
                   sync_storage.SlidingWindowCounterSupport):
    """limits storage on tally (`tally://`, `tallys://`, `tally+unix://`,
    `tally+cluster://`). Options: `key_prefix` (default `LIMITS`), `client` (a ready
    `redis.Redis`/`RedisCluster`), the rest go to `redis.from_url`."""

    STORAGE_SCHEME = ["tally", "tallys", "tally+unix", "tally+cluster"]

    def _run(self, op: Any) -> Any:
        return p.run_sync(self.storage, op)

    def check(self) -> bool:
        """Whether the server answers."""
        try:
            return bool(self.storage.ping())
        except redis.RedisError:
            return False

    def reset(self) -> int:
        """Deletes every key under the prefix; how many."""
        keys = list(self.storage.scan_iter(match=f"{self.key_prefix}:*", count=1000))
        self._plan._known.clear()
        return sum(self.storage.delete(key) for key in keys)


class AsyncTallyStorage(_Operations, aio_storage.Storage, aio_storage.MovingWindowSupport,
                        aio_storage.SlidingWindowCounterSupport):
    """`TallyStorage` for limits' asyncio strategies (`async+tally://` ...), on
    `redis.asyncio`."""

    STORAGE_SCHEME = ["async+tally", "async+tallys", "async+tally+unix", "async+tally+cluster"]
    _ASYNCIO = True

    async def _run(self, op: Any) -> Any:
        return await p.run_async(self.storage, op)

    async def check(self) -> bool:
        """Whether the server answers."""
        try:
            return bool(await self.storage.ping())
        except redis.RedisError:
            return False

    async def reset(self) -> int:
        """Deletes every key under the prefix; how many."""
        keys = [key async for key in self.storage.scan_iter(match=f"{self.key_prefix}:*", count=1000)]
        self._plan._known.clear()
        return sum([await self.storage.delete(key) for key in keys])
