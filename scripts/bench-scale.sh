#!/usr/bin/env bash
# make bench-scale: what tally costs the server at production scale, next to the native
# commands at the same key count.
#
# For each scale (100k, 1M, 10M objects), one family at a time on a flushed server:
#   * per-op server time (INFO commandstats usec / calls, redis-benchmark -c 50 -P 16 over
#     random keys of the whole population, best of BENCH_ROUNDS) of TSCOUNTER.INCR and
#     TSCOUNTER.SUM over N counters next to HINCRBY / HGET over N hashes (and INCR next to
#     its native floor: HMGET of the 9 fields it reads + HSET of the 8 it writes, on copies
#     of the counters), of STATS.ADD over
#     N STATS keys next to HINCRBY, of TSRANK.INCRBY on a board of N members next to
#     ZINCRBY on a sorted set of N members;
#   * memory per object: the data (used_memory grown by loading the objects) and the
#     module apart (used_memory minus that of a server without tally loading the same RDB:
#     the read caches, the expiry schedule, the keyspace-event filter);
#   * the longest command (SLOWLOG, threshold 10 ms, over the whole scale) and the longest
#     timer tick (INFO tally max_tick_us);
#   * DEBUG RELOAD of the counters, and the start-up scan that finds them again (its time
#     and its longest tick).
# Then, once: a board with one slot of 1M members expiring under TSRANK.TOP reads (the
# reads' latency), a board of 1M members quarantined by a native HSET (its reads' server
# time), and the host tax rows of `make bench` (native HSET / SET on other keys, next to a
# C module subscribed to the same events with an empty callback).
#
# Environment (and those of scripts/bench.sh: BENCH_SECONDS, BENCH_ROUNDS, REDIS_SERVER,
# BENCH_MODULE, BENCH_VERBOSE):
#   BENCH_SCALES       scales to run (default "100k 1m"; "10m" needs ~6 GB free memory and
#                      ~15 minutes more)
#   BENCH_BIG          members of the expiring and the quarantined boards (default 1000000;
#                      0 skips both)
#   BENCH_HOST_ROUNDS  alternating runs per server of the host tax rows (default here 9)
#   BENCH_HOST         1 (default) / 0: the host tax rows
#   BENCH_FAMILIES     families measured at each scale (default "counter stats rank")
set -euo pipefail
SCALES=${BENCH_SCALES:-100k 1m}
FAMILIES=${BENCH_FAMILIES:-counter stats rank}
BIG=${BENCH_BIG:-1000000}
HOST=${BENCH_HOST:-1}
export BENCH_HOST_ROUNDS=${BENCH_HOST_ROUNDS:-9}
BENCH_LIBRARY=1
# shellcheck source=scripts/bench.sh
source "$(dirname "$0")/bench.sh"

# Every command over 10 ms is kept, so the longest one of a scale is in the SLOWLOG.
cli config set slowlog-log-slower-than 10000 >/dev/null
cli config set slowlog-max-len 1024 >/dev/null

count_of() {
    case $1 in
        *k) echo $((${1%k} * 1000)) ;;
        *m) echo $((${1%m} * 1000000)) ;;
        *) echo "$1" ;;
    esac
}

info_field() { cli info "$1" | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'; }
used_memory() { info_field memory used_memory; }

# fill_keys N FORMAT: one command per key, FORMAT's %012d the key's number (the numbers
# redis-benchmark's -r N gives __rand_int__).
fill_keys() {
    awk -v n="$1" -v f="$2" 'BEGIN { for (i = 0; i < n; i++) printf f "\n", i }' | load
}

# flush: an empty server, the schedule's retired entries freed, SLOWLOG and stats reset.
flush() {
    cli flushall >/dev/null
    sleep 1
    cli slowlog reset >/dev/null
    cli config resetstat >/dev/null
}

# longest_command: the longest SLOWLOG entry since the last flush, "<us> <command>".
longest_command() {
    python3 - "$PORT" <<'EOF'
import socket, sys
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rb")
s.sendall(b"*3\r\n$7\r\nSLOWLOG\r\n$3\r\nGET\r\n$4\r\n1024\r\n")
def read():
    line = f.readline().rstrip(b"\r\n")
    t, rest = line[:1], line[1:]
    if t == b"*":
        return [read() for _ in range(int(rest))]
    if t == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode("utf-8", "replace")
    if t == b":":
        return int(rest)
    return rest.decode()
# The benchmark's own SAVE, DEBUG RELOAD and FLUSHALL are not what is measured.
ours = {"save", "debug", "flushall", "unlink"}
entries = [e for e in read() if str(e[3][0]).lower() not in ours]
best = max(entries, key=lambda e: e[2], default=None)
if best is None:
    print("0 (none over 10 ms)")
else:
    print(best[2], " ".join(str(a) for a in best[3][:4]))
EOF
}

# module_memory: used_memory of this server minus that of a server without tally loading
# the same data (SAVE, then a plain server on the RDB).
module_memory() {
    local with without port
    cli save >/dev/null
    with=$(used_memory)
    port=$((PORT + 50))
    while ! port_is_free "$port"; do port=$((port + 1)); done
    "$SERVER" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" \
        --dbfilename dump.rdb --daemonize yes --pidfile "$DIR/plain.pid" --logfile "$DIR/plain.log"
    for _ in $(seq 6000); do
        [ "$(redis-cli -p "$port" info persistence 2>/dev/null | tr -d '\r' |
            awk -F: '$1 == "loading" { print $2 }')" = 0 ] && break
        sleep 0.1
    done
    without=$(redis-cli -p "$port" info memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }')
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    rm -f "$DIR/dump.rdb"
    echo $((with - without))
}

per_object() { awk -v b="$1" -v n="$2" 'BEGIN { printf "%.0f", b / n }'; }

mem_line() { printf '  %-64s %12s\n' "$1" "$2"; }

scale_counters() {
    local n=$1 label=$2 before data module t0 reload_ms scan_ms scan_tick reply
    flush
    before=$(used_memory)
    progress "$label: loading $n counters"
    fill_keys "$n" "TSCOUNTER.INCR c:%012d"
    data=$(($(used_memory) - before))
    fill_keys "$n" "HINCRBY h:%012d f 1"
    native hincrby -r "$n" -- HINCRBY h:__rand_int__ f 1
    tally tscounter.incr -r "$n" -- TSCOUNTER.INCR c:__rand_int__
    report "TSCOUNTER.INCR $label keys / HINCRBY $label keys" "" ""
    native hget -r "$n" -- HGET h:__rand_int__ f
    tally tscounter.sum -r "$n" -- TSCOUNTER.SUM c:__rand_int__ 5m
    report "TSCOUNTER.SUM 5m $label keys / HGET $label keys" "" ""
    # The hashes go before the memory comparison: it is about the counters alone.
    awk -v n="$n" 'BEGIN { for (i = 0; i < n; i += 1000) {
        line = "UNLINK"; for (j = i; j < i + 1000 && j < n; j++) line = line sprintf(" h:%012d", j); print line } }' | load
    sleep 1
    module=$(module_memory)
    mem_line "counter data per object (used_memory grown by the load)" "$(per_object "$data" "$n") B"
    mem_line "tally module per counter (used_memory - plain server, same RDB)" "$(per_object "$module" "$n") B"
    mem_line "  INFO tally: cache bytes / event filter bytes" \
        "$(info_field tally tally_cache_bytes) / $(info_field tally tally_event_filter_bytes)"
    t0=$(date +%s%N)
    reply=$(cli debug reload 2>&1)
    reload_ms=$((($(date +%s%N) - t0) / 1000000))
    if [ "$reply" != OK ]; then
        mem_line "DEBUG RELOAD of $n counters" "n/a: $reply"
        return
    fi
    t0=$(date +%s%N)
    for _ in $(seq 12000); do
        [ "$(info_field tally tally_scan_in_progress)" = 0 ] && break
        sleep 0.05
    done
    scan_ms=$((($(date +%s%N) - t0) / 1000000))
    scan_tick=$(info_field tally tally_max_tick_us)
    mem_line "DEBUG RELOAD of $n counters (client-side)" "${reload_ms} ms"
    mem_line "start-up scan after it, until done (client-side, 50 ms polls)" "${scan_ms} ms"
    mem_line "objects the scan scheduled again (tally_tracked_objects)" "$(info_field tally tally_tracked_objects)"
    mem_line "longest command (SLOWLOG, >10 ms): us, command" "$(longest_command)"
    mem_line "longest timer tick until now (tally_max_tick_us)" "$scan_tick us"
    # Last (its copies are counters too, and would count in the memory above): the native
    # floor at this key count, a client doing INCR's hash work itself on copies of the
    # counters as they are now (a listpack is searched from its start, so its length
    # counts).
    awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "COPY c:%012d cp:%012d\n", i, i }' | load
    incr_floor_row "$n" "$label"
}

scale_stats() {
    local n=$1 label=$2 before data module
    flush
    before=$(used_memory)
    progress "$label: loading $n STATS keys"
    fill_keys "$n" "STATS.ADD st:%012d 1"
    data=$(($(used_memory) - before))
    fill_keys "$n" "HINCRBY h:%012d f 1"
    native hincrby -r "$n" -- HINCRBY h:__rand_int__ f 1
    tally stats.add -r "$n" -- STATS.ADD st:__rand_int__ 5
    report "STATS.ADD $label keys / HINCRBY $label keys" "" ""
    mem_line "STATS data per object (used_memory grown by the load)" "$(per_object "$data" "$n") B"
    mem_line "longest command (SLOWLOG, >10 ms): us, command" "$(longest_command)"
}

scale_rank() {
    local n=$1 label=$2 before data
    flush
    before=$(used_memory)
    progress "$label: loading a board of $n members"
    board_load rk:scale "$n" "$(server_ms)"
    data=$(($(used_memory) - before))
    awk -v n="$n" 'BEGIN { for (c = 0; c < n / 1000; c++) {
        line = "ZADD z"; for (i = 0; i < 1000; i++) line = line sprintf(" 1 m:%012d", c * 1000 + i); print line } }' | load
    native zincrby -r "$n" -- ZINCRBY z 1 m:__rand_int__
    tally tsrank.incrby -r "$n" -- TSRANK.INCRBY rk:scale 1 m:__rand_int__
    report "TSRANK.INCRBY board of $label / ZINCRBY zset of $label" "" ""
    mem_line "board data per member (used_memory grown by the load)" "$(per_object "$data" "$n") B"
    mem_line "longest command (SLOWLOG, >10 ms): us, command" "$(longest_command)"
    mem_line "longest timer tick until now (tally_max_tick_us)" "$(info_field tally tally_max_tick_us) us"
}

# The reads' own latency while a slot of BIG members leaves the window: TOP 10 in a loop
# on one connection, the longest reply and the number of reads, and the longest command.
TOP_PROBE='
import socket, sys, time
port, key, leaves_ms, limit_s = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rb")
def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    s.sendall(out)
    return read()
def read():
    line = f.readline().rstrip(b"\r\n")
    t, rest = line[:1], line[1:]
    if t == b"*":
        n = int(rest)
        return [read() for _ in range(n)] if n >= 0 else None
    if t == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if t == b":":
        return int(rest)
    return rest
def now_ms():
    sec, usec = cmd("TIME")
    return int(sec) * 1000 + int(usec) // 1000
while now_ms() < leaves_ms:
    time.sleep(0.01)
began = time.monotonic()
longest, reads, gone = 0.0, 0, -1
while time.monotonic() - began < limit_s:
    t = time.monotonic()
    cmd("TSRANK.TOP", key, "10")
    longest = max(longest, time.monotonic() - t)
    reads += 1
    if cmd("EXISTS", key) == 0:
        gone = int((time.monotonic() - began) * 1000)
        break
print("%.2f %d %d" % (longest * 1000, reads, gone))
'

big_expiry() {
    local n=$1 window_s=60 t0 leaves result longest reads gone loaded_in began
    flush
    cli tsrank.create rk:exp WINDOW "${window_s}s" SLOT 1s >/dev/null
    t0=$(server_ms)
    began=$(date +%s%N)
    board_load rk:exp "$n" "$t0"
    cli tsrank.incrby rk:exp 5 late >/dev/null
    loaded_in=$((($(date +%s%N) - began) / 1000000))
    leaves=$(((t0 / 1000 + window_s) * 1000))
    if [ "$(server_ms)" -ge "$leaves" ]; then
        echo "  n/a (loading took ${loaded_in} ms, longer than the ${window_s} s window)"
        return
    fi
    cli slowlog reset >/dev/null
    result=$(python3 -c "$TOP_PROBE" "$PORT" rk:exp "$leaves" 120)
    read -r longest reads gone <<<"$result"
    mem_line "longest TSRANK.TOP 10 (client-side) from the slot leaving on" "$longest ms"
    mem_line "  reads during the expiry; board gone after (ms, -1: not in 120 s)" "$reads; $gone"
    mem_line "  longest command (SLOWLOG, >10 ms): us, command" "$(longest_command)"
    mem_line "  longest timer tick until now (tally_max_tick_us)" "$(info_field tally tally_max_tick_us) us"
}

# A board of BIG members, one member's count edited by a native HSET of its slot hash:
# the server time of each read (INFO commandstats) while the timer repairs the board.
big_quarantine() {
    local n=$1 t0 slot cmdline
    flush
    cli tsrank.create rk:q WINDOW 1h SLOT 1m >/dev/null
    t0=$(server_ms)
    slot=$((t0 / 60000))
    board_load rk:q "$n" "$t0"
    cli config resetstat >/dev/null
    cli slowlog reset >/dev/null
    cli hset "rk:q|slot|$slot" m:000000000001 5000 >/dev/null
    for _ in $(seq 20); do
        cli tsrank.score rk:q m:000000000001 >/dev/null
        cli tsrank.rank rk:q m:000000000001 >/dev/null
        cli tsrank.top rk:q 10 >/dev/null
        cli tsrank.info rk:q >/dev/null
    done
    for cmdline in score rank top info; do
        mem_line "TSRANK.${cmdline^^} of the quarantined board: server us per call (20)" \
            "$(cli info commandstats | tr -d '\r' | awk -F'[:,=]' -v c="cmdstat_tsrank.$cmdline" \
                '$1 == c { printf "%.1f", $5 / $3 }')"
    done
    mem_line "  first of the reads ranks the edit: TSRANK.RANK m:...1 now" "$(cli tsrank.rank rk:q m:000000000001)"
    mem_line "  longest command (SLOWLOG, >10 ms): us, command" "$(longest_command)"
}

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
echo "tally scale benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine:   $cpu, $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server:    $("$SERVER" --version | awk '{ print $1, $3 }' | cut -d= -f2) ($(command -v "$SERVER")), no persistence"
echo "client:    ${RB[*]} -n N -r <key count> --csv <command>; ${ROUNDS} measured runs, the best counts"
echo "scales:    $SCALES; big boards: $BIG members"
if awk -v l="$(cut -d' ' -f1 /proc/loadavg)" -v c="$(nproc)" 'BEGIN { exit !(l > c) }'; then
    echo "note:      the load average exceeds the cores: the server waits for a CPU mid-command,"
    echo "           which SLOWLOG and the times per call count (native commands as much as tally's)"
fi

for scale in $SCALES; do
    n=$(count_of "$scale")
    section "$scale objects"
    # shellcheck disable=SC2059
    printf "$ROW_FMT" "row (tally / native)" "tally rps" "native rps" "ratio" "target" "tally us" "native us" "ratio" "target"
    for family in $FAMILIES; do
        case $family in
            counter) scale_counters "$n" "$scale" ;;
            stats) scale_stats "$n" "$scale" ;;
            rank) scale_rank "$n" "$scale" ;;
        esac
    done
    echo "  used_memory free on the machine now: $(awk '/MemAvailable/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
done

if [ "$BIG" -gt 0 ]; then
    section "a slot of $BIG members expiring under TSRANK.TOP"
    big_expiry "$BIG"
    section "a board of $BIG members quarantined by a native HSET"
    big_quarantine "$BIG"
fi

if [ "$HOST" = 1 ]; then
    flush
    section "host tax (native commands on keys that are not tally's; $BENCH_HOST_ROUNDS alternating runs per server, the best counts)"
    host_fixtures_servers
    host_rows
fi

echo
echo "load average now $(cut -d' ' -f1-3 /proc/loadavg); took $(($(date +%s) - BEGAN)) s"
