#!/usr/bin/env bash
# make memcheck: the cache, safety and fault tests against Valkey 9 (built with libc malloc,
# so every allocation is seen) running under valgrind memcheck, with the module loaded.
# Fails when valgrind reports an error with a tally frame in its stack; reports from the
# server alone that are known noise are suppressed by scripts/memcheck.supp. Test failures
# are listed but do not decide the verdict: under valgrind the server is 20-50 times
# slower, and the tests that bound latency fail for that reason alone.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
VALKEY="$ROOT/.tools/bin/valkey-server"
WRAP_DIR="$ROOT/target/memcheck"
LOGS="$ROOT/target/module-tests-tmp"
# Test binaries, each optionally with a name filter (`binary:filter`): the 100k-counter
# memory cases of scale_caches would take hours under valgrind, its field-TTL case not.
TESTS="${MEMCHECK_TESTS:-stats_cache scale_caches:an_expired safety_counter safety_stats safety_rank fuzz_faults}"

command -v valgrind >/dev/null || { echo "memcheck: valgrind is missing (apt-get install valgrind)"; exit 1; }
mkdir -p "$WRAP_DIR"
# The server under valgrind: each process logs to valgrind-<pid>.log in its own directory
# (the harness starts every server in a directory of its own).
cat > "$WRAP_DIR/valkey-server" <<WRAP
#!/usr/bin/env bash
if [ "\${1:-}" = "--version" ]; then exec "$VALKEY" --version; fi
exec valgrind --tool=memcheck --error-limit=no --num-callers=40 \
    --suppressions="$ROOT/scripts/memcheck.supp" --log-file=valgrind-%p.log "$VALKEY" "\$@"
WRAP
chmod +x "$WRAP_DIR/valkey-server"
find "$LOGS" -name 'valgrind-*.log' -delete 2>/dev/null

export TALLY_SERVERS="valkey=$WRAP_DIR/valkey-server"
# A copy of the module: a build during the run does not change the servers under test.
cp "$ROOT/target/release/libtally.so" "$WRAP_DIR/libtally.so"
export TALLY_MODULE="$WRAP_DIR/libtally.so"
failed_tests=()
for entry in $TESTS; do
    t="${entry%%:*}"
    filter=""
    [ "$entry" = "$t" ] || filter="${entry#*:}"
    echo "memcheck: $entry"
    # The test binary itself (built by `make memcheck`), so no cargo lock is held meanwhile.
    bin=$(find "$ROOT/target/release/deps" -maxdepth 1 -type f -executable -name "$t-*" \
        -printf '%T@ %p\n' | sort -rn | head -n 1 | cut -d' ' -f2)
    if [ -z "$bin" ]; then
        echo "memcheck: no test binary for $t (run make memcheck)"
        failed_tests+=("$t")
        continue
    fi
    if ! (cd "$ROOT/module-tests" && "$bin" --test-threads=1 $filter) > "$WRAP_DIR/$t.out" 2>&1; then
        failed_tests+=("$t")
    fi
    grep -E '^test result' "$WRAP_DIR/$t.out"
done

# An error block starts at "== <pid> == <kind>" and lists its frames; count those whose
# frames name the module.
errors=0
while IFS= read -r log; do
    n=$(awk '
        /^==[0-9]+== [A-Z][a-z]/ && !/^==[0-9]+== (Memcheck|Copyright|Using|Command|Parent|HEAP|LEAK|ERROR|For |Warning|  )/ { inblock=1; tally=0; next }
        inblock && /^==[0-9]+== *$/ { if (tally) n++; inblock=0; next }
        inblock && /libtally|tally::/ { tally=1 }
        END { print n+0 }' "$log")
    if [ "$n" -gt 0 ]; then
        echo "memcheck: $n error(s) in tally frames: $log"
        errors=$((errors + n))
    fi
done < <(find "$LOGS" -name 'valgrind-*.log')
logs=$(find "$LOGS" -name 'valgrind-*.log' | wc -l)
echo "memcheck: $logs server logs read, $errors error(s) with a tally frame"
[ ${#failed_tests[@]} -eq 0 ] || echo "memcheck: test binaries with failures under valgrind (latency bounds): ${failed_tests[*]}"
[ "$errors" -eq 0 ]
