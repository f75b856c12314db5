#!/usr/bin/env bash
# Packs a release archive: dist/tally-<version>-linux-<arch>.tar.gz holding one directory
# tally-<version>-linux-<arch>/ with libtally.so, LICENSE, README.md, commands.json and
# docs/ (when the repository has it). <version> is Cargo.toml's.
#
#   scripts/dist.sh [module.so [output-dir]]
#
# Defaults: target/release/libtally.so and dist/. Prints the archive's path. `make dist`
# builds the module first; the dist module test calls this script on the module it tests.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
module="${1:-target/release/libtally.so}"
out="${2:-dist}"

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
[ -n "$version" ] || { echo "dist: no version in Cargo.toml" >&2; exit 1; }
[ -f "$module" ] || { echo "dist: $module not found (make build)" >&2; exit 1; }

name="tally-${version}-linux-$(uname -m)"
mkdir -p "$out"
stage="$(mktemp -d "${out}/.stage.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

mkdir "$stage/$name"
cp "$module" "$stage/$name/libtally.so"
# The release build keeps debug info for profiling; the archive ships symbols only.
if command -v strip >/dev/null; then
    strip --strip-debug "$stage/$name/libtally.so"
fi
cp LICENSE README.md commands.json "$stage/$name/"
if [ -d docs ]; then
    cp -R docs "$stage/$name/docs"
fi

archive="${out}/${name}.tar.gz"
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner -czf "$archive.tmp" "$name"
mv "$archive.tmp" "$archive"
echo "$archive"
