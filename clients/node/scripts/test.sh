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

# The README's install, as written, in a project made by `npm init -y` (CommonJS): the
# tarball and its peer dependency (redis at the lockfile's version, from npm's cache), then
# the quick start saved as quickstart.mjs must parse and find both packages, and a
# CommonJS require must find the package too.
readme="$scratch/readme-install"
mkdir -p "$readme"
(
  cd "$readme"
  npm init -y >/dev/null
  redis_dep="$(printf '%s\n' $deps | grep '^redis@')"
  npm install --no-audit --no-fund --loglevel=error --prefer-offline "../$tarball" "$redis_dep"
  grep -q 'npm install /path/to/tally/clients/node/tally-redis-[0-9.]*\.tgz redis$' "$here/README.md" \
    || { echo "README: the install line is not the tarball and redis" >&2; exit 1; }
  awk '/^## Quick start/{q=1} q&&/^```js$/{c=1;next} c&&/^```$/{exit} c' "$here/README.md" > quickstart.mjs
  test -s quickstart.mjs || { echo "README: no quick start" >&2; exit 1; }
  node --check quickstart.mjs
  node --input-type=module -e 'await import("tally-redis"); await import("redis");'
  node -e 'const { Tally } = require("tally-redis"); if (typeof Tally !== "function") process.exit(1);'
  echo "node-test: the README's install and quick start work from a fresh npm init -y project"
)
# The declarations as TypeScript users see them, from ESM and from CommonJS.
npx --no-install tsc --noEmit --strict --skipLibCheck --types node --target es2022 \
  --module nodenext --moduleResolution nodenext test/types.check.ts test/types.check.cts
exec node --test --test-concurrency=1 "$@" test/*.test.mjs test/*.test.cjs
