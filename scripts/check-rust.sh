#!/usr/bin/env bash
# Stops the build at once, saying what to do, when Rust is missing or older than the
# version Cargo.toml requires (its rust-version): cargo's own message comes only after a
# long dependency download, and names no fix. RUSTC picks the compiler (default: rustc).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
rustc_bin="${RUSTC:-rustc}"
need="$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' Cargo.toml | head -n 1)"
fix="install it with rustup (https://rustup.rs), or update it with: rustup update stable"

if ! version_line="$("$rustc_bin" --version 2>/dev/null)"; then
    echo "tally needs Rust $need or later, and '$rustc_bin' was not found: $fix" >&2
    exit 1
fi
have="$(printf '%s\n' "$version_line" | sed -n 's/^rustc \([0-9][0-9.]*\).*/\1/p')"
if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
    echo "tally needs Rust $need or later, and '$rustc_bin' is ${have:-unknown} ($version_line): $fix" >&2
    exit 1
fi
