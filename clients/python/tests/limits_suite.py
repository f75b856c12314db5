"""pytest plugin: limits' own test suite on `tally://` and `async+tally://`.

scripts/limits-suite.sh runs limits' tests (from its sdist, never copied here) with
`-p limits_suite --noconftest`. limits parametrizes its storage tests over
`(uri, args, [expected_instance,] fixture)` cases, one of them its plain Redis case
(`redis://localhost:7379` with the fixture `redis_basic`, a docker service). This
plugin adds a tally twin beside every such case: the URI's scheme becomes `tally`
(`async+tally`) on a server with the module that the plugin starts, `RedisStorage` the
tally storage, and `redis_basic` the fixture `tally_redis` (the same server, flushed
before each test, as limits' fixture flushes its own). Only the tally cases run:
limits' docker fixtures are not there to stand in for.

`TALLY_SERVER` (`name=path`) is the server binary, `TALLY_MODULE` the module.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest
import redis
from pytest_lazy_fixtures import lf

import tally
from conftest import Server, free_port

PORT = free_port()
URI = f"tally://127.0.0.1:{PORT}"

LEFT_OUT = {
    "test_custom_prefix":
        "reads limits' own key name with GET: tally's key for a limit is "
        "`<prefix>:{<key>}` (a hash tag, so that a limit's keys share a cluster slot)",
    "test_sliding_window_counter_previous_window":
        "checks limits' estimate of the sliding window from two fixed windows; tally "
        "counts the sliding window exactly (the previous window's hits leave one by one)",
}
"""limits' tests that cannot apply to tally, by name, with the reason."""


def _tally_twin(case: Any) -> Any:
    """The tally case beside limits' plain Redis case `case`, or `None` for another."""
    values = list(getattr(case, "values", ()))
    if not any(getattr(v, "name", None) == "redis_basic" for v in values):
        return None
    uri = values[0]
    asynchronous = uri.startswith("async+")
    for i, value in enumerate(values):
        if getattr(value, "name", None) == "redis_basic":
            values[i] = lf("tally_redis")
        elif i == 0:
            values[i] = ("async+" if asynchronous else "") + URI
        elif isinstance(value, dict):
            # limits' choice of asyncio Redis client (coredis): tally's is redis.asyncio.
            values[i] = {k: v for k, v in value.items() if k != "implementation"}
        elif isinstance(value, type):
            values[i] = tally.AsyncTallyStorage if asynchronous else tally.TallyStorage
    return pytest.param(*values, marks=pytest.mark.tally, id="tally")


def _add_twins(cases: list) -> None:
    if any(getattr(case, "id", None) == "tally" for case in cases):
        return
    twins = [twin for twin in map(_tally_twin, cases) if twin is not None]
    cases.extend(twins)


def pytest_configure(config: pytest.Config) -> None:
    # limits' shared storage lists: some parametrize marks hold them as dict views,
    # so the twin goes into the dicts before the test modules are collected.
    from tests import utils

    for cases in (utils.ALL_STORAGES, utils.ALL_STORAGES_ASYNC):
        twin = _tally_twin(cases["redis"])
        cases["tally"] = twin


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Adds the twin to the case lists written out in a test module's marks."""
    for marker in metafunc.definition.iter_markers(name="parametrize"):
        if len(marker.args) > 1 and isinstance(marker.args[1], list):
            _add_twins(marker.args[1])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keeps the tally cases, less the tests of `LEFT_OUT`."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        name = getattr(item, "originalname", item.name)
        if callspec is not None and "tally" in callspec.id.split("-") and name not in LEFT_OUT:
            kept.append(item)
        else:
            dropped.append(item)
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"tally storage at {URI} ({os.environ.get('TALLY_SERVER')}); left out: "
            + "; ".join(f"{name} ({why})" for name, why in LEFT_OUT.items())]


@pytest.fixture(scope="session")
def tally_server() -> Iterator[Server]:
    name, _, binary = (os.environ.get("TALLY_SERVER") or "redis=/usr/bin/redis-server").partition("=")
    server = Server(name, binary, port=PORT)
    yield server
    alive = server.proc.poll() is None
    log = server.read_log()
    server.stop()
    assert alive, f"{name} died during limits' suite:\n{log}"


@pytest.fixture
def tally_redis(tally_server: Server) -> Iterator[redis.Redis]:
    """limits' `redis_basic` on the tally server: a client, the server flushed."""
    client = tally_server.client()
    client.flushall()
    yield client
    client.close()
