"""What a user's type checker sees of trikafka's public API (checked, never run).

``make typecheck`` and ``tests/type_tests/test_public_api_types.py`` run ``mypy --strict`` (with
``--disallow-any-expr``) over this file: every public entry point is touched with
``typing.assert_type``, so a signature that turns vague (``Any``), loses its annotation or
changes its type fails here, as trio's ``_tests/type_tests/`` pin what its users see.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import assert_type

import trio

import trikafka
import trikafka.client as client
import trikafka.testing as testing
from trikafka import Broker, BrokerConfig, BrokerStatistics, Cluster, ConfigError, open_broker, open_cluster
from trikafka.client import (
    Admin,
    ConsumerRecord,
    Producer,
    RecordMetadata,
    TopicPartition,
    open_admin,
    open_consumer,
    open_producer,
)
from trikafka.server.awaitable import GroupSnapshot
from trikafka.server.client_metrics import ClientMetricsSnapshot
from trikafka.server.share_awaitable import ShareGroupSnapshot, SharePartitionSnapshot
from trikafka.testing import (
    BrokerControls,
    ClusterHandle,
    Fault,
    FaultSet,
    KafkaContainer,
    RecordedRequest,
    ScenarioRun,
    TestBroker,
    ThreadedBroker,
    TrioThread,
    open_test_broker,
    start_cluster,
)
from trikafka.testing.cluster import AsyncClusterHandle
from trikafka.testing.thread import AsyncBrokerHandle


async def the_broker() -> None:
    config = BrokerConfig.from_mapping({"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert_type(config, BrokerConfig)
    assert_type(config.node_id, int)
    async with open_broker(config, num_io_threads=2) as broker:
        assert_type(broker, Broker)
        assert_type(broker.bootstrap_servers, str)
        assert_type(broker.statistics(), BrokerStatistics)
        assert_type(broker.statistics().request_queue_size, int)
        assert_type(await broker.wait_for_high_watermark("t", 0, at_least=1), int)
        assert_type(await broker.wait_for_group_state("g", "Stable"), GroupSnapshot)
        assert_type(broker.group_snapshot("g"), GroupSnapshot | None)
    async with open_cluster(3, {"num.partitions": 3}, racks=["a", "b", "c"]) as cluster:
        assert_type(cluster, Cluster)
        assert_type(cluster.bootstrap_servers, str)
        await cluster.stop_broker(1)
        assert_type(cluster.leader("t", 0), int)
    try:
        BrokerConfig.from_mapping({"num.io.threads": "many"})
    except ConfigError as exc:
        assert_type(str(exc), str)
    assert_type(trikafka.__version__, str)


async def the_client(broker: Broker) -> None:
    async with open_producer(broker, acks="all", value_serializer=lambda v: str(v).encode()) as producer:
        assert_type(producer, Producer)
        metadata = await producer.send("t", b"v", key=b"k", headers={"h": b"1"})
        assert_type(metadata, RecordMetadata)
        assert_type(metadata.offset, int)
        future = await producer.enqueue("t", "text", headers=[("h", None)])
        assert_type(future, client.RecordFuture)
        assert_type(await future.wait(), RecordMetadata)
        await producer.flush()
    async with open_consumer(broker.bootstrap_servers, group_id="g", auto_offset_reset="earliest") as consumer:
        assert_type(consumer, client.Consumer)
        consumer.subscribe(["t"], listener=Listener())
        batches = await consumer.getmany(timeout_ms=100)
        assert_type(batches, dict[TopicPartition, list[ConsumerRecord]])
        async for record in consumer:
            assert_type(record, ConsumerRecord)
            assert_type(record.value, bytes | None)
            assert_type(record.offset, int)
            break
        await consumer.commit()
    async with open_admin(broker) as admin:
        assert_type(admin, Admin)
        await admin.create_topics([client.NewTopic("t", 1, 1)])
    async with client.open_share_consumer(broker, group_id="s") as share:
        assert_type(share, client.ShareConsumer)
    async with client.connect_tcp("127.0.0.1", 9092) as connection:
        assert_type(connection, client.KafkaConnection)


async def the_trio_test_kit() -> None:
    async with open_test_broker(num_io_threads=1) as broker:
        assert_type(broker, TestBroker)
        fault = broker.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=1, topic="t")
        assert_type(fault, Fault | FaultSet)
        assert_type(broker.recorded("Produce"), list[RecordedRequest])
        assert_type(broker.high_watermark("t", 0), int | None)
        assert_type(await broker.wait_for_share_group_state("s", "Stable"), ShareGroupSnapshot)
        assert_type(await broker.wait_for_share_records("s", "t", 0, at_least=1), SharePartitionSnapshot)
        assert_type(await broker.wait_for_client_metric("org.apache.kafka."), ClientMetricsSnapshot)
        assert_type(broker.apply_scenario({"steps": []}), ScenarioRun)
        assert_type(broker.scenario_status(), dict[str, object] | None)
        assert_type(testing.controls(broker.broker), BrokerControls)
        async with open_producer(broker) as producer:
            assert_type(producer, Producer)


def the_threaded_kit(kafka_broker: ThreadedBroker) -> None:
    """``kafka_broker``'s handle, its ``.aio``, and a cluster's handle."""
    assert_type(kafka_broker.bootstrap_servers, str)
    assert_type(kafka_broker.schema_registry_url, str)
    assert_type(kafka_broker.broker, Broker)
    assert_type(kafka_broker.inject_error("Fetch", 6), Fault | FaultSet)
    assert_type(kafka_broker.wait_for_high_watermark("t", 0, at_least=3, timeout=5), int)
    assert_type(kafka_broker.wait_for_group_state("g", "Stable", members=2), GroupSnapshot)
    assert_type(kafka_broker.recorded(client_id="me"), list[RecordedRequest])
    assert_type(kafka_broker.faults, list[Fault])
    kafka_broker.create_topic("t", partitions=2, config={"cleanup.policy": "compact"})
    assert_type(kafka_broker.produce("t", [b"v", (b"k", b"v")]), list[int])
    assert_type(kafka_broker.read("t", max_records=2), list[testing.Record])
    assert_type(kafka_broker.aio, AsyncBrokerHandle)
    assert_type(kafka_broker.thread, TrioThread)
    assert_type(kafka_broker.thread.call(lambda: 3), int)
    cluster = start_cluster(3, {"num.partitions": 2})
    assert_type(cluster, ClusterHandle)
    assert_type(cluster.brokers[0], testing.BrokerHandle)
    assert_type(cluster.bootstrap_servers, str)
    assert_type(cluster.leader("t", 0), int)
    cluster.move_leader("t", 0, 2)
    cluster.shrink_isr("t", 0, [1, 2])
    assert_type(cluster.aio, AsyncClusterHandle)
    assert_type(cluster.throttle("Fetch", 100), Fault | FaultSet)
    cluster.stop()
    with ThreadedBroker({"num.partitions": 2}) as broker:
        assert_type(broker, ThreadedBroker)
    assert_type(testing.Scenario.coerce({"steps": []}).run(kafka_broker), ScenarioRun)


class Listener(client.RebalanceListener):
    """Both shapes of callback type-check: a plain and an ``async`` method."""

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        print(sorted(partitions))

    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        await trio.lowlevel.checkpoint()


async def the_asyncio_handles(kafka_broker: ThreadedBroker, cluster: ClusterHandle) -> None:
    assert_type(await kafka_broker.aio.wait_for_committed("g", "t", 0, at_least=1), int)
    assert_type(await kafka_broker.aio.inject_error("Fetch", 6), Fault | FaultSet)
    assert_type(await kafka_broker.aio.read("t"), list[testing.Record])
    assert_type(await cluster.aio.wait_for_transaction_state("tx", "Ongoing"), str)
    await cluster.aio.stop_broker(1)


def the_container() -> None:
    with KafkaContainer() as kafka:
        assert_type(kafka, KafkaContainer)
        assert_type(kafka.get_bootstrap_server(), str)


def fixture_factories(kafka_cluster: Callable[..., ClusterHandle], items: Iterable[int]) -> None:
    assert_type(kafka_cluster(brokers=3), ClusterHandle)


async def main() -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(the_trio_test_kit)
