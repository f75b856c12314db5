"""How early the moving window's reset time is on tally, against limits' definition
(the oldest hit leaves the window exactly `W` after it happened).

    python bench/reset_accuracy.py --port 6379 [--limits 1/second 1/minute] [--samples 200]

For each limit, `samples` fresh identities each get one hit; the client clock is read
just before (`before`) and just after (`after`) the hit, then `get_window_stats` answers
`reset_time`. The hit happened between `before` and `after`, so limits would reset it
between `before + W` and `after + W`: the figures are the largest and the mean of
`after + W - reset_time` (how early tally's reset is at most, the round trip included)
and the slot (`W / SLOTS_PER_WINDOW`, `W / 200`), which bounds it but for the round trip.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import limits
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

import tally  # noqa: F401  (registers tally://)
from tally.storage import SLOTS_PER_WINDOW


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=6379)
    parser.add_argument("--limits", nargs="+", default=["1/second", "1/minute"])
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    storage = storage_from_string(f"tally://127.0.0.1:{args.port}",
                                  key_prefix=f"bench-{uuid.uuid4().hex[:8]}")
    limiter = MovingWindowRateLimiter(storage)
    print("| limit | slot | reset early by, at most | mean |")
    print("|---|---|---|---|")
    for text in args.limits:
        item = limits.parse(text)
        window = item.get_expiry()
        early = []
        for i in range(args.samples):
            who = f"who-{i}"
            time.sleep(window / SLOTS_PER_WINDOW * (i % 7) / 7)  # land anywhere in a slot
            limiter.hit(item, who)
            after = time.time()
            early.append(after + window - limiter.get_window_stats(item, who).reset_time)
        slot_ms = window * 1000 / SLOTS_PER_WINDOW
        print(f"| {text} | {slot_ms:g} ms | {max(early) * 1000:.1f} ms "
              f"({max(early) / window:.3%} of the window) | {statistics.mean(early) * 1000:.1f} ms |",
              flush=True)
    storage.reset()


if __name__ == "__main__":
    main()
