"""One shape (issue 32, item 1): the same controls on every handle, one default count, waits
with a default timeout that say what they saw, ``.aio`` with real methods, a synchronous wait
refused inside an asyncio loop, and the Trio fixture usable from a fresh project."""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

import trikafka
from trikafka.errors import ErrorCode
from trikafka.testing import BrokerControls, TestBroker, controls
from trikafka.testing.cluster import AsyncClusterHandle, ClusterHandle
from trikafka.testing.faults import DEFAULT_COUNT, Faults
from trikafka.testing.pytest_plugin import TRIO_MISSING
from trikafka.testing.surface import CONTROL_METHODS, WAIT_METHODS, WAIT_TIMEOUT, FaultSet
from trikafka.testing.thread import AsyncBrokerHandle, BrokerHandle, ThreadedBroker

from .test_faults import create_topics

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30
HANDLES = [BrokerControls, TestBroker, BrokerHandle, ThreadedBroker, ClusterHandle]
ASYNC_HANDLES = [AsyncBrokerHandle, AsyncClusterHandle]
FAULT_KINDS = ("inject_error", "add_latency", "drop_connection", "hold_responses", "throttle")


def _parameters(method: object) -> list[str]:
    return [p for p in inspect.signature(method).parameters if p != "self"]  # type: ignore[arg-type]


@pytest.mark.parametrize("handle", HANDLES + ASYNC_HANDLES, ids=lambda h: h.__name__)
def test_every_handle_has_every_control_with_the_same_parameters(handle):
    for name in CONTROL_METHODS + WAIT_METHODS:
        method = getattr(handle, name, None)
        assert callable(method), f"{handle.__name__} has no {name}"
        assert _parameters(method) == _parameters(getattr(BrokerControls, name)), (handle.__name__, name)
        waits = name in WAIT_METHODS
        if handle in ASYNC_HANDLES:
            assert inspect.iscoroutinefunction(method), (handle.__name__, name)
        elif handle in (BrokerControls, TestBroker):  # Trio: waits are coroutines
            assert inspect.iscoroutinefunction(method) is waits, (handle.__name__, name)
        else:  # thread-hosted: every call is plain
            assert not inspect.iscoroutinefunction(method), (handle.__name__, name)
        if waits:
            assert inspect.signature(method).parameters["timeout"].default == WAIT_TIMEOUT == 10


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_one_default_count_for_every_fault_kind(kind):
    assert DEFAULT_COUNT is None  # every matching request, until removed
    for owner in (Faults, BrokerControls, BrokerHandle, ClusterHandle):
        assert inspect.signature(getattr(owner, kind)).parameters["count"].default is DEFAULT_COUNT, owner


def test_the_cluster_side_stop_broker_is_plain_on_the_thread_and_a_coroutine_in_trio():
    from trikafka.cluster.cluster import Cluster

    assert inspect.iscoroutinefunction(Cluster.stop_broker) and inspect.iscoroutinefunction(Cluster.start_broker)
    for name in ("stop_broker", "start_broker", "move_leader", "shrink_isr", "expand_isr", "move_coordinator"):
        assert not inspect.iscoroutinefunction(getattr(ClusterHandle, name)), name
        assert inspect.iscoroutinefunction(getattr(AsyncClusterHandle, name)), name


def test_aio_lists_its_methods(kafka_broker):
    listed = set(dir(kafka_broker.aio))
    assert set(CONTROL_METHODS + WAIT_METHODS) <= listed
    assert "timeout" in inspect.signature(kafka_broker.aio.wait_for_group_state).parameters


def test_a_synchronous_wait_inside_an_asyncio_loop_says_to_use_aio(kafka_broker):
    async def main() -> None:
        with pytest.raises(RuntimeError, match=r"await handle\.aio\.wait_for_high_watermark"):
            kafka_broker.wait_for_high_watermark("t", 0, at_least=1)
        with pytest.raises(TimeoutError, match="no such partition"):
            await kafka_broker.aio.wait_for_high_watermark("t", 0, at_least=1, timeout=0.05)
        assert await kafka_broker.aio.high_watermark("t", 0) is None

    asyncio.run(main())


@pytest.mark.trikafka(config={"group.min.session.timeout.ms": 500})
def test_dropping_a_members_heartbeats_gets_it_expelled(kafka_broker):
    """With the default count the fault keeps dropping the member's heartbeats until its
    session expires: the group rebalances to the one member left."""
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    admin.create_topics([NewTopic("beats", 2, 1)])["beats"].result(TIMEOUT)
    stop = threading.Event()

    def member(client_id: str) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": kafka_broker.bootstrap_servers,
                "group.id": "beats",
                "client.id": client_id,
                "session.timeout.ms": 1500,
                "heartbeat.interval.ms": 100,
            }
        )
        consumer.subscribe(["beats"])
        try:
            while not stop.is_set():
                consumer.poll(0.1)
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, args=(name,), daemon=True) for name in ("m1", "m2")]
    for thread in threads:
        thread.start()
    try:
        kafka_broker.wait_for_group_state("beats", "Stable", members=2, timeout=TIMEOUT)
        fault = kafka_broker.drop_connection("Heartbeat", client_id="m2")
        group = kafka_broker.wait_for_group_state("beats", "Stable", members=1, timeout=TIMEOUT)
        assert fault.applied >= 2 and fault in kafka_broker.faults  # still dropping
        assert group.members[0].startswith("m1")
    finally:
        kafka_broker.clear_faults()
        stop.set()
        for thread in threads:
            thread.join(TIMEOUT)


def test_the_cluster_handle_has_faults_and_waits_that_say_what_they_saw(kafka_cluster):
    cluster = kafka_cluster(brokers=3)
    with pytest.raises(TimeoutError, match=r"not reached within 0.1 s; no such partition"):
        cluster.wait_for_high_watermark("nothing", 0, at_least=1, timeout=0.1)
    with pytest.raises(TimeoutError, match="the group does not exist"):
        cluster.wait_for_group_state("nobody", "Stable", timeout=0.1)

    fault = cluster.inject_error("CreateTopics", "POLICY_VIOLATION", count=1)
    assert isinstance(fault, FaultSet) and len(fault.faults) == 3
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    with pytest.raises(KafkaException, match="POLICY_VIOLATION"):
        admin.create_topics([NewTopic("refused", 1, 3)])["refused"].result(TIMEOUT)
    assert fault.applied == 1
    cluster.clear_faults()
    assert cluster.active_faults() == []
    admin.create_topics([NewTopic("accepted", 1, 3)])["accepted"].result(TIMEOUT)
    assert {r.api for r in cluster.recorded("CreateTopics")} == {"CreateTopics"}


async def test_the_trio_handle_has_the_controls_itself(trikafka_broker, autojump_clock):
    fault = trikafka_broker.inject_error("CreateTopics", "POLICY_VIOLATION", count=1)
    async with trikafka_broker.client() as client:
        answer = await client.request(create_topics("refused"))
        assert answer.topics[0].error_code == ErrorCode.policy_violation
    assert fault.applied == 1 and trikafka_broker.active_faults() == []
    with pytest.raises(TimeoutError, match=r"within 10 s; no such partition"):
        await trikafka_broker.wait_for_high_watermark("nothing", 0, at_least=1)
    assert controls(trikafka_broker.broker).recorded("Metadata") == trikafka_broker.recorded("Metadata")


def test_the_pytest_extra_brings_pytest_trio():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(r.startswith("pytest-trio") for r in extras["pytest"])


def _fresh_project(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(ROOT / "examples" / "pytest_trio_broker.py", tmp_path / "test_copied.py")
    env = dict(os.environ, PYTHONPATH=str(Path(trikafka.__file__).parents[1]))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "test_copied.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_trio_example_works_copied_into_a_fresh_project(tmp_path):
    result = _fresh_project(tmp_path)  # no conftest, no trio_mode, no mark
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_without_pytest_trio_the_fixture_says_what_to_install(tmp_path):
    result = _fresh_project(tmp_path, "-p", "no:trio")
    assert result.returncode != 0
    assert TRIO_MISSING in result.stdout and "pip install 'trikafka[pytest]'" in result.stdout


async def test_the_same_controls_on_an_open_cluster_and_each_of_its_brokers(autojump_clock):
    from trikafka.cluster import open_cluster

    async with open_cluster(brokers=3, transport="memory") as cluster:
        everywhere, second = controls(cluster), controls(cluster, broker=2)
        fault = everywhere.inject_error("Metadata", "REQUEST_TIMED_OUT")
        assert isinstance(fault, FaultSet) and len(fault.faults) == 3
        second.set_round_trip_time(0.5)
        assert len(second.active_faults()) == 2 and len(everywhere.active_faults()) == 4
        with pytest.raises(TimeoutError, match=r"within 1 s; no such partition"):
            await second.wait_for_high_watermark("nothing", 0, at_least=1, timeout=1)
        everywhere.clear_faults()
        assert everywhere.active_faults() == []
        await cluster.stop_broker(2)  # in Trio, the cluster's own waits are coroutines too
        assert 2 not in cluster.state.alive
