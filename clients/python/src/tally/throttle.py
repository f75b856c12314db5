"""Smooth rate limits: `Tally(client).throttle(key).allow(max_burst, count, period)`
(`TSTHROTTLE.ALLOW`, the generic cell rate algorithm on one native string per subject)."""

from __future__ import annotations

from typing import Any

from . import _protocol as p
from ._protocol import Duration, Timestamp
from .client import _Handle
from .types import ThrottleDecision


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
            p.duration(period),
            "QUANTITY",
            int(quantity),
            *p.at(at),
            parse=_throttle_decision,
        )
