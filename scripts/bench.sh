#!/usr/bin/env bash
# make bench: redis-benchmark against tally's commands and, in the same run on the same
# server, against native commands and Lua scripts equivalent to the hand-built designs
# of shared/seeds. Prints requests/s and the ratios the issues ask for.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PORT=${BENCH_PORT:-7379}
N=${BENCH_N:-200000}          # requests per test
CLIENTS=${BENCH_CLIENTS:-50}
DIR=$(mktemp -d /tmp/tally-bench.XXXXXX)
CLI=(redis-cli -p "$PORT")

redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" \
    --daemonize yes --logfile "$DIR/log" --loadmodule "$ROOT/target/release/libtally.so"
trap '"${CLI[@]}" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
for _ in $(seq 50); do "${CLI[@]}" ping >/dev/null 2>&1 && break; sleep 0.1; done

declare -A RPS
ORDER=()
# bench NAME [redis-benchmark args...] -- COMMAND...: records requests/s of one test.
bench() {
    local name=$1; shift
    local opts=()
    while [ "$1" != "--" ]; do opts+=("$1"); shift; done
    shift
    local line
    line=$(redis-benchmark -p "$PORT" -c "$CLIENTS" -n "$N" "${opts[@]}" --csv "$@" | tail -n 1)
    RPS[$name]=$(echo "$line" | cut -d, -f2 | tr -d '"')
    ORDER+=("$name")
    printf '%-44s %12s req/s\n' "$name" "${RPS[$name]}"
}

NOW_MS=$(( $("${CLI[@]}" time | head -1) * 1000 ))
RING="1s:60 1m:60 1h:24 1d:365"

# --- fixtures -----------------------------------------------------------------------
# A ring counter with 180 days of history (risk control, seed 002) for SUM.
"${CLI[@]}" del ring hot plainhash >/dev/null
"${CLI[@]}" tscounter.create ring RESOLUTIONS $RING >/dev/null
for d in $(seq 0 179); do
    echo "TSCOUNTER.INCRBY ring 3 AT $(( NOW_MS - d * 86400000 ))"
done | "${CLI[@]}" >/dev/null
for s in $(seq 0 3 3599); do
    echo "TSCOUNTER.INCRBY ring 1 AT $(( NOW_MS - s * 1000 ))"
done | "${CLI[@]}" >/dev/null
"${CLI[@]}" hset plainhash f 42 >/dev/null

# Seeds 001/003: one update = ZADD known: + HINCRBY for each of 7 precisions.
LUA_COUNTER='local now = tonumber(redis.call("TIME")[1])
for _, p in ipairs({1, 5, 60, 300, 3600, 18000, 86400}) do
  local hash = p .. ":" .. KEYS[1]
  redis.call("ZADD", "known:", 0, hash)
  redis.call("HINCRBY", "count:" .. hash, math.floor(now / p) * p, ARGV[1])
end
return 1'
SHA_COUNTER=$("${CLI[@]}" script load "$LUA_COUNTER")

echo "tally benchmark: $N requests x $CLIENTS clients, redis-server $(redis-server --version | awk '{print $3}'), $(nproc) cores"
echo
bench "HINCRBY (hot key)"                           -- HINCRBY plainhash f 1
bench "HGET"                                        -- HGET plainhash f
bench "TSCOUNTER.INCR (hot key, default res)"       -- TSCOUNTER.INCR hot
bench "TSCOUNTER.INCR (100k keys, default res)" -r 100000 -- TSCOUNTER.INCR "c:__rand_int__"
bench "TSCOUNTER.INCR (ring key, 180 days of history)" -- TSCOUNTER.INCR ring
bench "Lua seed 001/003 update (7 precisions)"      -- EVALSHA "$SHA_COUNTER" 1 hits 1
bench "TSCOUNTER.SUM 5s 5m 5h 5d 180d (ring)"       -- TSCOUNTER.SUM ring 5s 5m 5h 5d 180d
bench "TSCOUNTER.SUM 1m 5m 1h 5h 1d (hot key)"      -- TSCOUNTER.SUM hot 1m 5m 1h 5h 1d

# ratio lines: "label|numerator test|denominator test"
RATIOS=(
  "TSCOUNTER.INCR hot / HINCRBY [>= 0.5]|TSCOUNTER.INCR (hot key, default res)|HINCRBY (hot key)"
  "TSCOUNTER.INCR 100k keys / HINCRBY [>= 0.5]|TSCOUNTER.INCR (100k keys, default res)|HINCRBY (hot key)"
  "TSCOUNTER.INCR ring / HINCRBY [>= 0.5]|TSCOUNTER.INCR (ring key, 180 days of history)|HINCRBY (hot key)"
  "TSCOUNTER.INCR hot / Lua seed 001/003 update|TSCOUNTER.INCR (hot key, default res)|Lua seed 001/003 update (7 precisions)"
  "TSCOUNTER.SUM 5 windows ring / HGET [>= 0.5]|TSCOUNTER.SUM 5s 5m 5h 5d 180d (ring)|HGET"
  "TSCOUNTER.SUM 5 windows hot / HGET [>= 0.5]|TSCOUNTER.SUM 1m 5m 1h 5h 1d (hot key)|HGET"
)
MEMORY_LINES=()

# Other families add their tests, ratios and memory lines here (same server, same run).
for extra in scripts/bench_*.sh; do
    [ -e "$extra" ] && source "$extra"
done

ratio() { awk -v a="${RPS[$1]:-0}" -v b="${RPS[$2]:-1}" 'BEGIN { printf "%.2f", a / b }'; }
echo
echo "ratios (target in brackets)"
for line in "${RATIOS[@]}"; do
    IFS='|' read -r label num den <<<"$line"
    printf '  %-60s %s\n' "$label" "$(ratio "$num" "$den")"
done
echo
echo "memory (MEMORY USAGE)"
"${CLI[@]}" del sparse >/dev/null
"${CLI[@]}" tscounter.create sparse RESOLUTIONS $RING >/dev/null
for i in 9 8 7 6 5 4 3 2 1 0; do
    "${CLI[@]}" tscounter.incr sparse AT $(( NOW_MS - i * 3600000 )) >/dev/null
done
printf '  %-60s %s bytes [<= 400]\n' "sparse ring counter, 10 events an hour apart" "$("${CLI[@]}" memory usage sparse)"
for line in "${MEMORY_LINES[@]}"; do echo "  $line"; done
