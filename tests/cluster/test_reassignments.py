"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments on three brokers,
through the real clients that call them: confluent-kafka's ``elect_leaders`` and
kafka-python's ``elect_leaders`` / ``alter_partition_reassignments`` /
``list_partition_reassignments`` (confluent-kafka has no reassignment calls).

Every wait is on a state change made by a control that returns once it is made (``cluster.call``
runs on the cluster's thread); no test sleeps.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import (
    ElectionNotNeededError,
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from tests.compat.support import TIMEOUT
from trikafka.testing import Faults

from .test_clients import consume_values, create_topic


def produce(bootstrap: str, topic: str, count: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    values = [b"value %d" % i for i in range(count)]
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(TIMEOUT) == 0
    return values


def lead(cluster: Any, topic: str, partition: int = 0) -> Any:
    return cluster.call(cluster.cluster.leadership, topic, partition)


@pytest.fixture
def kafka_admin():
    clients: list[KafkaAdminClient] = []

    def connect(bootstrap: str) -> KafkaAdminClient:
        client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


def test_confluent_elect_leaders_moves_leadership_back_to_the_preferred_replica(start_cluster):
    cluster = start_cluster(3)
    create_topic(cluster.bootstrap_servers, "elect")
    before = lead(cluster, "elect")
    preferred = before.replicas[0]
    other = before.replicas[1]
    cluster.call(cluster.cluster.move_leader, "elect", 0, other)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("elect", 0)]).result(TIMEOUT)
    assert result == {TopicPartition("elect", 0): None}
    after = lead(cluster, "elect")
    assert after.leader == preferred and after.leader_epoch == before.leader_epoch + 2

    (again,) = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("elect", 0)]).result(TIMEOUT).values()
    assert again.code() == again.ELECTION_NOT_NEEDED

    # The preferred replica stopped: it cannot lead.
    cluster.acall(cluster.cluster.stop_broker, preferred)
    assert lead(cluster, "elect").leader != preferred
    (unavailable,) = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("elect", 0)]).result(TIMEOUT).values()
    assert unavailable.code() == unavailable.PREFERRED_LEADER_NOT_AVAILABLE


def test_unclean_election_brings_an_offline_partition_back(start_cluster, kafka_admin):
    cluster = start_cluster(3)
    create_topic(cluster.bootstrap_servers, "unclean", replication_factor=2)
    lead_before = lead(cluster, "unclean")
    last, follower = lead_before.leader, next(r for r in lead_before.replicas if r != lead_before.leader)
    cluster.call(cluster.cluster.shrink_isr, "unclean", 0, [last])
    cluster.acall(cluster.cluster.stop_broker, last)
    assert lead(cluster, "unclean").leader == -1  # offline: its last in-sync replica is down
    bootstrap = ",".join(s for s in cluster.bootstrap_servers.split(",") if not s.endswith(f":{last}"))
    admin = kafka_admin(bootstrap)
    response = admin.elect_leaders(1, {"unclean": [0]})
    (result,) = response.replica_election_results
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [(0, 0)]
    assert lead(cluster, "unclean").leader == follower
    # Another unclean election is not needed now.
    response = admin.elect_leaders(1, {"unclean": [0]})
    assert response.replica_election_results[0].partition_result[0].error_code == ElectionNotNeededError.errno


def test_reassignment_moves_replicas_and_the_data_follows(start_cluster, kafka_admin):
    cluster = start_cluster(3)
    create_topic(cluster.bootstrap_servers, "moving", replication_factor=2)
    values = produce(cluster.bootstrap_servers, "moving", 50)
    replicas = lead(cluster, "moving").replicas
    (spare,) = {1, 2, 3} - set(replicas)
    leaving = lead(cluster, "moving").leader
    staying = next(r for r in replicas if r != leaving)
    admin = kafka_admin(cluster.bootstrap_servers)

    tp = KafkaTopicPartition("moving", 0)
    assert admin.alter_partition_reassignments({tp: [spare, staying]}) == {tp: None}
    after = lead(cluster, "moving")
    assert after.replicas == (spare, staying) and after.isr == (spare, staying)
    assert after.leader == spare  # the old leader left: the first target replica in the ISR leads
    assert admin.list_partition_reassignments() == {}
    assert cluster.call(cluster.cluster.replica_log, leaving, "moving", 0) is None  # its replica is gone
    new_replica = cluster.call(cluster.cluster.replica_log, spare, "moving", 0)
    assert cluster.call(lambda: new_replica.log_end_offset) == len(values)
    assert consume_values(cluster.bootstrap_servers, "moving", len(values)) == values


def test_reassignment_to_a_stopped_broker_stays_in_progress_until_it_returns(start_cluster, kafka_admin):
    cluster = start_cluster(3)
    create_topic(cluster.bootstrap_servers, "waiting", replication_factor=2)
    values = produce(cluster.bootstrap_servers, "waiting", 20)
    replicas = lead(cluster, "waiting").replicas
    (spare,) = {1, 2, 3} - set(replicas)
    keep, drop = replicas
    cluster.acall(cluster.cluster.stop_broker, spare)
    bootstrap = ",".join(
        f"127.0.0.1:{cluster.call(lambda n=n: cluster.cluster.broker(n).endpoints['PLAINTEXT'].port)}" for n in replicas
    )
    admin = kafka_admin(bootstrap)
    tp = KafkaTopicPartition("waiting", 0)

    assert admin.alter_partition_reassignments({tp: [keep, spare]}) == {tp: None}
    ongoing = {tp: {"replicas": [keep, spare, drop], "adding_replicas": [spare], "removing_replicas": [drop]}}
    assert admin.list_partition_reassignments() == ongoing
    assert admin.list_partition_reassignments({"waiting": [0]}) == ongoing
    assert lead(cluster, "waiting").replicas == (keep, spare, drop)

    # Cancelled: back to where it was; a second cancel has nothing to cancel.
    assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
    assert admin.list_partition_reassignments() == {}
    assert set(lead(cluster, "waiting").replicas) == {keep, drop}
    assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}

    # Again, and the broker returns: it catches up, the reassignment completes.
    assert admin.alter_partition_reassignments({tp: [keep, spare]}) == {tp: None}
    cluster.acall(cluster.cluster.start_broker, spare)
    assert admin.list_partition_reassignments() == {}
    assert lead(cluster, "waiting").replicas == (keep, spare)
    replica = cluster.call(cluster.cluster.replica_log, spare, "waiting", 0)
    assert cluster.call(lambda: replica.log_end_offset) == len(values)


def test_reassignment_errors_are_kafkas(start_cluster, kafka_admin):
    cluster = start_cluster(3)
    create_topic(cluster.bootstrap_servers, "checked", replication_factor=2)
    admin = kafka_admin(cluster.bootstrap_servers)
    tp = KafkaTopicPartition("checked", 0)
    for bad in ([1, 1], [1, 9]):  # kafka-python refuses an empty list itself
        assert admin.alter_partition_reassignments({tp: bad}) == {tp: InvalidReplicationAssignmentError}, bad
    missing = KafkaTopicPartition("checked", 5)
    nowhere = KafkaTopicPartition("nowhere", 0)
    assert admin.alter_partition_reassignments({missing: [1], nowhere: [1]}) == {
        missing: UnknownTopicOrPartitionError,
        nowhere: UnknownTopicOrPartitionError,
    }
    response = admin.elect_leaders(0, {"nowhere": [0]}, raise_errors=False)
    (result,) = response.replica_election_results
    assert result.partition_result[0].error_code == UnknownTopicOrPartitionError.errno
    assert result.partition_result[0].error_message == "No such topic as nowhere"


def test_a_reorder_completes_at_once_and_a_preferred_election_follows_it(start_cluster, kafka_admin):
    cluster = start_cluster(3)
    create_topic(cluster.bootstrap_servers, "reorder", replication_factor=3)
    before = lead(cluster, "reorder")
    reordered = list(reversed(before.replicas))
    admin = kafka_admin(cluster.bootstrap_servers)
    tp = KafkaTopicPartition("reorder", 0)
    assert admin.alter_partition_reassignments({tp: reordered}) == {tp: None}
    assert lead(cluster, "reorder").replicas == tuple(reordered)
    assert lead(cluster, "reorder").leader == before.leader  # still in the ISR: it keeps leading
    admin.elect_leaders(0, {"reorder": [0]})
    assert lead(cluster, "reorder").leader == reordered[0]
    # Every partition, none named (confluent-kafka sends null; kafka-python names them all):
    # those that need no election are left out.
    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    cluster.call(cluster.cluster.move_leader, "reorder", 0, reordered[1])
    everything = confluent.elect_leaders(ElectionType.PREFERRED, None).result(TIMEOUT)
    assert everything == {TopicPartition("reorder", 0): None}
    assert confluent.elect_leaders(ElectionType.PREFERRED, None).result(TIMEOUT) == {}


def test_confluent_consumer_validates_its_position_with_offset_for_leader_epoch(start_cluster):
    """KIP-320: after a leader change librdkafka asks the new leader where the epoch it last
    read ended (OffsetForLeaderEpoch) before fetching on — and reads on without a gap."""
    from confluent_kafka import Consumer

    from tests.compat.support import Deadline

    cluster = start_cluster(3)
    create_topic(cluster.bootstrap_servers, "epochs")
    first = produce(cluster.bootstrap_servers, "epochs", 10)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "epochs",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.assign([TopicPartition("epochs", 0, 0)])
        seen: list[bytes] = []
        deadline = Deadline()
        while len(seen) < len(first) and deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                seen.append(message.value())
        assert seen == first
        old = lead(cluster, "epochs")
        new_leader = next(r for r in old.isr if r != old.leader)
        recorders = [cluster.call(lambda n=n: Faults.of(cluster.cluster.broker(n)).recorder) for n in (1, 2, 3)]
        for recorder in recorders:
            cluster.call(recorder.start)
        cluster.call(cluster.cluster.move_leader, "epochs", 0, new_leader)
        second = [b"after %d" % i for i in range(5)]
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for value in second:
            producer.produce("epochs", value=value, partition=0)
        assert producer.flush(TIMEOUT) == 0
        deadline = Deadline()
        while len(seen) < len(first) + len(second) and deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                seen.append(message.value())
        assert seen == first + second
        asked = cluster.call(
            lambda: Faults.of(cluster.cluster.broker(new_leader)).recorder.requests("OffsetForLeaderEpoch")
        )
        assert asked, "the consumer did not validate its position with the new leader"
        for recorder in recorders:
            cluster.call(recorder.stop)
    finally:
        consumer.close()
