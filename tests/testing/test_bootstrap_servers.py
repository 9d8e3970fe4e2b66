"""One spelling: ``bootstrap_servers`` is a ``"host:port[,...]"`` str property on every broker
shape a test or an application holds, and the clients take any of those objects."""

from __future__ import annotations

import trio

from trikafka import open_broker
from trikafka.client import open_admin, open_consumer, open_producer
from trikafka.cluster import open_cluster
from trikafka.testing import open_test_broker, start_cluster


def _is_servers(value: object, count: int) -> bool:
    if not isinstance(value, str):
        return False
    entries = value.split(",")
    return len(entries) == count and all(e.rpartition(":")[2].isdigit() for e in entries)


async def test_a_broker_over_tcp_is_its_own_bootstrap():
    """``open_producer(broker)`` / ``open_consumer(broker)`` over real sockets."""
    with trio.fail_after(60):
        async with open_broker(
            listeners="PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
            listener_security_protocol_map="PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
        ) as broker:
            assert _is_servers(broker.bootstrap_servers, 1)
            assert broker.bootstrap_servers == broker.address("PLAINTEXT") == f"127.0.0.1:{broker.port}"
            assert broker.address("OTHER") != broker.address("PLAINTEXT")
            async with open_producer(broker) as producer:
                await producer.send("spelled", b"one", key=b"k")
                await producer.flush()
            async with open_admin(broker) as admin:
                assert "spelled" in await admin.list_topics()
            async with open_consumer(broker, group_id="g", auto_offset_reset="earliest") as consumer:
                consumer.subscribe(["spelled"])
                async for record in consumer:
                    assert record.value == b"one"
                    break


async def test_a_test_broker_and_a_cluster_and_its_nodes(autojump_clock):
    async with open_test_broker() as test_broker:
        assert test_broker.bootstrap_servers == "memory:9092"
        assert test_broker.broker.bootstrap_servers == "memory:9092"
    async with open_cluster(brokers=2, transport="memory") as cluster:
        assert _is_servers(cluster.bootstrap_servers, 2)
        for node in cluster.nodes.values():
            assert _is_servers(node.bootstrap_servers, 1)
            assert node.bootstrap_servers == node.address(next(iter(node.endpoints)))
            assert node.bootstrap_servers in cluster.bootstrap_servers.split(",")


def test_the_thread_hosted_broker_and_cluster_handle(kafka_broker):
    assert _is_servers(kafka_broker.bootstrap_servers, 1)
    handle = start_cluster(2)
    try:
        assert _is_servers(handle.bootstrap_servers, 2)
        assert [b.bootstrap_servers for b in handle.brokers] == handle.bootstrap_servers.split(",")
    finally:
        handle.stop()
