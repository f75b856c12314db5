# TSRANK benchmarks, sourced by scripts/bench.sh (uses its bench, CLI, NOW_MS, RATIOS,
# MEMORY_LINES). Compares with what the hand-built design (seed 000) does per event.

# Seed 000 per like: read the current slot name, HINCRBY the slot hash, ZINCRBY the totals.
LUA_RANK='local last = redis.call("GET", KEYS[1])
if not last then last = "0" end
redis.call("HINCRBY", KEYS[2] .. last, ARGV[1], 1)
redis.call("ZINCRBY", KEYS[3], 1, ARGV[1])
return 1'
SHA_RANK=$("${CLI[@]}" script load "$LUA_RANK")

"${CLI[@]}" del rk:incr rk:incr:z rk:board rk:plain 'rk:lua:slot_' rk:lua:last rk:lua:z >/dev/null
"${CLI[@]}" set rk:lua:last "$(( NOW_MS / 3600000 ))" >/dev/null

# A board with 100k members for TOP, and the same totals in a plain sorted set.
for batch in $(seq 0 99); do
    line="TSRANK.INCRBY rk:board"
    zline="ZADD rk:plain"
    for i in $(seq 0 999); do
        m=$(( batch * 1000 + i ))
        line+=" $(( m % 997 + 1 )) m:$m"
        zline+=" $(( m % 997 + 1 )) m:$m"
    done
    echo "$line"
    echo "$zline"
done | "${CLI[@]}" >/dev/null

bench "ZINCRBY (100k members)"                 -r 100000 -- ZINCRBY rk:incr:z 1 "m:__rand_int__"
bench "TSRANK.INCRBY (100k members)"           -r 100000 -- TSRANK.INCRBY rk:incr 1 "m:__rand_int__"
bench "Lua seed 000 like (100k members)"       -r 100000 -- EVALSHA "$SHA_RANK" 3 rk:lua:last rk:lua:slot_ rk:lua:z "m:__rand_int__"
bench "ZREVRANGE 0 9 WITHSCORES (100k)"        -- ZREVRANGE rk:plain 0 9 WITHSCORES
bench "TSRANK.TOP 10 WITHSCORES (100k)"        -- TSRANK.TOP rk:board 10 WITHSCORES
bench "ZREVRANGE 0 9 (100k)"                   -- ZREVRANGE rk:plain 0 9
bench "TSRANK.TOP 10 (100k)"                   -- TSRANK.TOP rk:board 10

RATIOS+=(
  "TSRANK.INCRBY / ZINCRBY [>= 0.8]|TSRANK.INCRBY (100k members)|ZINCRBY (100k members)"
  "TSRANK.INCRBY / Lua seed 000 like|TSRANK.INCRBY (100k members)|Lua seed 000 like (100k members)"
  "TSRANK.TOP 10 / ZREVRANGE 0 9 [>= 0.9]|TSRANK.TOP 10 (100k)|ZREVRANGE 0 9 (100k)"
  "TSRANK.TOP 10 WITHSCORES / ZREVRANGE WITHSCORES [>= 0.9]|TSRANK.TOP 10 WITHSCORES (100k)|ZREVRANGE 0 9 WITHSCORES (100k)"
)

rank_bytes() {
    local total=0 k
    for k in $("${CLI[@]}" --scan --pattern "$1"); do
        total=$(( total + $("${CLI[@]}" memory usage "$k" SAMPLES 0) ))
    done
    echo "$total"
}
MEMORY_LINES+=(
  "$(printf '%-60s %s bytes' "leaderboard, 100k members in one slot (all keys)" "$(rank_bytes 'rk:board*')")"
  "$(printf '%-60s %s bytes' "plain sorted set, same 100k totals" "$(rank_bytes 'rk:plain')")"
)
