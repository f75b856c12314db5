# STATS part of `make bench`, sourced by scripts/bench.sh (uses its helpers: load, cli,
# native, tally, report, memory_line, NOW_MS, ...).

STATS_PERIODS=24
STATS_VALUES=10000

stats_fixtures() {
    progress "stats fixtures"
    # st:lat: 24 hourly periods (the default PERIOD 1h KEEP 24) of 10k lognormal(3, 1)
    # values each, 1000 values per STATS.ADD, AT inside each of the latest 24 hours; seeded.
    awk -v key=st:lat -v periods="$STATS_PERIODS" -v per="$STATS_VALUES" -v now="$NOW_MS" -v hour="$HOUR_MS" 'BEGIN {
        srand(42); pi = atan2(0, -1)
        for (h = 0; h < periods; h++)
            for (i = 0; i < per; i += 1000) {
                line = "STATS.ADD " key
                for (j = 0; j < 1000 && i + j < per; j++) {
                    u1 = 1 - rand(); u2 = rand()
                    line = line " " exp(3 + sqrt(-2 * log(u1)) * cos(2 * pi * u2))
                }
                print line " AT " sprintf("%.0f", now - h * hour)
            }
    }' | load
    # Ten pages' objects, 1000 values each in the current period, for the MGET row.
    awk -v now="$NOW_MS" 'BEGIN {
        srand(7)
        for (p = 0; p < 10; p++) {
            line = "STATS.ADD {pg}:" p
            for (j = 0; j < 1000; j++) line = line " " sprintf("%.3f", 10 + 90 * rand())
            print line " AT " now
        }
    }' | load
    # The hand-built update people write in Lua: per hour one sorted set whose members min,
    # max, count, sum and sumsq hold the running aggregates.
    SHA_STATS=$(cli script load 'local hour = math.floor(tonumber(redis.call("TIME")[1]) / 3600)
local k = KEYS[1] .. ":" .. hour
local v = tonumber(ARGV[1])
redis.call("ZADD", k, "LT", v, "min")
redis.call("ZADD", k, "GT", v, "max")
redis.call("ZINCRBY", k, 1, "count")
redis.call("ZINCRBY", k, v, "sum")
redis.call("ZINCRBY", k, v * v, "sumsq")
return 1')
    # shellcheck disable=SC2046
    cli hset floor:summary $(cli stats.get st:lat) >/dev/null
    prefill STATS.ADD "st:__rand_int__" 12.5
    prefill EVALSHA "$SHA_STATS" 1 "lua:__rand_int__" 12.5
    stats_floor_fixtures
}

# The floors of STATS.ADD over 100k keys work on hashes of the same shape as st:<i>: the
# marker and the current period's two fields, in the same order, with values of the same
# sizes (letters: the stored ones are binary). They are written with HSET under names
# tally never opened, so their keyspace events are turned away at tally's first check,
# like those of any key that is not tally's. Sets STATS_FLOOR_FIELDS (marker, moments,
# sketch) and STATS_FLOOR_VALUES.
stats_floor_fixtures() {
    local sample=st:000000000000 field
    mapfile -t STATS_FLOOR_FIELDS < <(echo _tally; cli hkeys "$sample" | grep -E ':m$'
        cli hkeys "$sample" | grep -E ':q$')
    STATS_FLOOR_VALUES=()
    for field in "${STATS_FLOOR_FIELDS[@]}"; do
        STATS_FLOOR_VALUES+=("$(printf 'v%.0s' $(seq 1 "$(cli hstrlen "$sample" "$field")"))")
    done
    local pairs=()
    for field in 0 1 2; do pairs+=("${STATS_FLOOR_FIELDS[$field]}" "${STATS_FLOOR_VALUES[$field]}"); done
    prefill HSET "sf:__rand_int__" "${pairs[@]}"
}

# stats_count [WINDOW dur]: the count STATS.GET st:lat answers.
stats_count() { cli stats.get st:lat "$@" | awk 'prev == "count" { print; exit } { prev = $0 }'; }

stats_rows() {
    local before
    before="current period $(stats_count) values, 24h window $(stats_count WINDOW 24h)"
    section "STATS (st:lat: $before)"
    native hincrby -r 100000 -- HINCRBY "h:__rand_int__" f 1
    tally stats.add -r 100000 -- STATS.ADD "st:__rand_int__" 12.5
    report "STATS.ADD 1 value 100k keys / HINCRBY 100k keys" "<=3" ">=0.50"

    # Floors: what STATS.ADD cannot avoid doing to the hash. Natively, HMGET of the three
    # fields it reads and HSET of the two it writes; through the module API (benchfloor's
    # FLOOR.HWRITE), the same read and write, the write replicated as its HSET effect and
    # a keyspace event: the row's ratio is what tally adds (parsing, the sketch and
    # moments, the expiry schedule, the read cache's bookkeeping).
    local f=("${STATS_FLOOR_FIELDS[@]}") v=("${STATS_FLOOR_VALUES[@]}")
    native hmget -r 100000 -- HMGET "sf:__rand_int__" "${f[@]}"
    native_plus hset -r 100000 -- HSET "sf:__rand_int__" "${f[1]}" "${v[1]}" "${f[2]}" "${v[2]}"
    tally stats.add -r 100000 -- STATS.ADD "st:__rand_int__" 12.5
    report "STATS.ADD 100k keys / HMGET 3 + HSET 2, same shape" "" ""

    native floor.hwrite -r 100000 -- FLOOR.HWRITE "sf:__rand_int__" "${f[@]}"
    tally stats.add -r 100000 -- STATS.ADD "st:__rand_int__" 12.5
    report "STATS.ADD 100k keys / module read 3 + write 2" "<=2" ""

    native hget -- HGET bench:hash f
    tally stats.get -- STATS.GET st:lat
    report "STATS.GET 1 period of 10k values / HGET" "<=8" ""

    # Floor: a native reply of the same shape, HGETALL of a hash holding the 9 fields of
    # that summary (18 bulk strings).
    native hgetall -- HGETALL floor:summary
    tally stats.get -- STATS.GET st:lat
    report "STATS.GET 1 period / HGETALL of its 9 fields" "" ""

    native stats.get -- STATS.GET st:lat
    tally stats.get -- STATS.GET st:lat WINDOW 24h
    report "STATS.GET WINDOW 24h (24 x 10k) / STATS.GET 1 per." "<=2" ""

    # The inverse question from the same merged sketch: three shares against three
    # quantiles of the same 24h window.
    native stats.quantile -- STATS.QUANTILE st:lat 0.5 0.9 0.99 WINDOW 24h
    tally stats.cdf -- STATS.CDF st:lat 20 50 200 WINDOW 24h
    report "STATS.CDF 3 values WINDOW 24h / QUANTILE 3 q" "<=1.5" ""

    # "p99 of every page": one MGET of 10 objects against the 10 GETs a client would
    # pipeline (and merge itself, which GET's summaries cannot do for quantiles).
    local label="STATS.MGET 10 keys / 10 GETs pipelined"
    if command_exists stats.mget; then
        native stats.get -- STATS.GET "{pg}:0"
        native_times 10
        tally stats.mget -- STATS.MGET 10 {pg}:0 {pg}:1 {pg}:2 {pg}:3 {pg}:4 {pg}:5 {pg}:6 {pg}:7 {pg}:8 {pg}:9
        report "$label" "" ""
    else
        skip_row "$label" STATS.MGET
    fi

    native evalsha -r 100000 -- EVALSHA "$SHA_STATS" 1 "lua:__rand_int__" 12.5
    tally stats.add -r 100000 -- STATS.ADD "st:__rand_int__" 12.5
    report "STATS.ADD 100k keys / Lua hand-built update" "" ""

    # An hour boundary during the run empties the current period: say so.
    local after
    after="current period $(stats_count) values, 24h window $(stats_count WINDOW 24h)"
    if [ "$after" != "$before" ]; then
        echo "note: st:lat changed during the run (now $after): an hour boundary passed, STATS.GET rows are not comparable"
    fi
}

stats_memory() {
    memory_line "STATS key, $STATS_PERIODS hourly periods x $STATS_VALUES lognormal values" \
        "$(cli memory usage st:lat samples 0)" 65536
}
