# TSRANK part of `make bench`, sourced by scripts/bench.sh (uses its helpers: load, cli,
# native, tally, report, skip_row, memory_line, NOW_MS, ...).
#
# Members are named m:<12 digits> because that is what redis-benchmark's __rand_int__
# expands to: with -r 100000 the benchmark hits the 100k members of the fixtures.

RANK_MEMBERS=100000

rank_fixtures() {
    progress "rank fixtures"
    # One board with 100k members in the current slot, and the same totals in a plain
    # sorted set and counts in a plain hash (the baselines' data; ZINCRBY must not write
    # into the board's own sorted set).
    awk -v n="$RANK_MEMBERS" -v at="$NOW_MS" 'BEGIN {
        for (c = 0; c < n / 1000; c++) {
            board = "TSRANK.INCRBY rk:board"; plain = "ZADD rk:plain"; slot = "HSET rk:plainslot"
            for (i = 0; i < 1000; i++) {
                m = c * 1000 + i; score = m % 997 + 1
                board = board " " score sprintf(" m:%012d", m)
                plain = plain " " score sprintf(" m:%012d", m)
                slot = slot sprintf(" m:%012d", m) " " score
            }
            print board " AT " at; print plain; print slot
        }
    }' | load
    # Seed 000 per like: read the current slot name, HINCRBY the slot hash, ZINCRBY totals.
    cli set rk:lua:last "$((NOW_MS / HOUR_MS))" >/dev/null
    SHA_RANK=$(cli script load 'local last = redis.call("GET", KEYS[1])
if not last then last = "0" end
redis.call("HINCRBY", KEYS[2] .. last, ARGV[1], 1)
redis.call("ZINCRBY", KEYS[3], 1, ARGV[1])
return 1')
    prefill EVALSHA "$SHA_RANK" 3 rk:lua:last rk:lua:slot_ rk:lua:z "m:__rand_int__"
    # For HISTORY: a 24h/1h board whose 10k members have a count in each of 24 slots.
    if command_exists tsrank.history; then
        cli tsrank.create rk:hist WINDOW 24h SLOT 1h >/dev/null
        awk -v at="$NOW_MS" -v hour="$HOUR_MS" 'BEGIN {
            for (h = 0; h < 24; h++)
                for (c = 0; c < 10; c++) {
                    line = "TSRANK.INCRBY rk:hist"
                    for (i = 0; i < 1000; i++) line = line sprintf(" %d m:%012d", h + 1, c * 1000 + i)
                    print line " AT " sprintf("%.0f", at - h * hour)
                }
        }' | load
    fi
}

rank_rows() {
    section "TSRANK (board and plain sorted set with 100k members)"
    native zincrby -r 100000 -- ZINCRBY rk:plain 1 "m:__rand_int__"
    tally tsrank.incrby -r 100000 -- TSRANK.INCRBY rk:board 1 "m:__rand_int__"
    report "TSRANK.INCRBY 1 member / ZINCRBY" "<=1.5" ">=0.80"

    # Floor: the two native writes a board cannot do without (the member's total in the
    # sorted set, its count in the slot hash), on sorted set and hash of the same size.
    native zincrby -r 100000 -- ZINCRBY rk:plain 1 "m:__rand_int__"
    native_plus hincrby -r 100000 -- HINCRBY rk:plainslot "m:__rand_int__" 1
    tally tsrank.incrby -r 100000 -- TSRANK.INCRBY rk:board 1 "m:__rand_int__"
    report "TSRANK.INCRBY / ZINCRBY + HINCRBY slot hash" "" ""

    # What replicating those two writes as effects costs a module (benchfloor's
    # FLOOR.REPLICATE: two RedisModule_Replicate calls and nothing else; no replica here,
    # the server builds each effect anyway), alone and added to the pair.
    native zincrby -r 100000 -- ZINCRBY rk:plain 1 "m:__rand_int__"
    tally floor.replicate -r 100000 -- FLOOR.REPLICATE rk:floorz rk:floorh "m:__rand_int__"
    report "floor: module replicating 2 effects / ZINCRBY" "" ""
    native zincrby -r 100000 -- ZINCRBY rk:plain 1 "m:__rand_int__"
    native_plus hincrby -r 100000 -- HINCRBY rk:plainslot "m:__rand_int__" 1
    native_plus floor.replicate -r 100000 -- FLOOR.REPLICATE rk:floorz rk:floorh "m:__rand_int__"
    tally tsrank.incrby -r 100000 -- TSRANK.INCRBY rk:board 1 "m:__rand_int__"
    report "TSRANK.INCRBY / the pair + 2 effects replicated" "" ""

    local pairs=() i
    for i in $(seq 10); do pairs+=(1 "m:__rand_int__"); done
    native zincrby -r 100000 -- ZINCRBY rk:plain 1 "m:__rand_int__"
    tally tsrank.incrby -r 100000 -- TSRANK.INCRBY rk:board "${pairs[@]}"
    report "TSRANK.INCRBY 10 pairs, per call / ZINCRBY" "" ""
    tally_per 10
    report "TSRANK.INCRBY 10 pairs, per pair / ZINCRBY" "" ""

    native zrevrange -- ZREVRANGE rk:board 0 9 WITHSCORES
    tally tsrank.top -- TSRANK.TOP rk:board 10 WITHSCORES
    report "TSRANK.TOP 10 WITHSCORES / ZREVRANGE 0 9 WITHSC." "<=1.1" ">=0.90"

    native evalsha -r 100000 -- EVALSHA "$SHA_RANK" 3 rk:lua:last rk:lua:slot_ rk:lua:z "m:__rand_int__"
    tally tsrank.incrby -r 100000 -- TSRANK.INCRBY rk:board 1 "m:__rand_int__"
    report "TSRANK.INCRBY / Lua seed 000 like" "" ""

    # The hand-built equivalent of HISTORY reads the member in each of the 24 slot hashes.
    local label="TSRANK.HISTORY 24 slots / 24 x HGET slot hash"
    if command_exists tsrank.history; then
        native hget -r 10000 -- HGET "rk:hist|slot|$((NOW_MS / HOUR_MS))" "m:__rand_int__"
        native_times 24
        tally tsrank.history -r 10000 -- TSRANK.HISTORY rk:hist "m:__rand_int__" WINDOW 24h
        report "$label" "" ""
    else
        skip_row "$label" TSRANK.HISTORY
    fi

    # REM of a member of the 24-slot board (last: it empties the board's members and the
    # plain sorted set's as it goes; a member already removed costs the same walk).
    label="TSRANK.REM 24 slots / ZREM"
    if command_exists tsrank.rem && command_exists tsrank.history; then
        native zrem -r 10000 -- ZREM rk:plain "m:__rand_int__"
        tally tsrank.rem -r 10000 -- TSRANK.REM rk:hist "m:__rand_int__"
        report "$label" "" ""
    else
        skip_row "$label" TSRANK.REM
    fi
}

# rank_bytes PATTERN: total MEMORY USAGE of the keys matching PATTERN.
rank_bytes() {
    local total=0 k
    for k in $(cli --scan --pattern "$1"); do
        total=$((total + $(cli memory usage "$k" samples 0)))
    done
    echo "$total"
}

rank_memory() {
    memory_line "leaderboard, 100k members in one slot (all its keys)" "$(rank_bytes 'rk:board*')"
    memory_line "plain sorted set, the same 100k members" "$(rank_bytes 'rk:plain')"
}

# PING_PROBE PORT KEY LEAVES_MS TIMEOUT_S: PINGs in a loop; from LEAVES_MS (the moment the
# slot leaves the window, server and probe share the clock) keeps the maximum latency and
# every 50 pings checks whether KEY is gone. Prints "max_ms pings gone_after_ms
# max_ms_before" (gone after -1 on timeout; the last figure is the maximum before the slot
# left: the noise floor of the machine, since the probe itself can be descheduled).
PING_PROBE='
import socket, sys, time
port, key, leaves_ms, timeout = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3]), float(sys.argv[4])
conn = socket.create_connection(("127.0.0.1", port))
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buffered = b""
def call(command):
    global buffered
    conn.sendall(command)
    while b"\r\n" not in buffered:
        chunk = conn.recv(4096)
        if not chunk:
            sys.exit("connection closed")
        buffered += chunk
    reply, buffered = buffered.split(b"\r\n", 1)
    return reply
worst, worst_before, pings, gone_after, began = 0.0, 0.0, 0, -1, time.time()
while time.time() - began < timeout:
    sent = time.perf_counter()
    call(b"PING\r\n")
    latency = time.perf_counter() - sent
    if time.time() * 1000 < leaves_ms:
        worst_before = max(worst_before, latency)
        continue
    worst = max(worst, latency)
    pings += 1
    if pings % 50 == 0 and call(b"EXISTS " + key + b"\r\n") == b":0":
        gone_after = int(time.time() * 1000) - leaves_ms
        break
print("%.2f %d %d %.2f" % (worst * 1000, pings, gone_after, worst_before * 1000))
'

# board_load KEY MEMBERS AT: adds 1 to MEMBERS members in the slot of AT, 1000 a command.
board_load() {
    awk -v key="$1" -v n="$2" -v at="$3" 'BEGIN {
        for (c = 0; c < n / 1000; c++) {
            line = "TSRANK.INCRBY " key
            for (i = 0; i < 1000; i++) line = line sprintf(" 1 m:%012d", c * 1000 + i)
            print line " AT " at
        }
    }' | load
}

rank_expiry_latency() {
    local members=1000000 calibration=50000 window_s began t0 loaded_in leaves result
    local max_ms pings gone_after before_ms v
    if ! command -v python3 >/dev/null; then
        echo "n/a (python3 is needed for the PING probe)"
        return
    fi
    # The slot must still be in the window when loading ends, and the shorter the window
    # the shorter the wait: size it from the time a 5% sample takes to load.
    began=$(date +%s%N)
    board_load rk:calibration "$calibration" "$(server_ms)"
    cli del rk:calibration >/dev/null
    window_s=$(awk -v ns="$(($(date +%s%N) - began))" -v k="$((members / calibration))" \
        'BEGIN { w = int(ns * k * 1.5 / 1e9) + 4; if (w < 10) w = 10; print w }')
    cli tsrank.create rk:big WINDOW "${window_s}s" SLOT 1s >/dev/null
    t0=$(server_ms)
    began=$(date +%s%N)
    board_load rk:big "$members" "$t0"
    loaded_in=$((($(date +%s%N) - began) / 1000000))
    leaves=$(((t0 / 1000 + window_s) * 1000))
    if [ "$(server_ms)" -ge "$leaves" ]; then
        echo "n/a (loading took ${loaded_in} ms, longer than the ${window_s} s window)"
        return
    fi
    result=$(python3 -c "$PING_PROBE" "$PORT" rk:big "$leaves" 120)
    read -r max_ms pings gone_after before_ms <<<"$result"
    if awk -v m="$max_ms" 'BEGIN { exit !(m <= 10) }'; then
        v="<=10 ok"; MET=$((MET + 1))
    else
        v="<=10 MISS"; MISSED=$((MISSED + 1))
    fi
    printf '%-66s %10s ms     %s\n' "max PING latency from the slot leaving until the board is gone" "$max_ms" "$v"
    printf '%-66s %10s ms\n' "max PING latency before the slot left (noise floor)" "$before_ms"
    echo "  ${members} members loaded in ${loaded_in} ms (pipelined), window ${window_s} s of 1 s slots;" \
        "$pings PINGs during expiry"
    echo "  board gone ${gone_after} ms after the slot left (-1: not within 120 s);" \
        "tally.expire-budget-us=$(cli config get tally.expire-budget-us | tail -n 1);" \
        "tally_max_tick_us over the whole run: $(cli info tally | tr -d '\r' | awk -F: '$1 == "tally_max_tick_us" { print $2 }')"
}
