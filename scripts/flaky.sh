#!/usr/bin/env bash
# make test-flaky: the timing-sensitive module-tests binaries and the client suites,
# FLAKY_RUNS times each (default 5), while a busy loop keeps one core loaded: a test
# that fails here once is a bug, whatever the load (make test must pass every time on a
# busy 2-core CI machine). A failure keeps its output and server directories under
# target/flaky/<n>-<test>/. FLAKY_TESTS names the binaries (default below);
# FLAKY_CLIENTS=0 leaves the client suites out; FLAKY_LOAD=0 runs without the busy loop.
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${FLAKY_RUNS:-5}
# The binaries that bound time (latency, ticks, PINGs), wait for the timer or the clock,
# or race replicas and clusters.
read -r -a TESTS <<<"${FLAKY_TESTS:-scale_rank scale_limits scale_schedule scale_caches \
safety_counter safety_stats safety_rank fuzz_faults faults rank scale_stats_across \
replication cluster stats_cache throttle}"
OUT=target/flaky
mkdir -p "$OUT"
: "${TALLY_SERVERS:?run through make test-flaky}" "${TALLY_MODULE:?run through make test-flaky}"
export TALLY_SERVERS TALLY_MODULE

if [ "${FLAKY_LOAD:-1}" != 0 ]; then
    bash -c 'while :; do :; done' &
    busy=$!
    trap 'kill $busy 2>/dev/null' EXIT
fi

cargo test --release -q -p module-tests --no-run >/dev/null 2>&1 || {
    echo "module-tests do not build" >&2
    exit 1
}
n=0
failures=0
record() { # record <name> <status> <log>
    n=$((n + 1))
    if [ "$2" -eq 0 ]; then
        echo "ok   $1"
    else
        failures=$((failures + 1))
        keep="$OUT/$n-$1"
        mkdir -p "$keep"
        cp "$3" "$keep/test.out"
        [ -d "target/module-tests-tmp/$1" ] && cp -r "target/module-tests-tmp/$1" "$keep/servers"
        echo "FAIL $1 -> $keep"
        grep -E 'panicked|FAILED|failed|Error' "$3" | head -5 | sed 's/^/     /'
    fi
    rm -f "$3"
}
for run in $(seq 1 "$RUNS"); do
    echo "== run $run of $RUNS"
    for test in "${TESTS[@]}"; do
        log=$(mktemp)
        cargo test --release -q -p module-tests --test "$test" \
            -- --test-threads="${TEST_THREADS:-2}" >"$log" 2>&1
        record "$test" $? "$log"
    done
    if [ "${FLAKY_CLIENTS:-1}" != 0 ]; then
        log=$(mktemp)
        make -s python-test >"$log" 2>&1
        record python "$?" "$log"
        log=$(mktemp)
        make -s limits-suite >"$log" 2>&1
        record limits-suite "$?" "$log"
        if grep -q '^node-test:' Makefile; then
            log=$(mktemp)
            make -s node-test >"$log" 2>&1
            record node "$?" "$log"
        fi
        if grep -q '^go-test:' Makefile; then
            log=$(mktemp)
            make -s go-test >"$log" 2>&1
            record go "$?" "$log"
        fi
    fi
done
echo "test-flaky: $n runs, $failures failed ($RUNS rounds with one core busy)"
[ "$failures" -eq 0 ]
