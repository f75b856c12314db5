#!/usr/bin/env bash
# make node-test: builds and packs tally-redis as `npm pack` does for the registry, installs
# the tarball into a scratch project (with the exact versions of redis, ioredis, express,
# express-rate-limit and rate-limiter-flexible this package's lockfile pins) as a user
# would, type-checks test/types.check.{ts,cts} against its declarations, and runs test/ from
# there with Node's test runner against TALLY_SERVERS.
# Usage: scripts/test.sh [scratch-dir] [node --test args...]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
scratch="${1:-$here/../../.tools/node-test}"
shift || true
cd "$here"
npm ci --no-audit --no-fund --loglevel=error
rm -rf "$scratch" && mkdir -p "$scratch"
tarball="$(npm pack --silent --pack-destination "$scratch" | tail -1)"
# Exact versions from the lockfile (what npm ci just installed).
deps="$(node -e '
  const lock = require("./package-lock.json").packages;
  for (const name of ["redis", "ioredis", "express", "express-rate-limit", "rate-limiter-flexible", "typescript", "@types/node"])
    console.log(`${name}@${lock["node_modules/" + name].version}`);')"
cd "$scratch"
printf '{ "name": "tally-redis-scratch", "private": true, "type": "module" }\n' > package.json
# shellcheck disable=SC2086
npm install --no-audit --no-fund --loglevel=error --prefer-offline "./$tarball" $deps
cp -r "$here/test" ./test
# The declarations as TypeScript users see them, from ESM and from CommonJS.
npx --no-install tsc --noEmit --strict --skipLibCheck --types node --target es2022 \
  --module nodenext --moduleResolution nodenext test/types.check.ts test/types.check.cts
exec node --test --test-concurrency=1 "$@" test/*.test.mjs test/*.test.cjs
