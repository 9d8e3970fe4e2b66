"""trikafka's pytest plugin: a Kafka broker per test, with no conftest.

Installed with trikafka (entry point ``pytest11``), it gives every suite:

* ``kafka_broker`` — a fresh broker for each test on a free TCP port of 127.0.0.1, in memory,
  hosted on a background Trio thread: ``kafka_broker.bootstrap_servers`` is ``"host:port"``
  for any client (confluent-kafka, kafka-python, aiokafka, ...), and its control methods are
  plain calls — ``inject_error``, ``add_latency``, ``drop_connection``, ``hold_responses``,
  ``throttle``, ``recorded()``, ``wait_for_group_state(..., timeout=)`` and friends;
  ``kafka_broker.aio.<method>`` awaits the same from asyncio tests. Requests are recorded.
* Both serve a Schema Registry on a free port of 127.0.0.1 (Confluent's REST API, for
  confluent-kafka's serializers) when the ``registry`` extra is installed: ``kafka_broker.schema_registry_url``,
  ``cluster.schema_registry_url`` (every broker of a cluster serves the same registry:
  ``cluster.schema_registry_urls``).
* ``kafka_cluster`` — a factory, ``kafka_cluster(brokers=1, **config)``; several brokers need
  ``trikafka.cluster.open_cluster`` (see :func:`start_cluster`).
* ``trikafka_broker`` — for Trio tests (pytest-trio, from ``pip install trikafka[pytest]``):
  a broker on the in-memory transport, under the test's own clock (``autojump_clock``
  works), as ``trikafka.testing.TestBroker``. A coroutine test asking for it is run by
  pytest-trio without trio_mode or a mark.

``@pytest.mark.trikafka(config={...})`` (on a test, class or module; the closest wins key by
key) sets broker configuration for all three; ``kafka_version="3.9"`` makes the broker speak as
that Kafka release (``kafka.version``), ``racks=["a", "b", "c"]`` gives brokers their racks,
``client_telemetry=True`` turns client telemetry on (``client.telemetry.enable``) and
``kafka_defaults=True`` gives Kafka's own defaults instead of the dev defaults every fixture
starts with (``trikafka.config.dev.DEV_DEFAULTS``).
``@pytest.mark.trikafka(scenario=...)`` (a
``trikafka.testing.Scenario`` or its JSON; the closest mark that has one wins) starts that
fault scenario on the broker (each cluster) as the fixture hands it over:
``kafka_broker.scenario_status()``/``wait_for_scenario()`` follow it.

``pytest --kafka-bootstrap=HOST:PORT`` (or ``TRIKAFKA_BOOTSTRAP=HOST:PORT``) runs the same tests
against an external Kafka cluster: the three fixtures hand out a handle on it
(``trikafka.testing.external``) and a test that needs trikafka's own broker (faults, the
recorder, the MockClock, stop/start, broker config from the mark) is skipped, naming the option.

asyncio and Trio together: pytest-trio's ``trio_mode`` claims every ``async def`` test; this
plugin hands tests marked ``@pytest.mark.asyncio`` back to pytest-asyncio.

What it costs a run that uses none of it: nothing beyond this module. pytest imports every
``pytest11`` plugin before it collects anything, in every run where trikafka is installed, so
this module imports only pytest; the broker, the cluster, the client and trio load in each
fixture's body, when a test first asks for one (``tests/test_startup_imports.py`` and the
"lazy entry points" rule of ``tests/test_layers.py`` keep it so).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

# The external cluster's option, variable and skip reason (trikafka.testing.external).
from trikafka.testing.bootstrap_option import BOOTSTRAP_ENV, BOOTSTRAP_OPTION, external_reason

if TYPE_CHECKING:
    from trikafka.testing.cluster import ClusterHandle
    from trikafka.testing.thread import ThreadedBroker

__all__ = [
    "FIXTURE_DEFAULTS", "MARK_ARGUMENTS", "TRIO_MISSING", "external_bootstrap", "kafka_broker", "kafka_cluster",
    "trikafka_broker", "marked_config", "marked_kafka_defaults", "marked_scenario",
]  # fmt: skip

MARK = "trikafka"
#: What ``@pytest.mark.trikafka(...)`` takes.
MARK_ARGUMENTS = ("config", "kafka_version", "racks", "scenario", "kafka_defaults", "client_telemetry")
#: What the TCP fixtures serve beside Kafka: the Schema Registry, on a free port
#: (``kafka_broker.schema_registry_url``), when the registry extra is installed;
#: ``schema.registry.port: -1`` in a mark turns it off.
FIXTURE_DEFAULTS = {"schema.registry.port": 0}


def _fixture_defaults() -> dict[str, Any]:
    """:data:`FIXTURE_DEFAULTS`, less the Schema Registry where its extra is not installed (a
    broker refuses ``schema.registry.port`` then, and these are defaults, not the user's ask)."""
    from trikafka.registry.extra import missing_registry_modules

    return dict(FIXTURE_DEFAULTS) if not missing_registry_modules() else {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("trikafka").addoption(
        BOOTSTRAP_OPTION,
        dest="kafka_bootstrap",
        default=None,
        metavar="HOST:PORT[,...]",
        help=f"run the kafka_broker, kafka_cluster and trikafka_broker fixtures against this external Kafka "
        f"cluster instead of trikafka's brokers (default: ${BOOTSTRAP_ENV}); tests that need trikafka's own "
        "broker (faults, the recorder, the MockClock, stop/start) are skipped",
    )


def external_bootstrap(config: pytest.Config) -> str | None:
    """The external cluster's bootstrap servers (``--kafka-bootstrap``, else
    ``$TRIKAFKA_BOOTSTRAP``), or None: trikafka's own brokers."""
    import os
    import re

    bootstrap = config.getoption("kafka_bootstrap", None) or os.environ.get(BOOTSTRAP_ENV) or None
    if bootstrap is not None and not all(re.fullmatch(r"\S+:\d{1,5}", a.strip()) for a in bootstrap.split(",")):
        where = BOOTSTRAP_OPTION if config.getoption("kafka_bootstrap", None) else f"${BOOTSTRAP_ENV}"
        raise pytest.UsageError(f"{where}={bootstrap!r}: give HOST:PORT, or several comma-separated")
    return bootstrap


def pytest_report_header(config: pytest.Config) -> str | None:
    bootstrap = external_bootstrap(config)
    return None if bootstrap is None else f"trikafka: broker fixtures on the external cluster {bootstrap}"


#: Fixtures that put a test in virtual time: an external cluster answers in real time.
_MOCK_CLOCKS = ("autojump_clock", "mock_clock")


def _external(item: Any) -> str | None:
    """The external cluster for this test, or None; skips a test whose ``trikafka`` mark
    asks for what only trikafka's broker can be given (config, a release, racks, a scenario),
    or that runs in virtual time."""
    bootstrap = external_bootstrap(item.config)
    if bootstrap is None:
        return None
    marks = list(item.iter_markers(MARK))
    marked = sorted(
        {key for mark in marks for key, value in mark.kwargs.items() if value is not None}
        | ({"config"} if any(mark.args for mark in marks) else set())
    )
    if marked:
        pytest.skip(external_reason(f"@pytest.mark.{MARK}({', '.join(f'{k}=' for k in marked)})", bootstrap))
    clocks = [name for name in _MOCK_CLOCKS if name in getattr(item, "fixturenames", ())]
    if clocks:
        pytest.skip(external_reason(f"virtual time (the MockClock of {clocks[0]})", bootstrap))
    return bootstrap


def pytest_configure(config: pytest.Config) -> None:
    external_bootstrap(config)  # a malformed address: a usage error before anything runs
    config.addinivalue_line(
        "markers",
        f"{MARK}(config=None, kafka_version=None, racks=None, scenario=None, kafka_defaults=False, "
        "client_telemetry=None): broker configuration (Kafka keys), the Kafka release to speak as "
        "(kafka.version), rack ids (broker.rack), a fault scenario (trikafka.testing.Scenario or its JSON), "
        "Kafka's own defaults instead of the dev defaults, and client telemetry (client.telemetry.enable) "
        "for the kafka_broker, kafka_cluster and trikafka_broker fixtures",
    )


#: What a Trio test needs beside trikafka, and how to get it.
TRIO_MISSING = (
    "the trikafka_broker fixture runs under pytest-trio, which is not installed (or was "
    "disabled with -p no:trio): pip install 'trikafka[pytest]' (or pytest-trio)"
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """pytest-trio's trio_mode marks every coroutine test as a Trio test; one marked for
    asyncio belongs to pytest-asyncio, so the Trio mark comes off again. A coroutine test
    that asks for ``trikafka_broker`` is a Trio test without trio_mode or a mark."""
    for item in items:
        if item.get_closest_marker("asyncio") is not None and item.get_closest_marker("trio"):
            item.own_markers[:] = [m for m in item.own_markers if m.name != "trio"]
        elif (
            "trikafka_broker" in getattr(item, "fixturenames", ())
            and item.get_closest_marker("trio") is None
            and config.pluginmanager.has_plugin("trio")
            and _is_coroutine_test(item)
        ):
            item.add_marker(pytest.mark.trio)


def _is_coroutine_test(item: pytest.Item) -> bool:
    import inspect

    return inspect.iscoroutinefunction(getattr(item, "obj", None))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A clear error, not pytest's "async fixture" one, when pytest-trio is missing."""
    if "trikafka_broker" in getattr(item, "fixturenames", ()) and not item.config.pluginmanager.has_plugin("trio"):
        pytest.fail(TRIO_MISSING, pytrace=False)
    if {"trikafka_broker", "kafka_broker", "kafka_cluster"} & set(getattr(item, "fixturenames", ())):
        _external(item)  # skips here, where the reason survives (pytest-trio drops a Trio fixture's)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A skip by an external cluster's handle (trikafka.testing.external) is reported at the
    test's line that asked for what the cluster cannot do, with its reason — which pytest-trio
    drops when the skip was raised inside a Trio test's nursery (a bare "Skipped")."""
    report = yield
    import sys

    external = sys.modules.get("trikafka.testing.external")
    longrepr = report.longrepr
    if external is None or not report.skipped or not isinstance(longrepr, tuple):
        return report
    reason = longrepr[2]
    if reason == "Skipped" and item.nodeid in external.last_reason:
        reason = f"Skipped: {external.last_reason[item.nodeid]}"
    if BOOTSTRAP_OPTION not in reason:
        return report
    path, lineno = item.location[0], (item.location[1] or 0) + 1  # the test, not the plugin's line
    if call.excinfo is not None:  # the test's own line that asked, when the traceback has it
        for entry in call.excinfo.traceback:
            if entry.path == getattr(item, "path", None):
                path, lineno = item.location[0], entry.lineno + 1
    report.longrepr = (path, lineno, reason)
    return report


def marked_config(node: Any) -> dict[str, Any]:
    """The ``trikafka`` marks' config for a test: module, then class, then function;
    ``kafka_version=`` becomes ``kafka.version``, ``racks=`` (a list or ``"a,b,c"``)
    ``broker.rack`` and ``client_telemetry=`` ``client.telemetry.enable``."""
    merged: dict[str, Any] = {}
    for mark in reversed(list(node.iter_markers(MARK))):
        config = mark.kwargs.get("config", mark.args[0] if mark.args else None)
        if config is not None and not isinstance(config, dict):
            raise pytest.UsageError(
                f"@pytest.mark.{MARK}(config=...) takes a dict of Kafka keys, not {config!r}"
            )
        merged.update(config or {})
        for name, key in (("kafka_version", "kafka.version"), ("racks", "broker.rack")):
            value = mark.kwargs.get(name)
            if value is not None:  # racks: "a,b,c" or a list, one per broker
                merged[key] = value if isinstance(value, str) else ",".join(map(str, value))
        if mark.kwargs.get("client_telemetry") is not None:
            merged["client.telemetry.enable"] = bool(mark.kwargs["client_telemetry"])
        unknown = set(mark.kwargs) - set(MARK_ARGUMENTS)
        if unknown:
            raise pytest.UsageError(
                f"@pytest.mark.{MARK} takes {', '.join(a + '=' for a in MARK_ARGUMENTS)} "
                f"not {', '.join(sorted(unknown))}"
            )
    return merged


def marked_kafka_defaults(node: Any) -> bool:
    """The closest ``trikafka`` mark's ``kafka_defaults`` (Kafka's own defaults instead of the
    dev defaults); False without one."""
    for mark in node.iter_markers(MARK):
        if mark.kwargs.get("kafka_defaults") is not None:
            return bool(mark.kwargs["kafka_defaults"])
    return False


def marked_scenario(node: Any) -> Any:
    """The closest ``trikafka`` mark's ``scenario`` (a Scenario), or None."""
    for mark in node.iter_markers(MARK):
        if mark.kwargs.get("scenario") is not None:
            from trikafka.testing.scenario import Scenario, ScenarioError

            try:
                return Scenario.coerce(mark.kwargs["scenario"])
            except ScenarioError as exc:
                raise pytest.UsageError(f"@pytest.mark.{MARK}(scenario=...): {exc}") from None
    return None


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[ThreadedBroker]:
    """A fresh broker for this test on 127.0.0.1 (see the module docstring)."""
    if (bootstrap := _external(request.node)) is not None:
        from trikafka.testing.external import ExternalBroker

        yield ExternalBroker(bootstrap)  # type: ignore[misc]  # the same shape, on the external cluster
        return
    from trikafka.testing.thread import ThreadedBroker

    broker = ThreadedBroker(
        {**_fixture_defaults(), **marked_config(request.node)}, record=True,
        kafka_defaults=marked_kafka_defaults(request.node),
    )
    broker.start()
    try:
        if (scenario := marked_scenario(request.node)) is not None:
            broker.apply_scenario(scenario)
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A factory: ``kafka_cluster(brokers=N, **config)`` starts a cluster for this test."""
    if (bootstrap := _external(request.node)) is not None:
        yield _external_cluster(bootstrap)
        return
    from trikafka.testing.cluster import start_cluster

    started: list[ClusterHandle] = []
    base = {**_fixture_defaults(), **marked_config(request.node)}
    scenario = marked_scenario(request.node)
    kafka_defaults = marked_kafka_defaults(request.node)

    def start(brokers: int = 1, **config: Any) -> ClusterHandle:
        cluster = start_cluster(brokers, {**base, **config}, kafka_defaults=kafka_defaults)
        started.append(cluster)
        if scenario is not None:
            cluster.apply_scenario(scenario)
        return cluster

    try:
        yield start
    finally:
        for cluster in reversed(started):
            cluster.stop()


def _external_cluster(bootstrap: str) -> Any:
    """``kafka_cluster`` on the external cluster: one handle for the cluster as it is."""
    from trikafka.testing.external import ExternalBroker, not_available

    def start(brokers: int = 1, **config: Any) -> Any:
        if brokers != 1 or config:
            shown = ", ".join([f"brokers={brokers}", *(f"{k}={v!r}" for k, v in config.items())])
            not_available(f"kafka_cluster({shown})", bootstrap)
        return ExternalBroker(bootstrap)

    return start


async def _trikafka_broker(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    if (bootstrap := _external(request.node)) is not None:
        from trikafka.testing.external import ExternalControls

        yield ExternalControls(bootstrap)
        return
    from trikafka.testing.broker import open_test_broker
    from trikafka.testing.thread import TEST_DEFAULTS

    config = {**TEST_DEFAULTS, "listeners": "PLAINTEXT://memory:9092", **marked_config(request.node)}
    async with open_test_broker(kafka_defaults=marked_kafka_defaults(request.node), **config) as broker:
        broker.faults.recorder.start()
        if (scenario := marked_scenario(request.node)) is not None:
            broker.apply_scenario(scenario)
        yield broker


# pytest-trio runs a fixture marked so under the test's Trio run even without trio_mode.
_trikafka_broker._force_trio_fixture = True  # type: ignore[attr-defined]  # read by pytest-trio
trikafka_broker = pytest.fixture(_trikafka_broker, name="trikafka_broker")
