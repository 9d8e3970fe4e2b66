"""``broker.rack`` and KIP-392 (fetch from the closest replica) in a three-broker cluster.

In memory under MockClock, the Fetch rules exactly: the leader answers a consumer in another
rack with ``preferred_read_replica`` and no records, an in-sync follower serves a consumer's
Fetch v11+, nothing changes without ``replica.selector.class``. Over TCP with confluent-kafka:
the racks in DescribeCluster and Metadata, and a consumer with ``client.rack`` that ends up
fetching from the follower in its rack.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tests.compat.support import TIMEOUT, Deadline
from trikafka import open_cluster
from trikafka.config import BrokerConfig
from trikafka.config.racks import RACK_AWARE_SELECTOR
from trikafka.errors import ConfigError
from trikafka.testing.faults import Faults

from .support import batch, connected, metadata, produce, records_of, request
from .test_per_broker import create_placed_topic

RACKS = {"broker_rack": "r1,r2,r3", "replica_selector_class": RACK_AWARE_SELECTOR}


async def fetch(client: Any, topic: str, rack: str, version: int = 12) -> Any:
    response = await client.request(request(
        1, version, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=10_000_000, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id=rack,
        topics=[{"topic": topic, "topic_id": None, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1_000_000}]}],
    ))
    return response.responses[0].partitions[0]


async def test_every_broker_reports_its_rack_round_robin_from_the_list(autojump_clock):
    async with open_cluster(brokers=3, transport="memory", broker_rack="east,west") as cluster:
        assert [cluster.broker(n).config.broker_rack for n in cluster.broker_ids()] == ["east", "west", "east"]
        async with connected(cluster, 2) as client:
            answer = await metadata(client, None)
            assert {b.node_id: b.rack for b in answer.brokers} == {1: "east", 2: "west", 3: "east"}
            described = await client.request(request(60, 1, include_cluster_authorized_operations=False,
                                                      endpoint_type=1))
            assert {b.broker_id: b.rack for b in described.brokers} == {1: "east", 2: "west", 3: "east"}
            # DescribeConfigs on broker 2 (librdkafka's test 0101 counts the racks this way).
            configs = await client.request(request(32, 4, include_synonyms=False, include_documentation=False,
                                                   resources=[{"resource_type": 4, "resource_name": "2",
                                                               "configuration_keys": ["broker.rack", "node.id"]}]))
            assert {c.name: c.value for c in configs.results[0].configs} == {"broker.rack": "west", "node.id": "2"}


async def test_the_leader_sends_a_consumer_to_the_in_sync_replica_in_its_rack(autojump_clock):
    async with open_cluster(brokers=3, transport="memory", **RACKS) as cluster:
        async with connected(cluster, 1) as admin:
            await create_placed_topic(admin, "t", [1, 2, 3])
            assert (await produce(admin, "t", 0, batch(b"a", b"b"))).error_code == ErrorCode.none
        async with connected(cluster, 1) as leader, connected(cluster, 2) as follower:
            redirected = await fetch(leader, "t", "r2")
            assert (redirected.error_code, redirected.preferred_read_replica) == (ErrorCode.none, 2)
            assert not redirected.records and redirected.high_watermark == 2
            for rack in ("r1", "", "r9"):  # the leader's own rack, none, a rack with no replica
                served = await fetch(leader, "t", rack)
                assert served.preferred_read_replica == -1 and records_of(served.records) == [(0, b"a"), (1, b"b")]
            # The follower serves a consumer's Fetch v11+ (client metadata), not an older one.
            served = await fetch(follower, "t", "r2")
            assert (served.error_code, served.preferred_read_replica) == (ErrorCode.none, -1)
            assert records_of(served.records) == [(0, b"a"), (1, b"b")]
            assert (await fetch(follower, "t", "r2", version=10)).error_code == ErrorCode.not_leader_or_follower
            # Out of the ISR, the follower is chosen no more and serves no consumer.
            cluster.shrink_isr("t", 0, [1, 3])
            assert (await fetch(leader, "t", "r2")).preferred_read_replica == -1
            assert (await fetch(follower, "t", "r2")).error_code == ErrorCode.not_leader_or_follower


async def test_without_a_replica_selector_the_leader_serves_everyone(autojump_clock):
    async with open_cluster(brokers=3, transport="memory", broker_rack="r1,r2,r3") as cluster:
        async with connected(cluster, 1) as client:
            await create_placed_topic(client, "t", [1, 2, 3])
            assert (await produce(client, "t", 0, batch(b"a"))).error_code == ErrorCode.none
            served = await fetch(client, "t", "r2")
            assert served.preferred_read_replica == -1 and records_of(served.records) == [(0, b"a")]


def test_the_keys_refuse_what_is_not_built_by_name():
    with pytest.raises(ConfigError, match="replica.selector.class"):
        BrokerConfig.from_mapping({"replica.selector.class": "com.example.MySelector"})
    with pytest.raises(ConfigError, match="broker.rack"):
        BrokerConfig.from_mapping({"broker.rack": "r1,,r3"})


@pytest.mark.compat
def test_confluent_kafka_sees_the_racks_and_fetches_from_its_racks_follower(start_cluster):
    cluster = start_cluster(3, **RACKS)
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    nodes = admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT).nodes
    assert {n.id: n.rack for n in nodes} == {1: "r1", 2: "r2", 3: "r3"}
    assert sorted(admin.list_topics(timeout=TIMEOUT).brokers) == [1, 2, 3]
    admin.create_topics([NewTopic("racked", 1, 3)])["racked"].result(TIMEOUT)
    if cluster.call(cluster.cluster.leader, "racked", 0) != 1:
        cluster.call(cluster.cluster.move_leader, "racked", 0, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce("racked", b"%02d" % i, partition=0)
    assert producer.flush(TIMEOUT) == 0
    follower = Faults.of(cluster.cluster.broker(2)).recorder
    cluster.call(follower.start)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "racked-reader", "client.id": "in-r2",
                         "client.rack": "r2", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("racked", 0, 0)])
        values: list[bytes] = []
        deadline = Deadline()
        while len(values) < 20 and deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
        assert values == [b"%02d" % i for i in range(20)]
        # Told by the leader (broker 1, rack r1) to go to broker 2, rack r2, it fetches there.
        deadline = Deadline()
        while not cluster.call(follower.requests, "Fetch", client_id="in-r2") and deadline:
            consumer.poll(0.2)
        fetches = cluster.call(follower.requests, "Fetch", client_id="in-r2")
        assert fetches and all(r.body.rack_id == "r2" for r in fetches)
    finally:
        consumer.close()
        cluster.call(follower.stop)
