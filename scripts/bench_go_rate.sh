#!/usr/bin/env bash
# Part of make bench (make bench-go alone): the server's time per Allow of the Go client's
# rate package (one TSTHROTTLE.ALLOW per call) against go-redis's redis_rate v10 (EVALSHA of
# its GCRA Lua script), both through their own Limiter.Allow at PerMinute(30), in the same
# server: a hot key (after the first burst almost every call is refused: a read) and 100k
# keys (most calls allowed: a write). usec_per_call from INFO commandstats after CONFIG
# RESETSTAT (tsthrottle.allow; evalsha, whose time includes the script's GET and SET), the
# best of BENCH_GO_ROUNDS runs of BENCH_GO_SECONDS each, sides alternating.
#
# redis_rate is fetched with the Go toolchain at the version and hash below into the module
# cache under .tools/go (nothing of it enters the repository); the driver,
# scripts/bench_go_rate/main.go, is built in a scratch module under .tools/ that requires it
# and this repository's clients/go.
#
# Environment: REDIS_SERVER (default redis-server on PATH), BENCH_MODULE (default
# target/release/libtally.so), BENCH_GO_SECONDS (1.5), BENCH_GO_ROUNDS (3).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VERSION=v10.0.1
SUM=h1:calPxi7tVlxojKunJwQ72kwfozdy25RjA0bCj1h0MUo=
SERVER=${REDIS_SERVER:-redis-server}
MODULE=${BENCH_MODULE:-$ROOT/target/release/libtally.so}
export GOPATH=$ROOT/.tools/go GOMODCACHE=$ROOT/.tools/go/mod GOCACHE=$ROOT/.tools/go/cache GOTOOLCHAIN=local
GO=${GO:-go}

[ -f "$MODULE" ] || { echo "bench-go: $MODULE is missing (make build)" >&2; exit 1; }
sum=$("$GO" mod download -json "github.com/go-redis/redis_rate/v10@$VERSION" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Sum"])')
[ "$sum" = "$SUM" ] || { echo "bench-go: redis_rate $VERSION has hash $sum, pinned $SUM" >&2; exit 1; }

SCRATCH=$ROOT/.tools/go-rate-bench
rm -rf "$SCRATCH" && mkdir -p "$SCRATCH"
cp scripts/bench_go_rate/main.go "$SCRATCH/"
cat >"$SCRATCH/go.mod" <<EOF
module ratebench

go 1.22

require (
	github.com/go-redis/redis_rate/v10 $VERSION
	github.com/redis/go-redis/v9 v9.18.0
	github.com/tally-redis/tally/clients/go v0.0.0
)

replace github.com/tally-redis/tally/clients/go => $ROOT/clients/go
EOF
cp clients/go/go.sum "$SCRATCH/go.sum"
(cd "$SCRATCH" && GOFLAGS="-mod=mod -buildvcs=false" "$GO" build -o ratebench .)

port=7479
while (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
DIR=$(mktemp -d /tmp/tally-bench-go.XXXXXX)
"$SERVER" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" \
    --loadmodule "$MODULE" >"$DIR/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
done

echo
echo "Go rate package (TSTHROTTLE.ALLOW) against redis_rate $VERSION (EVALSHA of its Lua), Limiter.Allow at PerMinute(30)"
echo "server:  $("$SERVER" --version | awk '{ print $3 }' | cut -d= -f2) ($(command -v "$SERVER")) with tally; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "columns: the server's usec per call (INFO commandstats, best of ${BENCH_GO_ROUNDS:-3}), ratio rate / redis_rate, calls/s of 50 Go callers"
"$SCRATCH/ratebench" -addr "127.0.0.1:$port" -seconds "${BENCH_GO_SECONDS:-1.5}" -rounds "${BENCH_GO_ROUNDS:-3}"
