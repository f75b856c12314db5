"""Typed helpers for tally's commands over a redis-py client.

`Tally(redis.Redis())` answers plain values; `Tally(redis.asyncio.Redis())` answers
awaitables of the same values. Each command carries its key first, so a
`RedisCluster` (sync or asyncio) routes it like any native command.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, Mapping, Union

from . import _protocol as p
from ._protocol import Duration, Key, Timestamp
from .types import Decision, MultiDecision, Summary, ThrottleDecision, WindowState

Member = Union[str, bytes]
Resolution = Union[str, bytes, "tuple[Duration, int]"]
Windows = Union[Mapping[Duration, int], Iterable["tuple[Duration, int]"]]


class Tally:
    """Entry point: `Tally(client)` then `.counter(key)`, `.leaderboard(key)`,
    `.stats(key)`, `.throttle(key)`. Making these handles costs no round trip."""

    def __init__(self, client: Any) -> None:
        self.client = client
        driver = p.run_async if p.is_async_client(client) else p.run_sync
        self._run = functools.partial(driver, client)

    def counter(self, key: Key) -> Counter:
        return Counter(self, key)

    def leaderboard(self, key: Key) -> Leaderboard:
        return Leaderboard(self, key)

    def stats(self, key: Key) -> Stats:
        return Stats(self, key)

    def throttle(self, key: Key) -> Throttle:
        return Throttle(self, key)

    def mlimit(
        self,
        limits: Mapping[Key, Windows] | Iterable[tuple[Key, Windows]],
        increment: int = 1,
        at: Timestamp | None = None,
        details: bool = False,
    ) -> MultiDecision:
        """`TSCOUNTER.MLIMIT`: applies `increment` to every counter only if every
        window of every counter allows it, else writes nothing anywhere.
        `limits` is `{key: {"1m": 10, "1h": 100}, ...}` (1 to 16 keys, each with 1
        to 16 windows given as a mapping or pairs; `(key, windows)` pairs work too). In a cluster the keys must share
        a hash slot (a hash tag: `{user:42}:ip`); the server answers `CROSSSLOT`
        otherwise."""
        items = list(limits.items() if isinstance(limits, Mapping) else limits)
        keys = [k for k, _ in items]
        args: list[Any] = [len(keys), *keys, int(increment)]
        for _, windows in items:
            pairs = _window_args(windows)
            args += [len(pairs) // 2, *pairs]
        args += [*p.at(at), *(("DETAILS",) if details else ())]

        def parse(reply: Any) -> MultiDecision:
            allowed, retry_after_ms, per_key = reply
            states = [_window_states(rows, details) for rows in per_key]
            return MultiDecision(
                bool(int(allowed)),
                int(retry_after_ms),
                {k: sums for k, (sums, _) in zip(keys, states)},
                {k: ws for k, (_, ws) in zip(keys, states)} if details else None,  # type: ignore[misc]
            )

        return self._run(p.single(("TSCOUNTER.MLIMIT", *args), parse))

    def msum(self, keys: Iterable[Key], *windows: Duration, at: Timestamp | None = None) -> list[int]:
        """`TSCOUNTER.MSUM`: each window ending at `at` (default now) summed over the
        counters `keys` (1 to 1000; a missing key counts 0), in window order. In a
        cluster the keys must share a hash slot (`{svc}:/login`)."""
        keys = list(keys)
        command = ("TSCOUNTER.MSUM", len(keys), *keys, *map(p.duration, windows), *p.at(at))
        return self._run(p.single(command, p.integers))

    def mget(self, keys: Iterable[Key], window: Duration | None = None) -> Summary | None:
        """`STATS.MGET`: the summary of the values of every object's current period (or
        latest `window`), as if they were one object; `None` when all are empty."""
        keys = list(keys)
        return self._run(p.single(("STATS.MGET", len(keys), *keys, *p.window(window)), _summary))

    def mquantile(self, keys: Iterable[Key], *qs: float, window: Duration | None = None) -> list[float] | None:
        """`STATS.MQUANTILE`: quantiles of the values of every object's window."""
        keys = list(keys)
        command = ("STATS.MQUANTILE", len(keys), *keys, *(float(q) for q in qs), *p.window(window))
        return self._run(p.single(command, _numbers))


class _Handle:
    """One tally object: a key and the client that reaches it."""

    def __init__(self, tally: Tally, key: Key) -> None:
        self.tally = tally
        self.key = key

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.key!r})"

    def _call(self, *command: Any, parse: Any) -> Any:
        """Sends one command with this key first; the parsed reply (or its awaitable)."""
        return self.tally._run(p.single((command[0], self.key, *command[1:]), parse))


def _resolution(value: Resolution) -> Any:
    if isinstance(value, (str, bytes)):
        return value
    res, samples = value
    return f"{p.text(p.duration(res))}:{int(samples)}"


def _counter_info(reply: Any) -> dict[str, Any] | None:
    fields = p.mapping(reply)
    if fields is None:
        return None
    return {
        "resolutions": [(int(res), int(samples)) for res, samples in fields["resolutions"]],
        "slots": int(fields["slots"]),
        "first": p.optional_int(fields["first"]),
        "last": p.optional_int(fields["last"]),
        "memory": int(fields["memory"]),
    }


def _window_args(windows: Windows) -> list[Any]:
    """`window max` pairs, flat, from a mapping or pairs."""
    items = windows.items() if isinstance(windows, Mapping) else windows
    return [arg for window, most in items for arg in (p.duration(window), int(most))]


def _window_states(rows: Any, details: bool) -> tuple[list[int], list[WindowState] | None]:
    """A limit's per-window element: the sums, and with `DETAILS` the states."""
    if not details:
        return [int(s) for s in rows], None
    states = [WindowState(int(s), int(remaining), int(reset)) for s, remaining, reset in rows]
    return [w.sum for w in states], states


def _decision(details: bool) -> Any:
    def parse(reply: Any) -> Decision:
        allowed, retry_after_ms, rows = reply
        sums, states = _window_states(rows, details)
        return Decision(bool(int(allowed)), int(retry_after_ms), sums, states)

    return parse


class Counter(_Handle):
    """A multi-resolution counter (`TSCOUNTER.*`)."""

    def create(self, resolutions: Iterable[Resolution] | None = None) -> None:
        """`TSCOUNTER.CREATE`; `resolutions` like `["1s:60", "1m:60"]` or
        `[("1s", 60), (timedelta(minutes=1), 60)]`. Raises if the key exists."""
        args = () if resolutions is None else ("RESOLUTIONS", *map(_resolution, resolutions))
        return self._call("TSCOUNTER.CREATE", *args, parse=p.ok)

    def incr(self, at: Timestamp | None = None) -> int:
        """Adds 1; the new count of the finest slot that keeps `at` (default now)."""
        return self._call("TSCOUNTER.INCR", *p.at(at), parse=p.integer)

    def incrby(self, increment: int, at: Timestamp | None = None) -> int:
        return self._call("TSCOUNTER.INCRBY", int(increment), *p.at(at), parse=p.integer)

    def sum(self, *windows: Duration, at: Timestamp | None = None) -> list[int]:
        """The events in each window ending at `at` (default now), in order."""
        return self._call("TSCOUNTER.SUM", *map(p.duration, windows), *p.at(at), parse=p.integers)

    def range(
        self,
        resolution: Duration,
        empty: bool = False,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
    ) -> list[tuple[int, int]]:
        """`(slot_start, count)` of one resolution, oldest first; `empty` lists zeros too."""
        args: tuple = (p.duration(resolution),)
        if start is not None:
            args += ("FROM", p.timestamp(start))
        if end is not None:
            args += ("TO", p.timestamp(end))
        if empty:
            args += ("EMPTY",)
        return self._call("TSCOUNTER.RANGE", *args, parse=p.int_pairs)

    def info(self) -> dict[str, Any] | None:
        """`{"resolutions": [(res_ms, samples)], "slots", "first", "last", "memory"}`,
        or `None` for a missing key."""
        return self._call("TSCOUNTER.INFO", parse=_counter_info)

    def limit(
        self, increment: int, windows: Windows, at: Timestamp | None = None, details: bool = False
    ) -> Decision:
        """`TSCOUNTER.LIMIT`: applies `increment` only if every window's sum plus it
        stays within its max; `windows` is `{"5s": 5, "1m": 100}` or pairs.
        `details=True` also answers each window's room left and reset time
        (`Decision.windows`)."""
        args = _window_args(windows) + [*p.at(at), *(("DETAILS",) if details else ())]
        return self._call("TSCOUNTER.LIMIT", int(increment), *args, parse=_decision(details))


def _board_info(reply: Any) -> dict[str, Any] | None:
    fields = p.mapping(reply)
    if fields is None:
        return None
    return {name: p.optional_int(value) for name, value in fields.items()}


def _ranking(reply: Any) -> list[tuple[Any, int]]:
    return [(member, int(total)) for member, total in p.pairs(reply)]


def _optional_ints(reply: Any) -> list[int | None]:
    return [p.optional_int(total) for total in reply]


class Leaderboard(_Handle):
    """A sliding-window leaderboard (`TSRANK.*`). Members come back as redis-py gives
    them: `str` with `decode_responses=True`, `bytes` otherwise."""

    def create(
        self,
        window: Duration | None = None,
        slot: Duration | None = None,
        capacity: int | None = None,
    ) -> None:
        """Creates the board. `capacity=k` keeps at most `k` members per slot (a
        Space-Saving summary: bounded memory for millions of members, totals within
        `info()["error"]` of the truth; increments must then be positive)."""
        args: tuple = ()
        if window is not None:
            args += ("WINDOW", p.duration(window))
        if slot is not None:
            args += ("SLOT", p.duration(slot))
        if capacity is not None:
            args += ("CAPACITY", int(capacity))
        return self._call("TSRANK.CREATE", *args, parse=p.ok)

    def incrby(
        self,
        increments: Mapping[Member, int] | Iterable[tuple[Member, int]],
        at: Timestamp | None = None,
    ) -> dict[Member, int]:
        """Adds to several members at once; `{member: new window total}`. A negative
        increment (an unlike) lowers the member's count in the slot of `at`; a call that
        would take a count below 0 is refused whole (`count would go below zero`)."""
        items = list(increments.items() if isinstance(increments, Mapping) else increments)
        args = [arg for member, increment in items for arg in (int(increment), member)]

        def totals(reply: Any) -> dict[Member, int]:
            return dict(zip((member for member, _ in items), p.integers(reply)))

        return self._call("TSRANK.INCRBY", *args, *p.at(at), parse=totals)

    def incr(self, member: Member, increment: int = 1, at: Timestamp | None = None) -> int:
        """Adds to one member (a negative increment lowers its count); its new window
        total."""
        return self._call("TSRANK.INCRBY", int(increment), member, *p.at(at), parse=p.integer)

    def top(self, count: int, offset: int = 0, window: Duration | None = None) -> list[tuple[Any, int]]:
        """`(member, total)`, highest first (ties by member, descending)."""
        args: tuple = (int(count),) + (("OFFSET", int(offset)) if offset else ())
        return self._call("TSRANK.TOP", *args, "WITHSCORES", *p.window(window), parse=_ranking)

    def score(self, member: Member) -> int | None:
        return self._call("TSRANK.SCORE", member, parse=p.optional_int)

    def scores(self, *members: Member) -> list[int | None]:
        """Each member's window total (`None` for one without), in order (`MSCORE`)."""
        if not members:
            raise ValueError("scores needs at least one member")
        return self._call("TSRANK.MSCORE", *members, parse=_optional_ints)

    def rank(self, member: Member, ties: bool = False) -> int | None:
        """0 for the highest total; `None` for a member without one. With `ties=True`, the
        competition rank: how many members have a strictly higher total (totals 9, 7, 7,
        5 rank 0, 1, 1, 3)."""
        return self._call("TSRANK.RANK", member, *(("TIES",) if ties else ()), parse=p.optional_int)

    def around(self, member: Member, count: int) -> list[tuple[Any, int]]:
        """`(member, total)` from `count` places above `member` to `count` below it, in
        `top`'s order (fewer at the ends); empty for a member without a total. `count` is
        0 to 1000."""
        return self._call("TSRANK.AROUND", member, int(count), "WITHSCORES", parse=_ranking)

    def history(self, member: Member, window: Duration | None = None) -> list[tuple[int, int]]:
        """`(slot_start, count)` of the member's non-zero slots, oldest first."""
        return self._call("TSRANK.HISTORY", member, *p.window(window), parse=p.int_pairs)

    def info(self) -> dict[str, Any] | None:
        """`{"window", "slot", "members", "slots", "oldest", "capacity", "error"}` or
        `None` (`capacity` and `error` are 0 on an exact board)."""
        return self._call("TSRANK.INFO", parse=_board_info)

    def rem(self, *members: Member) -> int:
        """Removes members entirely (their totals and their counts in every slot); how
        many of them had a non-zero window total."""
        if not members:
            raise ValueError("rem needs at least one member")
        return self._call("TSRANK.REM", *members, parse=p.integer)


def _summary(reply: Any) -> Summary | None:
    fields = p.mapping(reply)
    return None if fields is None else Summary.from_map(fields)


def _numbers(reply: Any) -> list[float] | None:
    return None if reply is None else [float(x) for x in reply]


def _periods(reply: Any) -> list[tuple[int, Summary]]:
    return [(int(start), Summary.from_map(p.mapping(fields) or {})) for start, fields in reply]


def _stats_info(reply: Any) -> dict[str, int] | None:
    fields = p.mapping(reply)
    return None if fields is None else {name: int(value) for name, value in fields.items()}


class Stats(_Handle):
    """Windowed statistics (`STATS.*`)."""

    def create(self, period: Duration | None = None, keep: int | None = None) -> None:
        args: tuple = ()
        if period is not None:
            args += ("PERIOD", p.duration(period))
        if keep is not None:
            args += ("KEEP", int(keep))
        return self._call("STATS.CREATE", *args, parse=p.ok)

    def add(
        self,
        *values: float,
        at: Timestamp | None = None,
        report: tuple[Key, Member] | tuple[Key, Member, int] | None = None,
        by: str | None = None,
    ) -> int:
        """Adds values to the period of `at` (default now); the period's count.
        `report=(rankkey, member[, keep])` also ranks the period in `rankkey` by its
        mean, or by `by`: `"max"`, `"count"`, `"sum"`, `"p50"`, `"p90"`, `"p99"`."""
        args: tuple = tuple(float(v) for v in values) + p.at(at)
        if report is not None:
            rankkey, member, *keep = report
            args += ("REPORT", rankkey, member) + (("KEEP", int(keep[0])) if keep else ())
            if by is not None:
                args += ("BY", by)
        elif by is not None:
            raise ValueError("by ranks a REPORT: give report=(rankkey, member) too")
        return self._call("STATS.ADD", *args, parse=p.integer)

    def get(self, window: Duration | None = None) -> Summary | None:
        """The current period's summary, or the latest `window`'s; `None` when empty."""
        return self._call("STATS.GET", *p.window(window), parse=_summary)

    def quantile(self, *qs: float, window: Duration | None = None) -> list[float] | None:
        return self._call("STATS.QUANTILE", *(float(q) for q in qs), *p.window(window), parse=_numbers)

    def cdf(self, *values: float, window: Duration | None = None) -> list[float] | None:
        """The share of the window's values at or below each value (`STATS.CDF`)."""
        return self._call("STATS.CDF", *(float(v) for v in values), *p.window(window), parse=_numbers)

    def range(self, start: Timestamp | None = None, end: Timestamp | None = None) -> list[tuple[int, Summary]]:
        """`(period_start, Summary)` of every stored period, oldest first."""
        args: tuple = ()
        if start is not None:
            args += ("FROM", p.timestamp(start))
        if end is not None:
            args += ("TO", p.timestamp(end))
        return self._call("STATS.RANGE", *args, parse=_periods)

    def info(self) -> dict[str, int] | None:
        """`{"period", "keep", "periods", "memory"}` or `None`."""
        return self._call("STATS.INFO", parse=_stats_info)


def _throttle_decision(reply: Any) -> ThrottleDecision:
    allowed, limit, remaining, retry_after_ms, reset_after_ms = reply
    return ThrottleDecision(
        bool(int(allowed)), int(limit), int(remaining), int(retry_after_ms), int(reset_after_ms)
    )


class Throttle(_Handle):
    """One limited subject (`TSTHROTTLE.*`): its key holds when its earlier requests are
    paid off, and expires once it is back to a full burst."""

    def allow(
        self,
        max_burst: int,
        count: int,
        period: Duration,
        quantity: int = 1,
        at: Timestamp | None = None,
    ) -> ThrottleDecision:
        """`TSTHROTTLE.ALLOW`: admits `quantity` at `count` per `period` with bursts of
        `max_burst` (`max_burst + 1` at once); refused requests write nothing, and
        `quantity=0` only checks."""
        return self._call(
            "TSTHROTTLE.ALLOW",
            int(max_burst),
            int(count),
            p.period(period),
            "QUANTITY",
            int(quantity),
            *p.at(at),
            parse=_throttle_decision,
        )
