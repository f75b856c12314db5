#!/usr/bin/env bash
# make limits-suite: limits' own test suite (the strategy and storage tests, sync and
# asyncio) run on tally:// and async+tally:// beside limits' in-memory storage, one
# server at a time, by the pytest plugin clients/python/tests/limits_suite.py.
#
# Nothing of limits is kept in the repository: its sdist is fetched from PyPI at the
# version below, checked against its SHA-256, unpacked under .tools/, and installed
# from that very file, so the tests and the package they test are the same release.
#
# Usage: scripts/limits-suite.sh SERVERS MODULE
#   SERVERS  name=path,name=path (TALLY_SERVERS): the suite runs once on each
#   MODULE   the libtally.so to load
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=5.8.0
SHA256=c9e0d74aed837e8f6f50d1fcebcf5fd8130957287206bc3799adaee5092655da
# limits' test plugins, pinned to the versions of limits' own lockfile at this release.
PLUGINS=(pytest-asyncio==1.3.0 pytest-lazy-fixtures==1.4.0)

SERVERS=${1:?servers}
MODULE=${2:?module}
ROOT=$PWD
# A venv of its own: limits' test plugins stay out of the package's own test run.
VENV=.tools/limits-suite-venv
PYTHON=$VENV/bin/python
test -x "$PYTHON" || python3 -m venv "$VENV"
DIR=.tools/limits-$VERSION
SDIST=.tools/limits-$VERSION.tar.gz

if [ ! -f "$DIR/.verified" ]; then
    rm -rf "$DIR" "$SDIST"
    mkdir -p .tools
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary :all: --dest .tools "limits==$VERSION"
    echo "$SHA256  $SDIST" | sha256sum --check --quiet
    tar -xzf "$SDIST" -C .tools
    touch "$DIR/.verified"
fi

if ! "$PYTHON" -c "import importlib.metadata as m, sys; \
sys.exit(m.version('limits') != '$VERSION')" 2>/dev/null; then
    "$PYTHON" -m pip install --quiet --disable-pip-version-check "$SDIST"
fi
# pytest, limits' test plugins, and the package as it is now (reinstalled every run).
"$PYTHON" -m pip install --quiet --disable-pip-version-check ./clients/python pytest "${PLUGINS[@]}"
"$PYTHON" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps ./clients/python

status=0
IFS=, read -r -a kinds <<<"$SERVERS"
for kind in "${kinds[@]}"; do
    name=${kind%%=*}
    echo "== limits $VERSION's suite on tally:// ($name)"
    # limits' conftest.py (docker services, memcached, MongoDB clients) and its pytest.ini
    # (coverage, -K) are left out: the plugin stands in for the fixtures the tests use.
    (cd "$DIR" && PYTHONPATH="$ROOT/clients/python/tests" \
        TALLY_SERVER="$kind" TALLY_MODULE="$MODULE" \
        "$ROOT/$PYTHON" -m pytest -q -p no:cacheprovider -p limits_suite --noconftest \
        -c "$ROOT/clients/python/tests/limits_suite.ini" --rootdir . \
        tests/test_strategy.py tests/test_storage.py \
        tests/aio/test_strategy.py tests/aio/test_storage.py \
        tests/storage/test_redis.py tests/aio/storage/test_redis.py) || status=1
done
exit $status
