"""A handle on an external Kafka cluster: the same tests against a real cluster.

``pytest --kafka-bootstrap=HOST:PORT`` (or the environment variable ``TRIKAFKA_BOOTSTRAP``)
makes the plugin's broker fixtures hand out one of these instead of starting a broker: a suite
runs against trikafka in every commit and against the real thing at night, unchanged.

What an external cluster can answer over the Kafka protocol works, through the Trio client
and the admin API: ``bootstrap_servers``, ``create_topic``/``produce``/``read``
(:mod:`trikafka.testing.topics`, the same code as on trikafka's own handles), and the waits
for a group's state (DescribeGroups / ConsumerGroupDescribe), a committed offset
(OffsetFetch), a high watermark and a last stable offset (ListOffsets). Kafka pushes none of
these, so the waits ask every :data:`POLL_INTERVAL` seconds until ``timeout`` (trio's clock)
and then raise ``TimeoutError`` saying what they saw, as trikafka's own waits do.

What needs trikafka's broker — faults, the recorder, scenarios, transaction, share-group and
client-metrics state, the MockClock, stopping and starting brokers, broker config from the
``trikafka`` mark — skips the test (``pytest.skip``) with a reason naming ``--kafka-bootstrap``,
so the nightly run reports what it did not cover instead of failing on it.

:class:`ExternalControls` is the Trio shape (``trikafka_broker``: waits and helpers are
coroutines); :class:`ExternalBroker` the thread shape (``kafka_broker``, ``kafka_cluster(...)``:
plain calls, each one ``trio.run`` of the Trio shape) with ``.aio`` for asyncio tests.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, NoReturn

import trio

from trikafka.client import KafkaError, OffsetSpec, TopicPartition, connect_tcp, open_admin
from trikafka.server.awaitable import GROUP_STATES, GroupSnapshot
from trikafka.testing import topics
from trikafka.testing.bootstrap_option import BOOTSTRAP_ENV as ENV
from trikafka.testing.bootstrap_option import BOOTSTRAP_OPTION as OPTION
from trikafka.testing.bootstrap_option import external_reason
from trikafka.testing.surface import (
    CONTROL_METHODS,
    WAIT_METHODS,
    WAIT_TIMEOUT,
    BrokerControls,
    asyncio_hosted,
    refuse_in_event_loop,
)

__all__ = ["ENV", "OPTION", "ExternalBroker", "ExternalControls", "not_available"]

#: How often a wait asks the cluster again (Kafka has no way to push a group's state).
POLL_INTERVAL = 0.1

#: The waits the admin API answers; every other wait skips.
EXTERNAL_WAITS = (
    "wait_for_high_watermark",
    "wait_for_last_stable_offset",
    "wait_for_group_state",
    "wait_for_committed",
)
#: Plain readers the admin API answers (on the thread-hosted handle: a Trio handle cannot
#: make a network call in a plain one, so there they skip, naming the wait to await).
EXTERNAL_READERS = ("high_watermark", "committed")
#: What the thread-hosted handles have beside the controls, and that only trikafka's broker can do.
BROKER_ONLY = (
    "thread", "broker", "faults", "rack", "node_id", "brokers", "schema_registry_url", "schema_registry_urls",
    "start", "stop", "stop_broker", "start_broker", "move_leader", "move_coordinator", "shrink_isr", "expand_isr",
    "leader", "listener", "group_snapshot", "partition_log",
)  # fmt: skip


#: The reason of the latest skip of each test (by node id), for the plugin's report: a skip
#: raised inside a Trio test's nursery reaches pytest without it (pytest-trio).
last_reason: dict[str, str] = {}


def not_available(what: str, bootstrap: str) -> NoReturn:
    """Skip the running test: ``what`` needs trikafka's own broker."""
    import os

    import pytest

    reason = external_reason(what, bootstrap)
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rpartition(" (")[0]
    if test:
        last_reason[test] = reason
    pytest.skip(reason)


def _shown(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    return ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items() if v is not None)])


def _client_config(timeout: float) -> dict[str, Any]:
    bound = int(timeout * 1000) + 5_000  # the wait's own bound fires first
    return {"client.id": "trikafka-testing", "default.api.timeout.ms": bound, "request.timeout.ms": bound}


class ExternalControls:
    """An external cluster, for Trio code (the ``trikafka_broker`` fixture under
    ``--kafka-bootstrap``): the helpers and the protocol-answerable waits are coroutines."""

    __test__ = False

    def __init__(self, bootstrap_servers: str) -> None:
        self._bootstrap = bootstrap_servers

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap

    def __repr__(self) -> str:
        return f"<external Kafka cluster {self._bootstrap}>"

    # --- the helpers (trikafka.testing.topics; the same code as on trikafka's handles) ------

    @asynccontextmanager
    async def client(self, client_id: str | None = "trikafka-test") -> AsyncIterator[Any]:
        """A raw connection (kio requests in, responses out) to the first bootstrap address."""
        host, _, port = self._bootstrap.split(",")[0].strip().rpartition(":")
        async with connect_tcp(host.strip("[]"), int(port), client_id) as connection:
            yield connection

    # --- reads over the admin API -----------------------------------------------------------

    async def _offset(self, admin: Any, topic: str, partition: int, committed: bool) -> int:
        tp = TopicPartition(topic, partition)
        found = await admin.list_offsets({tp: OffsetSpec.LATEST}, read_committed=committed)
        result: int = found[tp].offset
        return result

    async def fetch_high_watermark(self, topic: str, partition: int, *, timeout: float = WAIT_TIMEOUT) -> int | None:  # noqa: ASYNC109
        with trio.fail_after(timeout):
            async with open_admin(self._bootstrap, **_client_config(timeout)) as admin:
                try:
                    return await self._offset(admin, topic, partition, False)
                except KafkaError:
                    return None

    async def fetch_committed(
        self,
        group_id: str,
        topic: str,
        partition: int,
        *,
        timeout: float = WAIT_TIMEOUT,  # noqa: ASYNC109
    ) -> int | None:
        with trio.fail_after(timeout):
            async with open_admin(self._bootstrap, **_client_config(timeout)) as admin:
                return (await admin.list_group_offsets(group_id)).get(TopicPartition(topic, partition))

    async def _poll(
        self,
        method: str,
        shown: str,
        timeout: float,  # noqa: ASYNC109 - the waits' own bound, as in surface.py
        look: Callable[[Any], Any],
        ready: Callable[[Any], bool],
        describe: Callable[[Any], str],
        seen: str,
    ) -> Any:
        """Ask ``look(admin)`` every POLL_INTERVAL until ``ready``; a TimeoutError with the
        last ``describe``d answer (or the last error) when ``timeout`` passes first."""
        with trio.move_on_after(timeout):
            async with open_admin(self._bootstrap, **_client_config(timeout)) as admin:
                while True:
                    try:
                        value = await look(admin)
                    except KafkaError as exc:
                        seen = f"the cluster answered {exc}"
                    else:
                        if ready(value):
                            return value
                        seen = describe(value)
                    await trio.sleep(POLL_INTERVAL)
        raise TimeoutError(f"{method}({shown}) not reached within {timeout:g} s; {seen}")

    async def wait_for_high_watermark(
        self,
        topic: str,
        partition: int,
        *,
        at_least: int,
        timeout: float = WAIT_TIMEOUT,  # noqa: ASYNC109
    ) -> int:
        result: int = await self._poll(
            "wait_for_high_watermark",
            _shown((topic, partition), {"at_least": at_least}),
            timeout,
            lambda admin: self._offset(admin, topic, partition, False),
            lambda hw: hw >= at_least,
            lambda hw: f"high watermark is {hw}",
            "no such partition",
        )
        return result

    async def wait_for_last_stable_offset(
        self,
        topic: str,
        partition: int,
        *,
        at_least: int,
        timeout: float = WAIT_TIMEOUT,  # noqa: ASYNC109
    ) -> int:
        result: int = await self._poll(
            "wait_for_last_stable_offset",
            _shown((topic, partition), {"at_least": at_least}),
            timeout,
            lambda admin: self._offset(admin, topic, partition, True),
            lambda lso: lso >= at_least,
            lambda lso: f"last stable offset is {lso}",
            "no such partition",
        )
        return result

    async def wait_for_group_state(
        self,
        group_id: str,
        state: str,
        *,
        members: int | None = None,
        timeout: float = WAIT_TIMEOUT,  # noqa: ASYNC109
    ) -> GroupSnapshot:
        if state not in GROUP_STATES:
            raise ValueError(f"group state {state!r} is not one of Kafka's: {', '.join(GROUP_STATES)}")

        async def look(admin: Any) -> GroupSnapshot:
            group = (await admin.describe_consumer_groups([group_id]))[group_id]
            ids = tuple(m.member_id for m in group.members)
            return GroupSnapshot(group_id, group.state, -1, ids, None, group.protocol or None)

        def describe(group: GroupSnapshot) -> str:
            if group.state == "Dead" and not group.members:
                return "the group does not exist"
            return f"the group is {group.state} with {len(group.members)} member(s)"

        result: GroupSnapshot = await self._poll(
            "wait_for_group_state",
            _shown((group_id, state), {"members": members}),
            timeout,
            look,
            lambda g: g.state == state and (members is None or len(g.members) == members),
            describe,
            "no answer from the group's coordinator",
        )
        return result

    async def wait_for_committed(
        self,
        group_id: str,
        topic: str,
        partition: int,
        *,
        at_least: int,
        timeout: float = WAIT_TIMEOUT,  # noqa: ASYNC109
    ) -> int:
        tp = TopicPartition(topic, partition)

        async def look(admin: Any) -> int | None:
            result: int | None = (await admin.list_group_offsets(group_id)).get(tp)
            return result

        result: int = await self._poll(
            "wait_for_committed",
            _shown((group_id, topic, partition), {"at_least": at_least}),
            timeout,
            look,
            lambda offset: offset is not None and offset >= at_least,
            lambda offset: f"committed offset is {offset}",
            "no answer from the group's coordinator",
        )
        return result


def _helper(name: str) -> Any:
    """The helper ``name`` of :mod:`trikafka.testing.topics`, on this cluster."""

    @functools.wraps(getattr(BrokerControls, name))
    async def call(self: ExternalControls, *args: Any, **kwargs: Any) -> Any:
        return await getattr(topics, name)(self.bootstrap_servers, *args, **kwargs)

    return call


def _skipping_coroutine(name: str) -> Any:
    @functools.wraps(getattr(BrokerControls, name))
    async def skip(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
        not_available(f"{name}()", self.bootstrap_servers)

    return skip


def _skipping(name: str, what: str | None = None) -> Any:
    source = getattr(BrokerControls, name, None)

    def skip(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
        not_available(what or f"{name}()", self.bootstrap_servers)

    return functools.wraps(source)(skip) if source is not None else skip


def _skipping_property(name: str) -> property:
    return property(lambda self: not_available(f".{name}", self.bootstrap_servers))


for _name in topics.TOPIC_METHODS:
    setattr(ExternalControls, _name, _helper(_name))
for _name in WAIT_METHODS:
    if _name not in EXTERNAL_WAITS:
        setattr(ExternalControls, _name, _skipping_coroutine(_name))
for _name in CONTROL_METHODS:
    what = f"{_name}() (await wait_for_{_name}(...) asks the cluster)" if _name in EXTERNAL_READERS else None
    setattr(ExternalControls, _name, _skipping(_name, what))
for _name in ("faults", "broker", "listener", "rack"):
    setattr(ExternalControls, _name, _skipping_property(_name))
ExternalControls.connect = _skipping("connect", "connect() (an in-memory stream)")  # type: ignore[attr-defined]  # set on the class: not declared on it


class ExternalBroker:
    """An external cluster for synchronous tests (``kafka_broker``, ``kafka_cluster(...)``
    under ``--kafka-bootstrap``): every method a plain call (``.aio``: coroutines)."""

    __test__ = False

    def __init__(self, bootstrap_servers: str) -> None:
        self._controls = ExternalControls(bootstrap_servers)
        self.aio = AsyncExternalBroker(self)

    @property
    def bootstrap_servers(self) -> str:
        return self._controls.bootstrap_servers

    def __repr__(self) -> str:
        return repr(self._controls)

    def high_watermark(self, topic: str, partition: int) -> int | None:
        return trio.run(self._controls.fetch_high_watermark, topic, partition)

    def committed(self, group_id: str, topic: str, partition: int) -> int | None:
        return trio.run(self._controls.fetch_committed, group_id, topic, partition)


def _run(name: str, *, refuse: bool) -> Any:
    @functools.wraps(getattr(BrokerControls, name))
    def call(self: ExternalBroker, *args: Any, **kwargs: Any) -> Any:
        if refuse:
            refuse_in_event_loop(name)
        return trio.run(functools.partial(getattr(self._controls, name), *args, **kwargs))

    return call


for _name in topics.TOPIC_METHODS:
    setattr(ExternalBroker, _name, _run(_name, refuse=_name == "read"))
for _name in EXTERNAL_WAITS:
    setattr(ExternalBroker, _name, _run(_name, refuse=True))
for _name in CONTROL_METHODS + WAIT_METHODS:
    if _name not in EXTERNAL_WAITS + EXTERNAL_READERS:
        setattr(ExternalBroker, _name, _skipping(_name))
for _name in BROKER_ONLY:
    if _name in (
        "start",
        "stop",
        "stop_broker",
        "start_broker",
        "move_leader",
        "move_coordinator",
        "shrink_isr",
        "expand_isr",
        "leader",
        "group_snapshot",
        "partition_log",
    ):
        setattr(ExternalBroker, _name, _skipping(_name))
    else:
        setattr(ExternalBroker, _name, _skipping_property(_name))


class AsyncExternalBroker:
    """``handle.aio`` of an external cluster: the methods as coroutines, for asyncio tests."""

    def __init__(self, handle: ExternalBroker) -> None:
        self._handle = handle


asyncio_hosted(AsyncExternalBroker, ExternalBroker)
