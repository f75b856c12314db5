"""The values tally's replies are parsed into."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class WindowState:
    """One window of a `DETAILS` limit: its sum after the call, the room left
    (`max(0, max - sum)`), and the milliseconds until its sum next falls if nothing
    else is written (0 when the sum is 0 or never falls)."""

    sum: int
    remaining: int
    reset_ms: int


@dataclass(frozen=True)
class Decision:
    """The answer of `TSCOUNTER.LIMIT`.

    `allowed`: the increment was applied. `retry_after_ms`: 0 when allowed; else the
    wait after which the same call would pass if nothing else were written, or -1
    when the increment is larger than some window's max (no wait helps). `sums`: each
    window's sum after the call, in the order the windows were given. `windows`:
    with `details=True`, each window's `WindowState` in the same order; else `None`.
    """

    allowed: bool
    retry_after_ms: int
    sums: list[int] = field(default_factory=list)
    windows: list[WindowState] | None = None

    def __bool__(self) -> bool:
        return self.allowed


@dataclass(frozen=True)
class MultiDecision:
    """The answer of `TSCOUNTER.MLIMIT`: one decision for every key at once.

    `allowed` and `retry_after_ms` as in `Decision`, for the whole call. `sums`: per
    key (as it was given), its windows' sums after the call; `windows`: with
    `details=True`, per key its `WindowState`s, else `None`.
    """

    allowed: bool
    retry_after_ms: int
    sums: dict[Any, list[int]] = field(default_factory=dict)
    windows: dict[Any, list[WindowState]] | None = None

    def __bool__(self) -> bool:
        return self.allowed


@dataclass(frozen=True)
class ThrottleDecision:
    """The answer of `TSTHROTTLE.ALLOW`.

    `allowed`: the request was admitted (and stored). `limit`: `max_burst + 1`.
    `remaining`: how many more requests of 1 fit now. `retry_after_ms`: 0 when allowed;
    else the wait before the same request fits, or -1 when its quantity is more than a
    whole burst. `reset_after_ms`: the wait until the subject is back to a full burst.
    Times are rounded up: waiting that long is enough.
    """

    allowed: bool
    limit: int
    remaining: int
    retry_after_ms: int
    reset_after_ms: int

    def __bool__(self) -> bool:
        return self.allowed


@dataclass(frozen=True)
class Summary:
    """The statistics of a window (`STATS.GET`) or of one period (`STATS.RANGE`).

    `count`, `min` and `max` are exact; `stddev` is the sample standard deviation
    (0 for one value); `p50`, `p90`, `p99` come from the sketch (1% relative error).
    """

    count: int
    sum: float
    mean: float
    min: float
    max: float
    stddev: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def from_map(cls, fields: dict[str, Any]) -> Summary:
        return cls(
            count=int(fields["count"]),
            **{name: float(fields[name]) for name in ("sum", "mean", "min", "max", "stddev", "p50", "p90", "p99")},
        )
