#!/usr/bin/env bash
# make soak: the fuzzers and fault scenarios again and again with fresh random seeds, for
# SOAK_MINUTES (default 30). A failure keeps its output and server directories under
# target/soak/<n>-<test>/ and prints the seed to replay it:
#   TALLY_FUZZ_SEED=<seed> make module-test   (or cargo test ... --test <test>)
# Seeds the fixed-seed runs of make test never try have found real bugs (see git log).
set -uo pipefail
cd "$(dirname "$0")/.."
MINUTES=${SOAK_MINUTES:-30}
TESTS=(fuzz fuzz_faults faults safety_counter safety_rank safety_stats)
OUT=target/soak
mkdir -p "$OUT"
end=$(($(date +%s) + MINUTES * 60))
runs=0
failures=0
while [ "$(date +%s)" -lt "$end" ]; do
    for test in "${TESTS[@]}"; do
        runs=$((runs + 1))
        seed=$(( (RANDOM << 15 | RANDOM) ))
        log=$(mktemp)
        if TALLY_FUZZ_SEED=$seed cargo test --release -q -p module-tests --test "$test" \
            -- --test-threads="${TEST_THREADS:-2}" >"$log" 2>&1; then
            echo "ok   $test seed $seed"
        else
            failures=$((failures + 1))
            keep="$OUT/$runs-$test"
            mkdir -p "$keep"
            mv "$log" "$keep/test.out"
            cp -r "target/module-tests-tmp/$test" "$keep/servers" 2>/dev/null
            echo "FAIL $test seed $seed -> $keep"
        fi
        rm -f "$log"
        [ "$(date +%s)" -lt "$end" ] || break
    done
done
echo "soak: $runs runs, $failures failed, in $MINUTES min"
[ "$failures" -eq 0 ]
