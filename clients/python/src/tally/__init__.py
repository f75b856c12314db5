"""tally for Python: typed helpers for the tally Redis module over redis-py, and a
`limits` storage (`tally://`, `async+tally://`) registered when this package is
imported, for flask-limiter, slowapi and limits itself."""

from .client import Counter, Leaderboard, Stats, Tally, Throttle
from .types import Decision, MultiDecision, Summary, ThrottleDecision, WindowState

try:  # the storage needs `limits` (the `limits` extra); without it the helpers still work
    from .storage import AsyncTallyStorage, TallyStorage
except ImportError:  # pragma: no cover
    pass

__version__ = "0.1.0"

__all__ = [
    "AsyncTallyStorage",
    "Counter",
    "Decision",
    "Leaderboard",
    "MultiDecision",
    "Stats",
    "Summary",
    "Tally",
    "TallyStorage",
    "Throttle",
    "ThrottleDecision",
    "WindowState",
]
