#!/usr/bin/env bash
# make bench: server-bound benchmark of tally's commands next to the native commands (and
# the hand-built Lua updates) they replace.
#
# Why it looks like this: on a 2-core machine `redis-benchmark` without pipelining measures
# the client (HINCRBY and TSCOUNTER.INCR both ~130k rps while the server spends 8x more time
# on the second). So every measurement runs `redis-benchmark -c 50 -P 16`, and besides
# requests/s we read the server's own time per call, `usec_per_call` of the command's
# `cmdstat_<name>` line in `INFO commandstats`, after a `CONFIG RESETSTAT` just before the
# measured run. Each row measures the native baseline and then the tally command on the same
# server in the same run, and prints both ratios (tally / native) against their targets.
#
# Environment:
#   BENCH_SECONDS  approximate duration of each measured run (default 1): the request count
#                  is calibrated from a short warm-up run of the same command
#   BENCH_ROUNDS   measured runs per command (default 3); the best one counts
#   BENCH_EXPIRY   1 (default) / 0: measure the max PING latency while a 1M-member slot
#                  of a leaderboard expires (takes ~40 s)
#   BENCH_PORT     port of the benchmark's own redis-server (default: a free one >= 7379)
#   BENCH_VERBOSE  1: print progress to stderr
#   BENCH_ONLY     families to measure, e.g. "counter rank" (default: counter rank stats
#                  throttle host trending); the memory figures and the expiry latency come
#                  with a full run only; "trending" runs scripts/bench_trending.sh (boards
#                  with CAPACITY against TOPK, its own server; TRENDING_* knobs there)
#   BENCH_HOST_ROUNDS  alternating runs per server of the host tax rows (default 5)
#   BENCH_HOST_IR  1: the host tax rows count instructions instead of timing: the three
#                  servers run under valgrind's callgrind, and each row reports the
#                  instructions per command (100,000 commands after a warm-up), which the
#                  machine's load does not change (make bench-scale passes it on)
#   REDIS_SERVER   server binary (default: redis-server on PATH)
#   BENCH_MODULE   the tally module to measure (default: target/release/libtally.so), e.g. a
#                  copy of an earlier build to compare with
#
# The family scripts scripts/bench_rank.sh, scripts/bench_stats.sh and
# scripts/bench_throttle.sh are sourced: they define their fixtures, rows and memory figures
# as functions that use the helpers below. The throttle rows' baseline, redis-cell's
# CL.THROTTLE, is built by bench_throttle.sh and loaded into the same server.
#
# The server also loads benchfloor (scripts/floor_module.c, built here with cc into
# target/bench/ against the redismodule.h of the redis-module crate tally is built with):
# its FLOOR.READ / FLOOR.READNC open a key and reply one integer, with and without reading
# the clock, the least any module read command can do, and FLOOR.HGET reads one hash field
# through the module API. Their "floor: module ..." rows measure what the server charges a
# module read, to compare TSCOUNTER.SUM's rows with; FLOOR.REPLICATE (the TSRANK rows)
# what replicating a leaderboard increment's two effects costs a module; FLOOR.HWRITE (the
# STATS rows) a module write of STATS.ADD's shape: three hash fields read, two written and
# replicated as an HSET effect.
#
# The host tax rows (family "host") start three more servers: one with no module, one with
# benchfloor loaded with SUBSCRIBE (subscribed to tally's keyspace event classes with an
# empty callback) and one with tally holding objects of each family, and measure native
# HSET and SET on keys that are not tally's, in alternating runs, the best of each.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SECONDS_PER_RUN=${BENCH_SECONDS:-1}
ROUNDS=${BENCH_ROUNDS:-3}
EXPIRY=${BENCH_EXPIRY:-1}
VERBOSE=${BENCH_VERBOSE:-0}
ONLY=${BENCH_ONLY:-counter rank stats throttle host trending}
HOST_ROUNDS=${BENCH_HOST_ROUNDS:-5}
wanted() { [[ " $ONLY " == *" $1 "* ]]; }
FULL=0
[ "$ONLY" = "counter rank stats throttle host trending" ] && FULL=1
SERVER=${REDIS_SERVER:-redis-server}
CLIENTS=50
PIPELINE=16
WARMUP_REQUESTS=10000
MODULE=${BENCH_MODULE:-$ROOT/target/release/libtally.so}
BEGAN=$(date +%s)

if [ ! -f "$MODULE" ]; then
    echo "bench: $MODULE is missing; run 'cargo build --release -p tally' (or make bench)" >&2
    exit 1
fi

# benchfloor: found through cargo metadata, the header of the redis-module crate in cargo's
# registry (never copied into the project).
FLOOR="$ROOT/target/bench/floor_module.so"
if ! command -v cc >/dev/null 2>&1; then
    echo "bench: cc is missing: it builds scripts/floor_module.c (apt-get install gcc)" >&2
    exit 1
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "bench: python3 is missing: it finds redismodule.h in cargo metadata's output" >&2
    exit 1
fi
FLOOR_MANIFEST=$("${CARGO:-cargo}" metadata --format-version 1 2>/dev/null | python3 -c '
import json, sys
print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "redis-module"))
' 2>/dev/null) || FLOOR_MANIFEST=""
if [ -z "$FLOOR_MANIFEST" ]; then
    echo "bench: redismodule.h not found: '${CARGO:-cargo} metadata' lists no redis-module" \
        "package (its src/include/redismodule.h builds scripts/floor_module.c)" >&2
    exit 1
fi
FLOOR_INCLUDE="$(dirname "$FLOOR_MANIFEST")/src/include"
if [ ! -f "$FLOOR_INCLUDE/redismodule.h" ]; then
    echo "bench: $FLOOR_INCLUDE/redismodule.h is missing (builds scripts/floor_module.c);" \
        "run 'cargo fetch'" >&2
    exit 1
fi
mkdir -p "$(dirname "$FLOOR")"
if ! cc -O2 -fPIC -shared -o "$FLOOR" scripts/floor_module.c -I"$FLOOR_INCLUDE"; then
    echo "bench: building scripts/floor_module.c failed" >&2
    exit 1
fi

port_is_free() { ! (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${BENCH_PORT:-}
if [ -z "$PORT" ]; then
    PORT=7379
    while ! port_is_free "$PORT"; do PORT=$((PORT + 1)); done
fi
DIR=$(mktemp -d /tmp/tally-bench.XXXXXX)
CLI=(redis-cli -p "$PORT")
RB=(redis-benchmark -h 127.0.0.1 -p "$PORT" -c "$CLIENTS" -P "$PIPELINE")

# shellcheck source=scripts/bench_throttle.sh
source scripts/bench_throttle.sh
CELL_LOAD=()
if wanted throttle; then
    build_redis_cell
    if [ -z "$CELL_ERROR" ]; then CELL_LOAD=(--loadmodule "$CELL_SO"); fi
fi

"$SERVER" --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" \
    --daemonize yes --pidfile "$DIR/pid" --logfile "$DIR/log" --loadmodule "$MODULE" \
    --loadmodule "$FLOOR" "${CELL_LOAD[@]}" --enable-debug-command local
HOST_PORTS=()
HOST_NAMES=()
cleanup() {
    "${CLI[@]}" shutdown nosave >/dev/null 2>&1 || true
    local port
    for port in "${HOST_PORTS[@]}"; do
        redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    done
    rm -rf "$DIR"
}
trap cleanup EXIT
for _ in $(seq 100); do "${CLI[@]}" ping >/dev/null 2>&1 && break; sleep 0.1; done

progress() { if [ "$VERBOSE" = 1 ]; then echo "bench: $*" >&2; fi; }
cli() { "${CLI[@]}" "$@"; }

# ---- fixtures -------------------------------------------------------------------------

# load: reads commands, one per line with space-separated arguments, and sends them
# pipelined (`redis-cli --pipe`, RESP-encoded). Any error reply aborts the benchmark.
TO_RESP='{ printf "*%d\r\n", NF; for (i = 1; i <= NF; i++) printf "$%d\r\n%s\r\n", length($i), $i }'
load() {
    local out
    out=$(awk "$TO_RESP" | "${CLI[@]}" --pipe 2>&1)
    if ! grep -q '^errors: 0,' <<<"$out"; then
        echo "bench: loading a fixture failed:" >&2
        echo "$out" | tail -n 5 >&2
        exit 1
    fi
}

# prefill COMMAND...: runs COMMAND once for each value 0..99999 of __rand_int__, so the
# benchmarks with -r 100000 update existing keys/members instead of mostly creating them.
RANDOM_KEYS=100000
prefill() {
    # (split once and join: gsub in a loop is very slow in mawk 1.3.4)
    awk -v cmd="$*" -v n="$RANDOM_KEYS" 'BEGIN {
        parts = split(cmd, part, "__rand_int__")
        for (i = 0; i < n; i++) {
            id = sprintf("%012d", i); line = part[1]
            for (p = 2; p <= parts; p++) line = line id part[p]
            print line
        }
    }' | load
}

# Server time in ms: fixtures put their events at AT timestamps relative to it, so they
# are inside the kept windows whatever the client clock says.
server_ms() { cli time | awk 'NR == 1 { s = $1 } NR == 2 { printf "%d%03d\n", s, $1 / 1000 }'; }
NOW_MS=$(server_ms)
HOUR_MS=3600000
DAY_MS=86400000

# command_exists NAME: COMMAND INFO answers nil for an unknown command.
command_exists() { [ "$(cli command info "$1" | head -n 1)" = "${1,,}" ]; }

# ---- measuring ------------------------------------------------------------------------

# A row names its measurements first (native, native_plus, native_times, tally), and report
# runs them: a warm-up run of WARMUP_REQUESTS of each command calibrates its request count
# to ~SECONDS_PER_RUN, then ROUNDS rounds, each running every command of the row once in
# turn (so the native baseline and the tally command see the same moments of a noisy
# machine), each run after CONFIG RESETSTAT and read from INFO commandstats. The best run of
# each command counts (lowest time per call, highest requests/s): noise only adds time.
# A run in which the server answered errors (failed_calls or rejected_calls) measures
# nothing useful: it sets ROW_ERROR to the first error reply, which report prints instead.
QUEUE=()
SEP=$'\x1f'
queue() { local IFS=$SEP; QUEUE+=("$*"); }

# native / tally CMDSTAT [redis-benchmark options] -- COMMAND...: one side of a row.
# native_plus: adds another native command to the baseline (a client doing both per event):
# times per call add up, and requests/s combine as 1 / (1/a + 1/b) events/s.
# native_times K: the baseline is K calls of the measured command per event.
# tally_per K (after a report): report the tally command per unit of K (e.g. per pair).
native() { queue native "$@"; }
native_plus() { queue plus "$@"; }
native_times() { queue times "$1"; }
tally() { queue tally "$@"; }
tally_per() {
    T_RPS=$(awk -v a="$T_RPS" -v k="$1" 'BEGIN { print a * k }')
    T_USEC=$(awk -v a="$T_USEC" -v k="$1" 'BEGIN { print a / k }')
}

# split_spec SPEC: sets S_ROLE, S_STAT, S_OPTS (redis-benchmark options), S_CMD.
split_spec() {
    local IFS=$SEP fields
    read -r -a fields <<<"$1"
    S_ROLE=${fields[0]} S_STAT=${fields[1]:-} S_OPTS=() S_CMD=()
    local i=2
    while [ "$i" -lt "${#fields[@]}" ] && [ "${fields[$i]}" != "--" ]; do
        S_OPTS+=("${fields[$i]}")
        i=$((i + 1))
    done
    S_CMD=("${fields[@]:$((i + 1))}")
}

# calibrate: the request count of the current spec for ~SECONDS_PER_RUN (M_REQUESTS).
calibrate() {
    local line warm_rps
    # redis-benchmark stops at the first error reply (|| true: the runs report it).
    line=$("${RB[@]}" -n "$WARMUP_REQUESTS" "${S_OPTS[@]}" --csv "${S_CMD[@]}" 2>&1 | tail -n 1) || true
    warm_rps=$(cut -d, -f2 <<<"$line" | tr -d '"')
    M_REQUESTS=$(awk -v r="${warm_rps:-0}" -v s="$SECONDS_PER_RUN" 'BEGIN {
        n = int(r * s / 1000) * 1000; if (n < 20000) n = 20000; if (n > 5000000) n = 5000000; print n }')
}

# run_once REQUESTS: one measured run of the current spec; sets M_RPS and M_USEC, or
# ROW_ERROR.
run_once() {
    local requests=$1 line rps stats usec calls failed
    cli config resetstat >/dev/null
    line=$("${RB[@]}" -n "$requests" "${S_OPTS[@]}" --csv "${S_CMD[@]}" 2>&1 | tail -n 1) || true
    rps=$(cut -d, -f2 <<<"$line" | tr -d '"')
    # cmdstat_<name>:calls=..,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..
    stats=$(cli info commandstats | tr -d '\r' | awk -v s="cmdstat_$S_STAT:" 'index($0, s) == 1 {
        n = split(substr($0, length(s) + 1), kv, ",")
        for (i = 1; i <= n; i++) { split(kv[i], p, "="); v[p[1]] = p[2] }
        # usec / calls, not the rounded usec_per_call: a native read takes ~0.1 us,
        # where two decimals would be 5-10% of noise in every ratio.
        per_call = v["calls"] > 0 ? v["usec"] / v["calls"] : ""
        printf "%.4f %s %s\n", per_call, v["calls"], v["failed_calls"] + v["rejected_calls"] }')
    read -r usec calls failed <<<"$stats"
    if [ -z "$usec" ] || [ "${failed:-1}" != 0 ] || [ "${calls:-0}" -lt "$requests" ] ||
        ! [[ $rps =~ ^[0-9.]+$ ]]; then
        # Ask once by hand for the reply (placeholders filled in as redis-benchmark would).
        local args=("${S_CMD[@]//__rand_int__/000000000001}")
        ROW_ERROR="$(cli "${args[@]}" 2>&1 | head -n 1) (cmdstat_$S_STAT: ${stats:-none})"
        return 0
    fi
    M_RPS=$rps M_USEC=$usec
    progress "$(printf '%-60s n=%-8s %10.0f rps %8.3f us/call' "${S_CMD[*]}" "$requests" "$rps" "$usec")"
}

# run_queue: measures the queued specs in interleaved rounds, then sets N_RPS, N_USEC
# (the baseline, combined as the specs say) and T_RPS, T_USEC.
run_queue() {
    local i round count=${#QUEUE[@]}
    local -a requests best_usec best_rps
    for ((i = 0; i < count; i++)); do
        split_spec "${QUEUE[$i]}"
        [ "$S_ROLE" = times ] && continue
        calibrate
        requests[i]=$M_REQUESTS best_usec[i]="" best_rps[i]=0
    done
    for round in $(seq "$ROUNDS"); do
        for ((i = 0; i < count; i++)); do
            [ -n "$ROW_ERROR" ] && break 2
            split_spec "${QUEUE[$i]}"
            [ "$S_ROLE" = times ] && continue
            run_once "${requests[$i]}"
            [ -n "$ROW_ERROR" ] && break 2
            if [ -z "${best_usec[$i]}" ] ||
                awk -v a="$M_USEC" -v b="${best_usec[$i]}" 'BEGIN { exit !(a < b) }'; then
                best_usec[i]=$M_USEC
            fi
            if awk -v a="$M_RPS" -v b="${best_rps[$i]}" 'BEGIN { exit !(a > b) }'; then
                best_rps[i]=$M_RPS
            fi
        done
    done
    if [ -n "$ROW_ERROR" ]; then
        QUEUE=()
        return 0
    fi
    for ((i = 0; i < count; i++)); do
        split_spec "${QUEUE[$i]}"
        case $S_ROLE in
            native) N_RPS=${best_rps[$i]} N_USEC=${best_usec[$i]} ;;
            plus)
                N_RPS=$(awk -v a="$N_RPS" -v b="${best_rps[$i]}" 'BEGIN { print 1 / (1 / a + 1 / b) }')
                N_USEC=$(awk -v a="$N_USEC" -v b="${best_usec[$i]}" 'BEGIN { print a + b }')
                ;;
            times)
                N_RPS=$(awk -v a="$N_RPS" -v k="$S_STAT" 'BEGIN { print a / k }')
                N_USEC=$(awk -v a="$N_USEC" -v k="$S_STAT" 'BEGIN { print a * k }')
                ;;
            tally) T_RPS=${best_rps[$i]} T_USEC=${best_usec[$i]} ;;
        esac
    done
    QUEUE=()
}

ROW_ERROR=
ROW_FMT='%-50s %10s %10s %6s %-11s %8s %8s %6s %s\n'
MISSED=0
MET=0
# verdict RATIO TARGET: TARGET is "" (none), ">=x" or "<=x". Prints e.g. "<=3 ok" (it runs
# in a command substitution, so report counts the verdicts with count_verdict).
verdict() {
    local ratio=$1 target=$2
    if [ -z "$target" ]; then echo "-"; return; fi
    if awk -v r="$ratio" -v t="${target:2}" -v op="${target:0:2}" \
        'BEGIN { exit !((op == ">=" && r >= t) || (op == "<=" && r <= t)) }'; then
        echo "$target ok"
    else
        echo "$target MISS"
    fi
}
# report LABEL USEC_TARGET RPS_TARGET: prints the row of the last native and tally runs.
report() {
    local label=$1 usec_target=$2 rps_target=$3 rps_ratio usec_ratio rps_v usec_v
    if [ "${#QUEUE[@]}" -gt 0 ]; then
        run_queue
    fi
    if [ -n "$ROW_ERROR" ]; then
        printf '%-50s n/a: %s\n' "$label" "$ROW_ERROR"
        ROW_ERROR=
        return
    fi
    rps_ratio=$(awk -v a="$T_RPS" -v b="$N_RPS" 'BEGIN { printf "%.2f", a / b }')
    usec_ratio=$(awk -v a="$T_USEC" -v b="$N_USEC" 'BEGIN { printf "%.2f", a / b }')
    rps_v=$(verdict "$rps_ratio" "$rps_target")
    usec_v=$(verdict "$usec_ratio" "$usec_target")
    count_verdict "$rps_v"
    count_verdict "$usec_v"
    # shellcheck disable=SC2059
    printf "$ROW_FMT" "$label" "$(printf '%.0f' "$T_RPS")" "$(printf '%.0f' "$N_RPS")" \
        "$rps_ratio" "$rps_v" "$(printf '%.3f' "$T_USEC")" "$(printf '%.3f' "$N_USEC")" \
        "$usec_ratio" "$usec_v"
}
count_verdict() {
    case "$1" in
        *" ok") MET=$((MET + 1)) ;;
        *" MISS") MISSED=$((MISSED + 1)) ;;
    esac
}
# skip LABEL COMMAND...: the row of a command the module does not have yet.
skip_row() {
    local label=$1
    shift
    printf '%-50s n/a (command missing: %s)\n' "$label" "$*"
}
section() { printf '\n%s\n' "$1"; }

# ---- TSCOUNTER ------------------------------------------------------------------------

RING="1s:60 1m:60 1h:24 1d:365"

counter_fixtures() {
    progress "counter fixtures"
    cli hset bench:hash f 42 >/dev/null
    # The risk-control ring of seed 002, with one event a day for 180 days and one every
    # 3 s over the last hour.
    cli tscounter.create ring RESOLUTIONS $RING >/dev/null
    {
        for d in $(seq 0 179); do echo "TSCOUNTER.INCRBY ring 3 AT $((NOW_MS - d * DAY_MS))"; done
        for s in $(seq 0 3 3599); do echo "TSCOUNTER.INCRBY ring 1 AT $((NOW_MS - s * 1000))"; done
    } | load
    # Ten endpoints' counters (default resolutions), an event every 10 s over the last
    # hour each, for the MSUM row.
    for e in $(seq 0 9); do
        for s in $(seq 0 10 3599); do echo "TSCOUNTER.INCRBY {ep}:$e 1 AT $((NOW_MS - s * 1000))"; done
    done | load
    # Seeds 001/003: one update = ZADD known: + HINCRBY for each of 7 precisions.
    SHA_COUNTER=$(cli script load 'local now = tonumber(redis.call("TIME")[1])
for _, p in ipairs({1, 5, 60, 300, 3600, 18000, 86400}) do
  local hash = p .. ":" .. KEYS[1]
  redis.call("ZADD", "known:", 0, hash)
  redis.call("HINCRBY", "count:" .. hash, math.floor(now / p) * p, ARGV[1])
end
return 1')
    # The hot counter exists before its first row, with a slot a second over the last
    # 20 s (as the floor's hash has), so the first row does not time its creation.
    for s in $(seq 20 -1 1); do echo "TSCOUNTER.INCRBY hot 7 AT $((NOW_MS - s * 1000))"; done | load
    prefill HINCRBY "h:__rand_int__" f 1
    prefill TSCOUNTER.INCR "c:__rand_int__"
    prefill HSET "fl:__rand_int__" 1s:1795424420 1 5s:359084884 1 1m:29923740 1 5m:5984748 1 1h:498729 1 5h:99745 1 1d:20780 1 _state 1795424401000 _tally counter
    cli tscounter.create lim RESOLUTIONS $RING >/dev/null
    cli tscounter.create limbase RESOLUTIONS $RING >/dev/null
    # Floors: the native writes an increment itself makes. A hash shaped like a hot
    # counter (a marker, a state, 20 slot fields) takes HSET of 8 fields (one slot per
    # default resolution + the state); a copy of the ring takes HSET of 4 slots + state.
    local fields=(_tally "counter 1s:120 5s:120 1m:120 5m:120 1h:120 5h:120 1d:120" _state "1795424401000 0:3 0:3 0:3 0:3 0:1 0:1 0:1")
    for i in $(seq 1795424401 1795424420); do fields+=("1s:$i" 7); done
    cli hset floor:hot "${fields[@]}" >/dev/null
    # tally keeps a hot counter's hash in the hashtable encoding (README, key layout): the
    # floor's copy gets it too, by the same add-and-remove of a long field.
    local probe
    probe=$(printf '_%.0s' $(seq 1 1024))
    cli hset floor:hot "$probe" "" >/dev/null
    cli hdel floor:hot "$probe" >/dev/null
    cli copy ring floor:ring >/dev/null
    # A listpack hash is searched from its start and a new slot field lands at its end,
    # where an increment then finds it: the floor writes the 4 slot fields last in the
    # copy's own order (HKEYS order is listpack order).
    FLOOR_RING_FIELDS=$(cli hkeys floor:ring | grep -E '^(1s|1m|1h|1d):' | tail -n 4 | tr '\n' ' ')
}

# incr_floor_row N LABEL: TSCOUNTER.INCR over the counters c:<i> (i < N) next to its
# native floor, HMGET of the 9 fields it reads then HSET of the 8 it writes, on their
# copies cp:<i>, for the slots of now.
incr_floor_row() {
    local n=$1 label=$2 t slots=() hmget_fields=() hset_pairs=()
    t=$(server_ms)
    for r in 1s:1000 5s:5000 1m:60000 5m:300000 1h:3600000 5h:18000000 1d:86400000; do
        slots+=("${r%%:*}:$((t / ${r#*:}))")
    done
    hmget_fields=(_tally _state "${slots[@]}")
    for f in "${slots[@]}"; do hset_pairs+=("$f" 1); done
    native hmget -r "$n" -- HMGET "cp:__rand_int__" "${hmget_fields[@]}"
    native_plus hset -r "$n" -- HSET "cp:__rand_int__" "${hset_pairs[@]}" _state "$t 0:1 0:1 0:1 0:1 0:1 0:1 0:1"
    tally tscounter.incr -r "$n" -- TSCOUNTER.INCR "c:__rand_int__"
    report "TSCOUNTER.INCR $label keys / HMGET 9 + HSET 8, copies" "" ""
}

counter_rows() {
    section "TSCOUNTER"
    native hincrby -- HINCRBY bench:hash f 1
    tally tscounter.incr -- TSCOUNTER.INCR hot
    report "TSCOUNTER.INCR hot key, 7 res. / HINCRBY" "<=3" ">=0.50"

    native hset -- HSET floor:hot 1s:1795424420 8 5s:359084884 1 1m:29923740 1 5m:5984748 1 1h:498729 1 5h:99745 1 1d:20780 1 _state "1795424401000 0:3 0:3 0:3 0:3 0:1 0:1 0:2"
    tally tscounter.incr -- TSCOUNTER.INCR hot
    report "TSCOUNTER.INCR hot / HSET of the 8 fields it sets" "" ""

    native hincrby -r 100000 -- HINCRBY "h:__rand_int__" f 1
    tally tscounter.incr -r 100000 -- TSCOUNTER.INCR "c:__rand_int__"
    report "TSCOUNTER.INCR 100k keys / HINCRBY 100k keys" "<=4" ""

    native hset -r 100000 -- HSET "fl:__rand_int__" 1s:1795424420 1 5s:359084884 1 1m:29923740 1 5m:5984748 1 1h:498729 1 5h:99745 1 1d:20780 1 _state "1795424401000 0:1 0:1 0:1 0:1 0:1 0:1 0:1"
    tally tscounter.incr -r 100000 -- TSCOUNTER.INCR "c:__rand_int__"
    report "TSCOUNTER.INCR 100k keys / HSET of its 8 fields" "" ""

    # A counter that is not cached reads its bookkeeping and each slot before writing it
    # (the module API has no HINCRBY): HMGET of those 9 fields, then the HSET above, on
    # copies of the counters as they are now (their slots of the last seconds included:
    # a listpack is searched from its start, so its length counts), for the slots of now.
    prefill COPY "c:__rand_int__" "cp:__rand_int__"
    incr_floor_row 100000 100k

    native hincrby -- HINCRBY bench:hash f 1
    tally tscounter.incr -- TSCOUNTER.INCR ring
    report "TSCOUNTER.INCR ring, 180 days / HINCRBY" "" ">=0.60"

    local ring_hset=(HSET floor:ring)
    for f in $FLOOR_RING_FIELDS; do ring_hset+=("$f" 2); done
    ring_hset+=(_state x)
    native hset -- "${ring_hset[@]}"
    tally tscounter.incr -- TSCOUNTER.INCR ring
    report "TSCOUNTER.INCR ring / HSET 5 fields at its end" "" ""

    native hget -- HGET bench:hash f
    tally tscounter.sum -- TSCOUNTER.SUM ring 5s 5m 5h 5d 180d
    report "TSCOUNTER.SUM ring 5 windows / HGET" "<=3" ""

    # Floor: a native read of the same shape (7 arguments in, 5 values out).
    native hmget -- HMGET bench:hash f f f f f
    tally tscounter.sum -- TSCOUNTER.SUM ring 5s 5m 5h 5d 180d
    report "TSCOUNTER.SUM ring 5 windows / HMGET 5 fields" "" ""

    native hget -- HGET bench:hash f
    tally tscounter.sum -- TSCOUNTER.SUM ring 5m
    report "TSCOUNTER.SUM ring 1 window (5m) / HGET" "<=2" ""

    # Floor: a module command that opens a key (missing) and replies one integer, next to
    # HGET: what dispatching into a module costs before any work.
    native hget -- HGET bench:hash f
    tally tscounter.sum -- TSCOUNTER.SUM bench:missing 5m
    report "floor: TSCOUNTER.SUM missing key / HGET" "" ""

    # Floors on the ring itself: benchfloor's commands (scripts/floor_module.c, measured in
    # the tally columns) read the clock, open the key, take its length and reply an integer
    # that is not a shared 0/1, with the arguments of SUM of one window: what the server
    # charges any module read; the second without the clock.
    native hget -- HGET bench:hash f
    tally floor.read -- FLOOR.READ ring 5m
    report "floor: module read, clock, int reply / HGET" "" ""

    native hget -- HGET bench:hash f
    tally floor.readnc -- FLOOR.READNC ring 5m
    report "floor: module read, no clock / HGET" "" ""

    # The least a module pays to read one value of a hash (HashGet of HGET's field, with
    # the clock, replied as an integer): a SUM that read its slots from the counter's hash
    # would pay at least this, and more per slot.
    native hget -- HGET bench:hash f
    tally floor.hget -- FLOOR.HGET bench:hash f
    report "floor: module HashGet 1 field, clock / HGET" "" ""

    native evalsha -- EVALSHA "$SHA_COUNTER" 1 hits 1
    tally tscounter.incr -- TSCOUNTER.INCR hot
    report "TSCOUNTER.INCR hot / Lua seed 001/003 update" "" ""

    local label="TSCOUNTER.LIMIT 3 windows / INCRBY + SUM 3 win."
    if command_exists tscounter.limit; then
        native tscounter.incrby -- TSCOUNTER.INCRBY limbase 1
        native_plus tscounter.sum -- TSCOUNTER.SUM limbase 5s 5m 1d
        tally tscounter.limit -- TSCOUNTER.LIMIT lim 1 5s 1000000000 5m 1000000000 1d 1000000000
        report "$label" "" ""
    else
        skip_row "$label" TSCOUNTER.LIMIT
    fi

    # One limit over a user, an IP and a global counter: MLIMIT of the three keys against
    # the three LIMITs a client would pipeline (which could spend on some keys and refuse
    # on another). Maxes no call reaches, so every call is applied.
    local big=1000000000
    label="TSCOUNTER.MLIMIT 3 keys / 3 LIMITs pipelined"
    if command_exists tscounter.mlimit; then
        native tscounter.limit -- TSCOUNTER.LIMIT "{m}:user" 1 5s $big 1h $big
        native_plus tscounter.limit -- TSCOUNTER.LIMIT "{m}:ip" 1 1m $big
        native_plus tscounter.limit -- TSCOUNTER.LIMIT "{m}:all" 1 1s $big
        tally tscounter.mlimit -- TSCOUNTER.MLIMIT 3 "{m}:user" "{m}:ip" "{m}:all" 1 2 5s $big 1h $big 1 1m $big 1 1s $big
        report "$label" "" ""
    else
        skip_row "$label" TSCOUNTER.MLIMIT
    fi

    # "Hits of every endpoint": one MSUM of 10 counters (each with events over the last
    # hour) against the 10 SUMs a client would pipeline, per event 10 calls of SUM.
    label="TSCOUNTER.MSUM 10 keys / 10 SUMs pipelined"
    if command_exists tscounter.msum; then
        native tscounter.sum -- TSCOUNTER.SUM "{ep}:0" 5m
        native_times 10
        tally tscounter.msum -- TSCOUNTER.MSUM 10 {ep}:0 {ep}:1 {ep}:2 {ep}:3 {ep}:4 {ep}:5 {ep}:6 {ep}:7 {ep}:8 {ep}:9 5m
        report "$label" "" ""
    else
        skip_row "$label" TSCOUNTER.MSUM
    fi
}

counter_memory() {
    local t
    cli tscounter.create sparse RESOLUTIONS $RING >/dev/null
    for t in 9 8 7 6 5 4 3 2 1 0; do echo "TSCOUNTER.INCR sparse AT $((NOW_MS - t * HOUR_MS))"; done | load
    memory_line "sparse ring counter ($RING), 10 events 1 h apart" \
        "$(cli memory usage sparse samples 0)" 400
}

# memory_line LABEL BYTES [MAX_BYTES]
memory_line() {
    local v="-"
    if [ -n "${3:-}" ]; then
        if [ "$2" -le "$3" ]; then v="<=$3 ok"; MET=$((MET + 1)); else v="<=$3 MISS"; MISSED=$((MISSED + 1)); fi
    fi
    printf '%-66s %10s bytes  %s\n' "$1" "$2" "$v"
}

# ---- the host's other keys --------------------------------------------------------------

# start_host_server NAME [--loadmodule ...]: a server of its own for the host tax rows; its
# port is appended to HOST_PORTS.
start_host_server() {
    local name=$1 port=$((PORT + 1))
    shift
    while ! port_is_free "$port" || [[ " ${HOST_PORTS[*]} " == *" $port "* ]]; do
        port=$((port + 1))
    done
    mkdir -p "$DIR/$name"
    local -a options=(--port "$port" --bind 127.0.0.1 --save "" --appendonly no
        --dir "$DIR/$name" --pidfile "$DIR/$name/pid" --logfile "$DIR/$name/log" "$@")
    if [ "${BENCH_HOST_IR:-0}" = 1 ]; then
        # Not daemonized: callgrind_control finds the process valgrind started, not a fork.
        valgrind --tool=callgrind --instr-atstart=no --log-file="$DIR/$name/valgrind.log" \
            --callgrind-out-file="$DIR/$name/cg.%p" "$SERVER" "${options[@]}" &
    else
        "$SERVER" "${options[@]}" --daemonize yes
    fi
    HOST_PORTS+=("$port")
    HOST_NAMES+=("$name")
    for _ in $(seq 600); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
}

# host_ir_row LABEL COMMAND...: instructions per COMMAND (on keys that are not tally's) on
# the three servers, run under callgrind (BENCH_HOST_IR=1): 500,000 commands uninstrumented
# so nearly every key exists (a command that creates its key costs more, and how many do
# would differ by chance between servers), then 100,000 counted. Each server process draws
# its own hash seed at start, which decides how many commands its command table's lookup
# (dictFetchValue, once per command) compares before the one it finds: ~68 instructions
# per command each, 0 to 2 of them, with or without a module. So the row also reports
# that lookup on each server and the ratio with the lookups made equal, and the server's
# call of the keyspace callbacks (moduleNotifyKeyspaceEvent, inclusive: its own work is
# the same with either module) with the empty subscriber's total with tally's in its place.
host_ir_row() {
    local label=$1 i pid file n=100000
    shift
    local -a ir cb lk
    for i in 0 1 2; do
        redis-benchmark -h 127.0.0.1 -p "${HOST_PORTS[$i]}" -c "$CLIENTS" -P "$PIPELINE" \
            -n 500000 -r 100000 "$@" >/dev/null
        pid=$(cat "$DIR/${HOST_NAMES[$i]}/pid")
        callgrind_control -z "$pid" >/dev/null
        callgrind_control -i on "$pid" >/dev/null
        redis-benchmark -h 127.0.0.1 -p "${HOST_PORTS[$i]}" -c "$CLIENTS" -P "$PIPELINE" \
            -n "$n" -r 100000 "$@" >/dev/null
        callgrind_control -i off "$pid" >/dev/null
        callgrind_control -d "$label" "$pid" >/dev/null
        sleep 1
        file=$(ls -t "$DIR/${HOST_NAMES[$i]}"/cg.* | head -1)
        ir[i]=$(awk -v n="$n" '/^totals:/ { printf "%.0f", $2 / n; exit }' "$file")
        cb[i]=$(host_ir_inclusive "$file" moduleNotifyKeyspaceEvent "$n")
        lk[i]=$(host_ir_inclusive "$file" dictFetchValue "$n")
    done
    printf '%-50s %8s %8s %8s  %s\n' "host tax: $label, instructions per command" \
        "${ir[0]}" "${ir[1]}" "${ir[2]}" \
        "$(awk -v e="${ir[1]}" -v t="${ir[2]}" -v z="${ir[0]}" 'BEGIN {
            printf "tally / empty subscriber %.3f%s, empty subscriber / no module %.3f",
                t / e, (t / e <= 1.05 ? " <=1.05 ok" : " <=1.05 MISS"), e / z }')"
    printf '%-50s %8s %8s %8s  %s\n' "  command table lookup (the server's hash seed)" \
        "${lk[0]:-0}" "${lk[1]:-0}" "${lk[2]:-0}" \
        "$(awk -v e="${ir[1]}" -v t="${ir[2]}" -v le="${lk[1]:-0}" -v lt="${lk[2]:-0}" 'BEGIN {
            printf "tally / empty subscriber with equal lookups %.3f", (t - lt + le) / e }')"
    printf '%-50s %8s %8s %8s  %s\n' "  keyspace notification (callbacks included)" \
        "${cb[0]}" "${cb[1]}" "${cb[2]}" \
        "$(awk -v e="${ir[1]}" -v ce="${cb[1]}" -v ct="${cb[2]}" 'BEGIN {
            r = (e - ce + ct) / e
            printf "empty subscriber with tally'"'"'s %.0f: %.3f%s", e - ce + ct, r,
                (r <= 1.05 ? " <=1.05 ok" : " <=1.05 MISS") }')"
}

# host_ir_inclusive FILE FUNCTION N: FUNCTION's instructions (its calls included) in the
# callgrind FILE, per command of N; 0 if it never ran.
host_ir_inclusive() {
    callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
        awk -v f=" ???:$2 [" -v n="$3" 'index($0, f) && !found { gsub(",", "", $1); found = $1 }
            END { printf "%.0f", found / n }'
}

# on_server PORT FUNCTION...: runs FUNCTION with cli/redis-benchmark pointed at PORT.
on_server() {
    local port=$1 saved_cli=("${CLI[@]}") saved_rb=("${RB[@]}")
    shift
    CLI=(redis-cli -p "$port")
    RB=(redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" -P "$PIPELINE")
    "$@"
    CLI=("${saved_cli[@]}")
    RB=("${saved_rb[@]}")
}

# The tally server holds objects of every family, so the events of other keys are checked
# against a populated set of tracked keys (10,000 counters, a leaderboard, a STATS key);
# hourly slots keep its timer idle during the runs. The other two servers get plain copies
# of the same keys (MIGRATE COPY), so all three hold the same data.
host_fixtures() {
    local i keys
    for i in $(seq 0 9999); do
        echo "TSCOUNTER.CREATE counter:$i RESOLUTIONS 1h:24"
        echo "TSCOUNTER.INCR counter:$i"
    done | load
    for i in $(seq 0 99); do echo "TSRANK.INCRBY board 1 player:$i"; done | load
    for i in $(seq 0 99); do echo "STATS.ADD latency $i"; done | load
}

host_copy_keys() {
    local from=$1 to keys
    mapfile -t keys < <(redis-cli -p "$from" --scan)
    for to in "${@:2}"; do
        redis-cli -p "$from" migrate 127.0.0.1 "$to" "" 0 60000 COPY KEYS "${keys[@]}" >/dev/null
    done
}

# host_row LABEL STAT COMMAND...: COMMAND on keys that are not tally's, on the three servers
# in alternating runs (HOST_ROUNDS each); the best run of each counts.
host_row() {
    local label=$1 stat=$2 i round
    shift 2
    local IFS=$SEP
    local spec="native${SEP}${stat}${SEP}-r${SEP}100000${SEP}--${SEP}$*"
    unset IFS
    local -a requests best_usec best_rps
    split_spec "$spec"
    for i in 0 1 2; do
        on_server "${HOST_PORTS[$i]}" calibrate
        requests[i]=$M_REQUESTS best_usec[i]="" best_rps[i]=0
    done
    # Each round starts with another of the three servers, so none always runs first
    # (right after the client's own start-up) or last.
    for round in $(seq "$HOST_ROUNDS"); do
        for i in $(((round + 0) % 3)) $(((round + 1) % 3)) $(((round + 2) % 3)); do
            on_server "${HOST_PORTS[$i]}" run_once "${requests[$i]}"
            if [ -n "$ROW_ERROR" ]; then
                printf '%-50s n/a: %s\n' "$label" "$ROW_ERROR"
                ROW_ERROR=
                return
            fi
            if [ -z "${best_usec[$i]}" ] ||
                awk -v a="$M_USEC" -v b="${best_usec[$i]}" 'BEGIN { exit !(a < b) }'; then
                best_usec[i]=$M_USEC
            fi
            if awk -v a="$M_RPS" -v b="${best_rps[$i]}" 'BEGIN { exit !(a > b) }'; then
                best_rps[i]=$M_RPS
            fi
        done
    done
    N_RPS=${best_rps[1]} N_USEC=${best_usec[1]} T_RPS=${best_rps[2]} T_USEC=${best_usec[2]}
    report "host tax: $label, tally / empty subscriber" "<=1.05" ""
    N_RPS=${best_rps[0]} N_USEC=${best_usec[0]} T_RPS=${best_rps[1]} T_USEC=${best_usec[1]}
    report "  (empty subscriber / no module)" "" ""
    N_RPS=${best_rps[0]} N_USEC=${best_usec[0]} T_RPS=${best_rps[2]} T_USEC=${best_usec[2]}
    report "  (tally / no module)" "" ""
}

host_fixtures_servers() {
    progress "host tax servers"
    start_host_server none
    start_host_server empty --loadmodule "$FLOOR" SUBSCRIBE
    start_host_server tally --loadmodule "$MODULE"
    on_server "${HOST_PORTS[2]}" host_fixtures
    host_copy_keys "${HOST_PORTS[2]}" "${HOST_PORTS[0]}" "${HOST_PORTS[1]}"
}

host_rows() {
    if [ "${BENCH_HOST_IR:-0}" = 1 ]; then
        printf '%-50s %8s %8s %8s\n' "(callgrind; 100,000 commands)" "none" "empty" "tally"
        host_ir_row "HSET other keys" HSET host:__rand_int__ f v
        host_ir_row "SET other keys" SET host:s:__rand_int__ v
        return
    fi
    host_row "HSET other keys" hset HSET host:__rand_int__ f v
    host_row "SET other keys" set SET host:s:__rand_int__ v
}

# shellcheck source=scripts/bench_rank.sh
source scripts/bench_rank.sh
# shellcheck source=scripts/bench_stats.sh
source scripts/bench_stats.sh

# scripts/bench-scale.sh sources this file for its server, fixtures and measuring helpers
# (BENCH_LIBRARY=1), and runs rows of its own.
if [ "${BENCH_LIBRARY:-0}" = 1 ]; then
    return 0
fi

# ---- run ------------------------------------------------------------------------------

# The leaderboard's slots and the STATS periods are hourly: a run that crosses an hour
# measures fresh, empty ones in its later rows (and a second slot hash in the memory
# figures). Close to the hour, wait until it has passed.
to_hour=$((3600 - $(date +%s) % 3600))
if [ "$to_hour" -lt 300 ]; then
    echo "waiting ${to_hour} s for the hour to pass (hourly fixtures)"
    sleep $((to_hour + 5))
    # The fixtures' timestamps are relative to now: the one taken before the wait is an
    # hour behind for the hourly boards (a 24h board's oldest fixture slot would have left).
    NOW_MS=$(server_ms)
fi

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
echo "tally benchmark"
echo "machine:   $cpu, $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server:    redis-server $("$SERVER" --version | awk '{ print $3 }' | cut -d= -f2) ($(command -v "$SERVER")), no persistence; redis-benchmark $(redis-benchmark --version | awk '{ print $2 }')"
echo "client:    ${RB[*]} -n N [-r 100000 for random keys/members] --csv <command>"
echo "           N calibrated per run to ~${SECONDS_PER_RUN} s from a ${WARMUP_REQUESTS}-request warm-up; ${ROUNDS} measured runs per command, each after CONFIG RESETSTAT; the best counts"
echo "columns:   requests/s (tally, native, ratio tally/native, target) and the server's time per call"
echo "           from INFO commandstats, usec / calls (tally, native, ratio tally/native, target); lower is better"

if awk -v l="$(cut -d' ' -f1 /proc/loadavg)" -v c="$(nproc)" 'BEGIN { exit !(l > c) }'; then
    echo "note:      the load average exceeds the cores: other processes compete for the CPU, and"
    echo "           usec_per_call (wall time inside the command) grows with the time the server is"
    echo "           descheduled mid-command, more for long commands than for short ones"
fi

for family in counter rank stats throttle; do
    if wanted "$family"; then "${family}_fixtures"; fi
done
if wanted host; then host_fixtures_servers; fi
progress "fixtures loaded in $(($(date +%s) - BEGAN)) s"

echo
# shellcheck disable=SC2059
printf "$ROW_FMT" "row (tally / native)" "tally rps" "native rps" "ratio" "target" "tally us" "native us" "ratio" "target"
for family in counter rank stats throttle host; do
    if wanted "$family"; then "${family}_rows"; fi
done

if [ "$FULL" = 1 ]; then
    section "memory (MEMORY USAGE ... SAMPLES 0)"
    counter_memory
    rank_memory
    stats_memory
    throttle_memory

    section "expiry of a leaderboard slot with 1,000,000 members"
    if [ "$EXPIRY" = 1 ]; then
        rank_expiry_latency
    else
        echo "skipped (BENCH_EXPIRY=0)"
    fi
fi

if wanted trending; then
    BENCH_MODULE="$MODULE" bash scripts/bench_trending.sh
fi

echo
echo "targets met: $MET, missed: $MISSED; load average now $(cut -d' ' -f1-3 /proc/loadavg); took $(($(date +%s) - BEGAN)) s"
