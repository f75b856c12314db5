"""Server time per hit of limits' moving window: limits' own Redis storage (a Lua
script over a list of timestamps) against tally's storage (one TSCOUNTER.LIMIT).

    python bench/moving_window_cost.py --port 6379 [--limits 1000/minute 10000/minute]

The server must have tally loaded. For each limit, one identity first gets
`amount / 2` hits spread evenly over 80% of a window (not measured: this gives the keys
the shape of steady traffic: tally's counter a stored slot for each 1/200 of the window
that holds a hit, limits' list half its entries), then `amount / 2` hits at once from
16 threads (all allowed: the window fills) and `amount` more (all refused). The figure
is the server's own time for the top-level commands of each phase (`INFO commandstats`,
after `CONFIG RESETSTAT`: EVALSHA for limits, TSCOUNTER.* for tally; a script's inner
calls are inside its time), divided by the hits. Client round trips are not counted.
"""

from __future__ import annotations

import argparse
import datetime
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import limits
import redis
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

import tally  # noqa: F401  (registers tally://)

TOP_LEVEL = ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_tscounter.")


def server_usec(client: redis.Redis) -> float:
    stats = client.info("commandstats")
    return sum(s["usec"] for name, s in stats.items() if name.startswith(TOP_LEVEL))


def paced(limiter: MovingWindowRateLimiter, item, who: str, hits: int, seconds: float) -> None:
    """`hits` hits spread evenly over `seconds`."""
    start = time.monotonic()
    for i in range(hits):
        time.sleep(max(0.0, start + i * seconds / hits - time.monotonic()))
        limiter.hit(item, who)


def burst(client: redis.Redis, limiter: MovingWindowRateLimiter, item, who: str, hits: int,
          threads: int) -> tuple[float, int]:
    """`hits` hits from `threads` threads at once: server usec per hit, hits allowed.
    Several clients keep the server busy, as in production, rather than idle between
    the round trips of one client."""
    client.config_resetstat()
    with ThreadPoolExecutor(threads) as pool:
        allowed = sum(pool.map(lambda _: limiter.hit(item, who), range(hits)))
    return server_usec(client) / hits, allowed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=6379)
    parser.add_argument("--limits", nargs="+", default=["1000/minute", "10000/minute"])
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    client = redis.Redis(port=args.port)
    info = client.info("server")
    print(f"# {datetime.date.today()} {info.get('redis_version')} "
          f"(server {info.get('server_name', 'redis')}), one identity, usec of server time per hit")
    print("| limit | storage | allowed (window filling) | refused (window full) | keys' memory |")
    print("|---|---|---|---|---|")
    for text in args.limits:
        item = limits.parse(text)
        for name, uri in (("limits `redis://`", f"redis://127.0.0.1:{args.port}"),
                          ("tally `tally://`", f"tally://127.0.0.1:{args.port}")):
            storage = storage_from_string(uri, key_prefix=f"bench-{uuid.uuid4().hex[:8]}")
            limiter = MovingWindowRateLimiter(storage)
            who = "user"
            half = item.amount // 2
            # The bursts run within the window's last 20%, before the first hits leave it.
            paced(limiter, item, who, half, 0.8 * item.get_expiry())
            filling, allowed = burst(client, limiter, item, who, item.amount - half, args.threads)
            full, refused_allowed = burst(client, limiter, item, who, item.amount, args.threads)
            assert allowed == item.amount - half and refused_allowed == 0, (allowed, refused_allowed)
            memory = sum(client.memory_usage(k) or 0 for k in client.scan_iter(match=f"{storage.key_prefix}:*"))
            print(f"| {text} | {name} | {filling:.2f} | {full:.2f} | {memory} B |", flush=True)
            storage.reset()


if __name__ == "__main__":
    main()
