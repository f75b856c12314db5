#!/usr/bin/env bash
# make bench-java: server time per request of TallyRateLimiter (clients/java, one
# TSTHROTTLE.ALLOW per request) against Spring Cloud Gateway's RedisRateLimiter (its token
# bucket script request_rate_limiter.lua, run with EVALSHA as Spring's ReactiveRedisTemplate
# does, and with EVAL), in the same server, on a hot key and over 100k keys.
#
# The script is read at bench time from the spring-cloud-gateway-server jar that the Maven
# build of clients/java resolves into the local Maven repository; it is never copied into
# the project. Both sides get the arguments the limiters send for the same route:
# replenishRate 10, burstCapacity 20, requestedTokens 1 (RedisRateLimiter: KEYS
# request_rate_limiter.{route.id}.tokens and .timestamp, ARGV 10 20 "" 1, the empty ARGV[3]
# making the script read the server's TIME; TallyRateLimiter: TSTHROTTLE.ALLOW
# tally_rate_limiter.{route.id} 19 10 1000 QUANTITY 1).
#
# Each row: CONFIG RESETSTAT, then N commands sent through `redis-cli --pipe` (the server
# is the bottleneck, not the client), then the server's own time per call from INFO
# commandstats (usec / calls of cmdstat_evalsha, cmdstat_eval, cmdstat_tsthrottle.allow; a
# script's time includes the commands it calls). BENCH_ROUNDS runs (default 3), the best
# counts. On the hot key almost every request is refused after the first burst; over 100k
# keys most are allowed and write.
#
# Environment: REDIS_SERVER (default redis-server on PATH), BENCH_MODULE (default
# target/release/libtally.so), BENCH_CALLS (default 200000), BENCH_ROUNDS (default 3),
# MVN_ARGS (extra mvn arguments, e.g. -Dmaven.repo.local=...).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SERVER=${REDIS_SERVER:-redis-server}
MODULE=${BENCH_MODULE:-$ROOT/target/release/libtally.so}
CALLS=${BENCH_CALLS:-200000}
ROUNDS=${BENCH_ROUNDS:-3}
KEYS=100000

[ -f "$MODULE" ] || { echo "bench-java: $MODULE is missing (make build)" >&2; exit 1; }
DIR=$(mktemp -d /tmp/tally-bench-java.XXXXXX)
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT

# The gateway jar of the build's pinned Spring Cloud release, from the local Maven repository.
(cd clients/java && mvn -B -q ${MVN_ARGS:-} -pl tally-spring-gateway -am -DskipTests compile \
    dependency:build-classpath -Dmdep.includeScope=provided -Dmdep.outputFile="$DIR/classpath.txt") >&2
JAR=$(tr ':' '\n' <"$DIR/classpath.txt" | grep -E '/spring-cloud-gateway-server-[0-9][^/]*\.jar$' | head -1)
[ -n "$JAR" ] || { echo "bench-java: no spring-cloud-gateway-server jar on the build's classpath" >&2; exit 1; }
unzip -p "$JAR" META-INF/scripts/request_rate_limiter.lua >"$DIR/request_rate_limiter.lua"
[ -s "$DIR/request_rate_limiter.lua" ] || { echo "bench-java: no request_rate_limiter.lua in $JAR" >&2; exit 1; }

port_is_free() { ! (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=7479
while ! port_is_free "$PORT"; do PORT=$((PORT + 1)); done
"$SERVER" --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" \
    --loadmodule "$MODULE" >"$DIR/server.log" 2>&1 &
PID=$!
cli() { redis-cli -p "$PORT" "$@"; }
for _ in $(seq 100); do cli ping >/dev/null 2>&1 && break; sleep 0.05; done
SHA=$(cli script load "$(cat "$DIR/request_rate_limiter.lua")")

# commands KIND SPREAD: N commands as RESP, to $DIR/cmds.resp. SPREAD 1 = one key, else the
# subjects 0..SPREAD-1 at random (the same subject names both of the script's keys).
commands() {
    python3 - "$1" "$2" "$CALLS" "$SHA" "$DIR/request_rate_limiter.lua" >"$DIR/cmds.resp" <<'PY'
import random, sys
kind, spread, calls, sha, script = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], open(sys.argv[5]).read()
out = sys.stdout.buffer
def resp(*args):
    b = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        b.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(b)
rnd = random.Random(7)
for _ in range(calls):
    subject = "route.%d" % (rnd.randrange(spread) if spread > 1 else 0)
    if kind == "tally":
        out.write(resp("TSTHROTTLE.ALLOW", "tally_rate_limiter.{%s}" % subject, "19", "10", "1000ms", "QUANTITY", "1"))
    else:
        keys = ("request_rate_limiter.{%s}.tokens" % subject, "request_rate_limiter.{%s}.timestamp" % subject)
        head = ("EVALSHA", sha) if kind == "evalsha" else ("EVAL", script)
        out.write(resp(*head, "2", *keys, "10", "20", "", "1"))
PY
}

# usec_per_call CMDSTAT: usec / calls of INFO commandstats' cmdstat_<CMDSTAT> line.
usec_per_call() {
    cli info commandstats | tr -d '\r' | awk -F'[:,=]' -v name="cmdstat_$1" \
        '$1 == name { for (i = 2; i < NF; i += 2) v[$i] = $(i + 1); printf "%.2f", v["usec"] / v["calls"] }'
}

# measure KIND SPREAD CMDSTAT: the best usec per call of ROUNDS runs.
measure() {
    local best="" u
    commands "$1" "$2"
    cli --pipe <"$DIR/cmds.resp" >/dev/null # warm-up: the keys exist as in a running gateway
    for _ in $(seq "$ROUNDS"); do
        cli config resetstat >/dev/null
        cli --pipe <"$DIR/cmds.resp" >/dev/null
        u=$(usec_per_call "$3")
        if [ -z "$best" ] || awk -v a="$u" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$u; fi
    done
    echo "$best"
}

VERSION=$("$SERVER" --version | grep -o 'v=[0-9.]*' | cut -d= -f2)
echo "Server time per rate-limited request (usec_per_call, $CALLS calls, best of $ROUNDS), $(basename "$SERVER") $VERSION,"
echo "replenishRate 10, burstCapacity 20, requestedTokens 1; script: $(basename "$JAR")!request_rate_limiter.lua"
printf '%-10s | %28s | %28s | %26s | %s\n' "keys" "TallyRateLimiter (TSTHROTTLE)" "RedisRateLimiter (EVALSHA)" "RedisRateLimiter (EVAL)" "Tally / EVALSHA"
for row in "hot 1" "100k $KEYS"; do
    set -- $row
    cli flushall >/dev/null
    t=$(measure tally "$2" tsthrottle.allow)
    cli flushall >/dev/null
    s=$(measure evalsha "$2" evalsha)
    cli flushall >/dev/null
    e=$(measure eval "$2" eval)
    printf '%-10s | %28s | %28s | %26s | %s\n' "$1" "$t" "$s" "$e" "$(awk -v a="$t" -v b="$s" 'BEGIN { printf "%.2f", a / b }')"
done
