"""The everyday helpers on every handle: ``create_topic``, ``produce`` and ``read`` — on the
Trio handle in virtual time, on the thread-hosted handles with real clients, on ``.aio``, on a
cluster, on ``KafkaContainer`` and over the HTTP control interface.

``tests/testing/test_external_cluster.py`` runs this file again with ``--kafka-bootstrap``
against a ``python -m trikafka`` process: each test uses its own topic names, so they share
one cluster; the ones in virtual time are skipped there, naming the option."""

from __future__ import annotations

import asyncio
import inspect
import json
import urllib.error
import urllib.request

import pytest
import trio
from confluent_kafka import Consumer, TopicPartition

from trikafka.client import KafkaError
from trikafka.errors import ErrorCode
from trikafka.testing import BrokerControls, KafkaContainer, Record, TestBroker
from trikafka.testing.cluster import AsyncClusterHandle, ClusterHandle
from trikafka.testing.external import AsyncExternalBroker, ExternalBroker, ExternalControls
from trikafka.testing.process import broker_process
from trikafka.testing.surface import TOPIC_METHODS
from trikafka.testing.thread import AsyncBrokerHandle, BrokerHandle, ThreadedBroker

TIMEOUT = 30
TRIO_HANDLES = [BrokerControls, TestBroker, ExternalControls]
PLAIN_HANDLES = [BrokerHandle, ThreadedBroker, ClusterHandle, KafkaContainer, ExternalBroker]
ASYNC_HANDLES = [AsyncBrokerHandle, AsyncClusterHandle, AsyncExternalBroker]


def _parameters(method: object) -> list[str]:
    return [p for p in inspect.signature(method).parameters if p != "self"]  # type: ignore[arg-type]


@pytest.mark.parametrize("handle", TRIO_HANDLES + PLAIN_HANDLES + ASYNC_HANDLES, ids=lambda h: h.__name__)
def test_every_handle_has_the_helpers_with_one_signature(handle):
    assert TOPIC_METHODS == ("create_topic", "produce", "read")
    for name in TOPIC_METHODS:
        method = getattr(handle, name, None)
        assert callable(method), f"{handle.__name__} has no {name}"
        assert _parameters(method) == _parameters(getattr(BrokerControls, name)), (handle.__name__, name)
        assert inspect.iscoroutinefunction(method) is (handle not in PLAIN_HANDLES), (handle.__name__, name)
    assert _parameters(BrokerControls.create_topic)[:4] == ["name", "partitions", "replication_factor", "config"]
    assert _parameters(BrokerControls.read)[:5] == ["topic", "partition", "from_offset", "max_records", "timeout"]
    assert inspect.signature(BrokerControls.read).parameters["timeout"].default == 10


# --- the Trio handle, in virtual time -----------------------------------------------------------


async def test_create_produce_and_read_back_in_virtual_time(trikafka_broker, autojump_clock):
    await trikafka_broker.create_topic("orders", partitions=2, config={"cleanup.policy": "compact"})
    offsets = await trikafka_broker.produce(
        "orders", [("k1", "v1"), ("k2", b"v2", {"trace": b"abc"}), ("k3", "v3", [("a", "1"), ("b", None)])],
        partition=1,
    )  # fmt: skip
    assert offsets == [0, 1, 2]
    assert await trikafka_broker.produce("orders", [("p", b"plain"), ("n", None)], partition=0) == [0, 1]
    with pytest.raises(KafkaError, match="orders-0"):  # the topic's config was applied: compacted
        await trikafka_broker.produce("orders", [b"no key"], partition=0)

    records = await trikafka_broker.read("orders")
    assert [(r.partition, r.offset, r.key, r.value) for r in records] == [
        (0, 0, b"p", b"plain"), (0, 1, b"n", None), (1, 0, b"k1", b"v1"), (1, 1, b"k2", b"v2"), (1, 2, b"k3", b"v3"),
    ]  # fmt: skip
    assert records[3].headers == (("trace", b"abc"),) and records[4].headers == (("a", b"1"), ("b", None))
    assert all(isinstance(r, Record) and r.topic == "orders" and r.timestamp > 0 for r in records)
    with pytest.raises(attrs_frozen_error()):
        records[0].value = b"changed"  # type: ignore[misc]

    assert [r.offset for r in await trikafka_broker.read("orders", partition=1, from_offset=1)] == [1, 2]
    assert [r.value for r in await trikafka_broker.read("orders", partition=1, max_records=1)] == [b"v1"]


def attrs_frozen_error() -> type[Exception]:
    import attrs

    return attrs.exceptions.FrozenInstanceError


async def test_read_with_max_records_waits_for_them_and_says_what_it_saw(trikafka_broker, autojump_clock):
    await trikafka_broker.create_topic("late")

    async def produce_later() -> None:
        await trio.sleep(3)
        await trikafka_broker.produce("late", ["a", "b"])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce_later)
        start = trio.current_time()
        records = await trikafka_broker.read("late", max_records=2)
    assert [r.value for r in records] == [b"a", b"b"] and trio.current_time() - start >= 3

    async with trio.open_nursery() as nursery:  # an offset past the end: the records that land there
        nursery.start_soon(produce_later)
        records = await trikafka_broker.read("late", from_offset=3, max_records=1)
    assert [(r.offset, r.value) for r in records] == [(3, b"b")]
    assert await trikafka_broker.read("late", from_offset=9) == []

    start = trio.current_time()
    with pytest.raises(TimeoutError, match=r"read\('late', .*5 record\(s\) within 5 s; partition 0: 4 read"):
        await trikafka_broker.read("late", max_records=5, timeout=5)
    assert trio.current_time() - start == pytest.approx(5, abs=0.5)  # the bound is trio's clock
    with pytest.raises(TimeoutError, match=r"read\('missing'.*within 2 s; .*topic 'missing'.*does it exist"):
        await trikafka_broker.read("missing", timeout=2)


async def test_bad_input_and_the_clusters_refusals_name_the_topic(trikafka_broker, autojump_clock):
    await trikafka_broker.create_topic("once")
    with pytest.raises(KafkaError, match="once") as refused:
        await trikafka_broker.create_topic("once")
    assert refused.value.error_code == ErrorCode.topic_already_exists
    with pytest.raises(TypeError, match=r"records\[1\] is a tuple of 4"):
        await trikafka_broker.produce("once", ["ok", ("k", "v", {}, "extra")])
    with pytest.raises(TypeError, match=r"records\[0\] must be bytes, str or None, not int"):
        await trikafka_broker.produce("once", [7])
    with pytest.raises(TypeError, match=r"not str .*produce\(topic, \[value\]\)"):
        await trikafka_broker.produce("once", "hello")
    with pytest.raises(ValueError, match=r"read\('once', partition=4\): the topic has partitions 0..0"):
        await trikafka_broker.read("once", partition=4)
    with pytest.raises(ValueError, match="partitions=0 must be at least 1"):
        await trikafka_broker.create_topic("never", partitions=0)
    assert await trikafka_broker.read("once") == []  # nothing was written by the refused calls


async def test_the_trio_handle_in_real_time(trikafka_broker):
    """No MockClock: also what the Trio handle on an external cluster runs."""
    await trikafka_broker.create_topic("trio-real")
    assert await trikafka_broker.produce("trio-real", ["x"]) == [0]
    assert [r.value for r in await trikafka_broker.read("trio-real")] == [b"x"]
    assert await trikafka_broker.wait_for_high_watermark("trio-real", 0, at_least=1) == 1


async def test_a_refusal_the_cluster_answers_is_the_clients_error_naming_the_topic(trikafka_broker):
    trikafka_broker.inject_error("CreateTopics", "POLICY_VIOLATION", count=1)  # skipped on an external cluster
    with pytest.raises(KafkaError, match="'guarded'") as refused:
        await trikafka_broker.create_topic("guarded")
    assert refused.value.error_code == ErrorCode.policy_violation
    await trikafka_broker.create_topic("guarded")


# --- thread-hosted handles, with a real client --------------------------------------------------


def test_what_produce_wrote_a_real_consumer_reads_and_read_sees_what_it_wrote(kafka_broker):
    kafka_broker.create_topic("payments", partitions=3)
    assert kafka_broker.produce("payments", ["a", "b"], partition=2) == [0, 1]
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "payments-reader",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.assign([TopicPartition("payments", 2, 0)])
        seen = []
        while len(seen) < 2:
            message = consumer.poll(TIMEOUT)
            assert message is not None and message.error() is None
            seen.append(message.value())
        assert seen == [b"a", b"b"]
    finally:
        consumer.close()
    records = kafka_broker.read("payments")
    assert [(r.partition, r.value) for r in records] == [(2, b"a"), (2, b"b")]
    assert kafka_broker.wait_for_high_watermark("payments", 2, at_least=2) == 2
    assert kafka_broker.high_watermark("payments", 2) == 2


@pytest.mark.asyncio
async def test_aio_helpers_and_read_refused_inside_a_loop(kafka_broker):
    await kafka_broker.aio.create_topic("aio-topic")
    assert await kafka_broker.aio.produce("aio-topic", [("k", "v")]) == [0]
    assert [(r.key, r.value) for r in await kafka_broker.aio.read("aio-topic")] == [(b"k", b"v")]
    with pytest.raises(RuntimeError, match=r"await handle\.aio\.read"):
        kafka_broker.read("aio-topic")
    assert kafka_broker.produce("aio-topic", ["plain call"]) == [1]  # waits on no client of the loop


def test_a_cluster_handle_creates_replicated_topics(kafka_cluster):
    cluster = kafka_cluster(brokers=3)
    cluster.create_topic("replicated", partitions=2, replication_factor=3, config={"min.insync.replicas": 2})
    assert cluster.produce("replicated", [("a", "1"), ("b", "2"), ("c", "3")]) is not None
    records = cluster.read("replicated")
    assert sorted(r.value for r in records) == [b"1", b"2", b"3"]
    assert cluster.brokers[1].read("replicated", max_records=3)  # any broker's handle reaches the cluster
    assert len(cluster.thread.call(lambda: cluster.cluster.state.leadership("replicated", 0).isr)) == 3


def test_kafka_container_has_the_helpers():
    with KafkaContainer() as kafka:
        kafka.create_topic("from-container", partitions=2)
        assert kafka.produce("from-container", ["x"], partition=1) == [0]
        assert [(r.partition, r.value) for r in kafka.read("from-container")] == [(1, b"x")]
    with pytest.raises(RuntimeError, match=r"KafkaContainer\.read: the container is not started"):
        kafka.read("from-container")


# --- over HTTP ------------------------------------------------------------------------------------


def _http(method: str, url: str, body: object = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.compat
def test_the_topic_routes_of_the_control_interface(tmp_path):
    with broker_process("--in-memory", "--control-listener", "127.0.0.1:0", cwd=tmp_path) as broker:
        url = broker.control_url
        assert url is not None, broker.output
        assert _http("POST", f"{url}/topics", {"name": "web", "partitions": 2}) == (201, {"topic": "web"})
        status, answer = _http("POST", f"{url}/topics", {"name": "web"})
        assert status == 409 and answer["code"] == "TOPIC_ALREADY_EXISTS" and "web" in answer["error"]
        body = {"records": ["v0", {"key": "k", "value": "v1", "headers": {"h": "x"}}, None], "partition": 1}
        assert _http("POST", f"{url}/topics/web/records", body) == (200, {"topic": "web", "offsets": [0, 1, 2]})
        binary = {"records": [{"key": None, "value": "/w=="}], "partition": 0, "encoding": "base64"}
        assert _http("POST", f"{url}/topics/web/records", binary)[1]["offsets"] == [0]

        status, answer = _http("GET", f"{url}/topics/web/records?partition=1")
        assert status == 200
        assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in answer["records"]] == [
            (0, None, "v0", []), (1, "k", "v1", [["h", "x"]]), (2, None, None, []),
        ]  # fmt: skip
        assert answer["records"][0]["timestamp"] > 0 and answer["records"][0]["topic"] == "web"
        status, answer = _http("GET", f"{url}/topics/web/records?partition=0")
        assert status == 400 and "encoding=base64" in answer["error"]  # b"\xff" is not text
        status, answer = _http("GET", f"{url}/topics/web/records?partition=0&encoding=base64")
        assert answer["records"][0]["value"] == "/w=="
        status, answer = _http(
            "GET", f"{url}/topics/web/records?partition=0&from_offset=1&max_records=1&timeout_ms=300"
        )
        assert status == 408 and "read('web', partition=0, from_offset=1)" in answer["error"]
        status, answer = _http("POST", f"{url}/topics/web/records", {"records": "v"})
        assert status == 400 and "records" in answer["error"]
        status, answer = _http("POST", f"{url}/topics/web/records", {"records": [{"value": "v", "colour": 1}]})
        assert status == 400 and "records[0] has colour" in answer["error"]
        assert broker.stop() == 0


def test_a_blocking_read_from_a_plain_test_is_fine(kafka_broker):
    kafka_broker.create_topic("plain")
    assert asyncio.run(_produce_via_aio(kafka_broker)) == [0]
    assert [r.value for r in kafka_broker.read("plain", max_records=1)] == [b"via aio"]


async def _produce_via_aio(handle: ThreadedBroker) -> list[int]:
    return await handle.aio.produce("plain", ["via aio"])
