# TSTHROTTLE part of `make bench`, sourced by scripts/bench.sh (uses its helpers: cli,
# native, tally, report, memory_line, prefill, ...).
#
# The baseline is redis-cell's CL.THROTTLE, loaded into the same server as a benchmark aid
# only: redis-cell 0.2.2 from crates.io, fetched with cargo into cargo's registry and built
# here, under target/bench/ (nothing of it enters the project). tally's own CL.THROTTLE
# (`throttle-cell-compat yes`) cannot be loaded next to it, so the rows compare
# TSTHROTTLE.ALLOW with redis-cell's command on the same rate.

CELL_VERSION=0.2.2
CELL_DIR="$ROOT/target/bench/redis-cell-$CELL_VERSION"
CELL_SO="$CELL_DIR/target/release/libredis_cell.so"
CELL_ERROR=

# build_redis_cell: sets CELL_SO's file, or CELL_ERROR saying why not.
build_redis_cell() {
    [ -f "$CELL_SO" ] && return 0
    local fetch="$ROOT/target/bench/cell-fetch" src
    mkdir -p "$fetch/src"
    printf '[package]\nname = "cell-fetch"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nredis-cell = "=%s"\n\n[workspace]\n' \
        "$CELL_VERSION" >"$fetch/Cargo.toml"
    : >"$fetch/src/lib.rs"
    if ! "${CARGO:-cargo}" fetch --manifest-path "$fetch/Cargo.toml" >/dev/null 2>&1; then
        CELL_ERROR="cargo fetch of redis-cell $CELL_VERSION failed"
        return 0
    fi
    src=$("${CARGO:-cargo}" metadata --format-version 1 --manifest-path "$fetch/Cargo.toml" 2>/dev/null |
        python3 -c 'import json, sys
print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "redis-cell"))' 2>/dev/null) || src=""
    if [ -z "$src" ]; then
        CELL_ERROR="redis-cell $CELL_VERSION not found in cargo metadata"
        return 0
    fi
    rm -rf "$CELL_DIR"
    cp -r "$(dirname "$src")" "$CELL_DIR"
    # Its own workspace (it lies under tally's), built as it is.
    printf '\n[workspace]\n' >>"$CELL_DIR/Cargo.toml"
    if ! "${CARGO:-cargo}" build --release --manifest-path "$CELL_DIR/Cargo.toml" >"$CELL_DIR/build.log" 2>&1 ||
        [ ! -f "$CELL_SO" ]; then
        CELL_ERROR="building redis-cell $CELL_VERSION failed (see $CELL_DIR/build.log)"
    fi
}

throttle_fixtures() {
    # None: a subject's key lives until it is back to a full burst (2 to 32 s at this
    # rate), so the rows' own calls create and refresh the keys, on both sides alike.
    :
}

throttle_rows() {
    section "TSTHROTTLE (30 per minute, bursts of 15; baseline: redis-cell $CELL_VERSION's CL.THROTTLE in the same server)"
    if [ -n "$CELL_ERROR" ]; then
        printf '%-50s n/a: %s\n' "TSTHROTTLE.ALLOW / CL.THROTTLE" "$CELL_ERROR"
        return 0
    fi
    # Hot: almost every call is refused (the burst is spent at once): a read of the key.
    native cl.throttle -- CL.THROTTLE cell:hot 15 30 60
    tally tsthrottle.allow -- TSTHROTTLE.ALLOW thr:hot 15 30 60s
    report "TSTHROTTLE.ALLOW hot key / CL.THROTTLE" "<=1" ""
    # 100k subjects: most calls are allowed and write.
    native cl.throttle -r 100000 -- CL.THROTTLE "cell:__rand_int__" 15 30 60
    tally tsthrottle.allow -r 100000 -- TSTHROTTLE.ALLOW "thr:__rand_int__" 15 30 60s
    report "TSTHROTTLE.ALLOW 100k keys / CL.THROTTLE" "<=1" ""
}

# used_bytes_per_key PREFIX COMMAND...: used_memory grown by COMMAND over 100k fresh keys
# PREFIX<i> (a key of each, written once), per key: the key, its value, its expiry and the
# server's tables for them.
used_bytes_per_key() {
    local before after
    before=$(cli info memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }')
    prefill "$@"
    after=$(cli info memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }')
    echo $(((after - before) / RANDOM_KEYS))
}

throttle_memory() {
    if [ -n "$CELL_ERROR" ]; then
        printf '%-66s n/a: %s\n' "throttle key" "$CELL_ERROR"
        return 0
    fi
    # One request at 1 per hour: keys that live an hour, for the time of the measurement.
    cli TSTHROTTLE.ALLOW thr:mem 15 1 1h >/dev/null
    cli CL.THROTTLE cell:mem 15 1 3600 >/dev/null
    memory_line "TSTHROTTLE key (thr:mem)" "$(cli memory usage thr:mem samples 0)" 100
    memory_line "redis-cell key (cell:mem)" "$(cli memory usage cell:mem samples 0)"
    memory_line "TSTHROTTLE, used_memory per new key over 100k" \
        "$(used_bytes_per_key TSTHROTTLE.ALLOW "mt:__rand_int__" 15 1 1h)"
    memory_line "redis-cell, used_memory per new key over 100k" \
        "$(used_bytes_per_key CL.THROTTLE "mc:__rand_int__" 15 1 3600)"
}
