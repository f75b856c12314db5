# STATS benchmarks, sourced by scripts/bench.sh (uses its bench, CLI, NOW_MS, RATIOS,
# MEMORY_LINES). Compares STATS.ADD with a plain HINCRBY and with the hand-built update
# people write in Lua: per hour one sorted set whose members min, max, count, sum and
# sumsq hold the running aggregates (ZADD LT/GT for min/max, ZINCRBY for the rest).

LUA_STATS='local hour = math.floor(tonumber(redis.call("TIME")[1]) / 3600)
local k = KEYS[1] .. ":" .. hour
local v = tonumber(ARGV[1])
redis.call("ZADD", k, "LT", v, "min")
redis.call("ZADD", k, "GT", v, "max")
redis.call("ZINCRBY", k, 1, "count")
redis.call("ZINCRBY", k, v, "sum")
redis.call("ZINCRBY", k, v * v, "sumsq")
return 1'
SHA_STATS=$("${CLI[@]}" script load "$LUA_STATS")

# lognormal_adds KEY HOURS PER_HOUR: STATS.ADD commands (500 values each, AT inside each
# of the latest HOURS hours) with lognormal(mu=3, sigma=1) values, seeded.
lognormal_adds() {
    awk -v key="$1" -v hours="$2" -v per="$3" -v now="$NOW_MS" 'BEGIN {
        srand(42); pi = atan2(0, -1)
        for (h = 0; h < hours; h++) {
            for (i = 0; i < per; i += 500) {
                line = "STATS.ADD " key
                for (j = 0; j < 500 && i + j < per; j++) {
                    u1 = 1 - rand(); u2 = rand()
                    line = line " " exp(3 + sqrt(-2 * log(u1)) * cos(2 * pi * u2))
                }
                print line " AT " sprintf("%.0f", now - h * 3600000)
            }
        }
    }'
}

"${CLI[@]}" del st:hot st:big st:lat >/dev/null
lognormal_adds st:big 1 10000 | "${CLI[@]}" >/dev/null
lognormal_adds st:lat 24 10000 | "${CLI[@]}" >/dev/null

bench "STATS.ADD (100k keys, one value)"       -r 100000 -- STATS.ADD "st:__rand_int__" 12.5
bench "STATS.ADD (hot key)"                     -- STATS.ADD st:hot 12.5
bench "STATS.ADD (hot key, 10k-value period)"   -- STATS.ADD st:big 12.5
bench "STATS.ADD 10 values (100k keys)"         -r 100000 -- STATS.ADD "st10:__rand_int__" 1 2 3 4 5 6 7 8 9 10
bench "Lua hand-built stats update (100k keys)" -r 100000 -- EVALSHA "$SHA_STATS" 1 "lua:__rand_int__" 12.5
bench "STATS.GET (10k-value period)"            -- STATS.GET st:big
bench "STATS.GET WINDOW 24h (24 x 10k values)"  -- STATS.GET st:lat WINDOW 24h

RATIOS+=(
  "STATS.ADD 100k keys / HINCRBY [>= 0.5]|STATS.ADD (100k keys, one value)|HINCRBY (hot key)"
  "STATS.ADD hot key / HINCRBY|STATS.ADD (hot key)|HINCRBY (hot key)"
  "STATS.ADD 10k-value period / HINCRBY|STATS.ADD (hot key, 10k-value period)|HINCRBY (hot key)"
  "STATS.ADD 100k keys / Lua hand-built update|STATS.ADD (100k keys, one value)|Lua hand-built stats update (100k keys)"
  "STATS.GET / HGET|STATS.GET (10k-value period)|HGET"
)
MEMORY_LINES+=(
  "$(printf '%-60s %s bytes [< 65536]' "STATS key, 24 hourly periods x 10,000 lognormal values" "$("${CLI[@]}" memory usage st:lat samples 0)")"
)
