"""The values tally's replies are parsed into."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Decision:
    """The answer of `TSCOUNTER.LIMIT`.

    `allowed`: the increment was applied. `retry_after_ms`: 0 when allowed; else the
    wait after which the same call would pass if nothing else were written, or -1
    when the increment is larger than some window's max (no wait helps). `sums`: each
    window's sum after the call, in the order the windows were given.
    """

    allowed: bool
    retry_after_ms: int
    sums: list[int] = field(default_factory=list)

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
