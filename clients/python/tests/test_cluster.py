"""A three-primary Redis Cluster: the helpers (sync and asyncio RedisCluster) and
the storage (`tally+cluster://`) reach every key through redis-py's routing."""

from __future__ import annotations

import asyncio
import random
import socket
import subprocess
import time
import uuid

import limits
import pytest
import redis
import redis.asyncio
from limits import strategies
from limits.storage import storage_from_string

import tally
from conftest import Server, server_kinds


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is free too."""
    while True:
        port = random.randint(20000, 40000)
        if _bindable(port) and _bindable(port + 10000):
            return port


@pytest.fixture(scope="module")
def cluster():
    name, binary = next((k for k in server_kinds() if k[0] == "redis"), server_kinds()[0])
    nodes = []
    try:
        for _ in range(3):
            nodes.append(Server(f"{name}-cluster", binary, "--cluster-enabled", "yes",
                                "--cluster-config-file", "nodes.conf", port=cluster_port()))
        subprocess.run(["redis-cli", "--cluster", "create", *(n.url for n in nodes),
                        "--cluster-replicas", "0", "--cluster-yes"],
                       check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 30
        while any(n.client().cluster("info")["cluster_state"] != "ok" for n in nodes):
            assert time.monotonic() < deadline, "cluster not ok"
            time.sleep(0.1)
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def test_helpers_route_to_each_key(cluster) -> None:
    rc = redis.RedisCluster(host="127.0.0.1", port=cluster[0].port, decode_responses=True)
    t = tally.Tally(rc)
    run = uuid.uuid4().hex
    keys = [f"c:{run}:{i}" for i in range(30)]  # spread over the three primaries
    for i, k in enumerate(keys):
        assert t.counter(k).incrby(i + 1) == i + 1
        assert t.counter(k).limit(1, {"1m": i + 1}).allowed is False
    assert [t.counter(k).sum("1m")[0] for k in keys] == list(range(1, 31))
    assert len({rc.keyslot(k) * 3 // 16384 for k in keys}) == 3
    board = t.leaderboard(f"{{likes:{run}}}")
    assert board.incrby({"a": 2, "b": 1}) == {"a": 2, "b": 1}
    assert board.top(10) == [("a", 2), ("b", 1)]
    with pytest.raises(redis.ResponseError, match="hash tag"):
        t.leaderboard(f"likes:{run}").incr("a")
    # MLIMIT's keys share a slot through a hash tag; keys of two slots are refused.
    tagged = {f"{{u:{run}}}:user": {"1m": 1}, f"{{u:{run}}}:ip": {"1m": 5}}
    assert t.mlimit(tagged) == tally.MultiDecision(True, 0, {k: [1] for k in tagged})
    assert t.mlimit(tagged).retry_after_ms > 0
    with pytest.raises((redis.ResponseError, redis.exceptions.RedisClusterException), match="slot"):
        t.mlimit({f"a:{run}": {"1m": 1}, f"b:{run}": {"1m": 1}})
    assert rc.exists(f"a:{run}", f"b:{run}") == 0
    stats = t.stats(f"lat{{{run}}}")
    assert stats.add(5, 7, report=(f"slow{{{run}}}", "/")) == 2
    assert stats.get().mean == 6.0
    # Reads across keys route by their declared keys too.
    assert t.msum([f"{{u:{run}}}:user", f"{{u:{run}}}:ip", f"{{u:{run}}}:none"], "1m", "1h") == [2, 2]
    assert t.stats(f"lat2{{{run}}}").add(9, report=(f"slow{{{run}}}", "/2"), by="max") == 1
    assert t.mget([f"lat{{{run}}}", f"lat2{{{run}}}"]).max == 9.0
    assert t.mquantile([f"lat{{{run}}}", f"lat2{{{run}}}"], 0, 1) == [5.0, 9.0]
    assert rc.zscore(f"slow{{{run}}}", "/2") == 9.0
    with pytest.raises((redis.ResponseError, redis.exceptions.RedisClusterException), match="slot"):
        t.msum([f"a:{run}", f"b:{run}"], "1m")
    rc.close()


def test_asyncio_cluster(cluster) -> None:
    async def main() -> None:
        rc = redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster[0].port)
        t = tally.Tally(rc)
        run = uuid.uuid4().hex
        for i in range(10):
            assert await t.counter(f"a:{run}:{i}").incrby(i) == i
        assert [(await t.counter(f"a:{run}:{i}").sum("1m"))[0] for i in range(10)] == list(range(10))
        await rc.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("strategy", [strategies.MovingWindowRateLimiter, strategies.FixedWindowRateLimiter],
                         ids=lambda s: s.__name__)
def test_storage_on_a_cluster(cluster, strategy) -> None:
    storage = storage_from_string(f"tally+cluster://{cluster[0].url}", key_prefix=uuid.uuid4().hex)
    limiter = strategy(storage)
    item = limits.parse("2/hour")
    users = [uuid.uuid4().hex for _ in range(12)]
    for who in users:
        assert [limiter.hit(item, who) for _ in range(3)] == [True, True, False]
        assert limiter.get_window_stats(item, who).remaining == 0
    for who in users[:6]:
        limiter.clear(item, who)
        assert limiter.test(item, who)
    assert storage.reset() == 6  # the other six, wherever they live
    assert all(limiter.test(item, who) for who in users)
