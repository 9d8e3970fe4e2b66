"""confluent-kafka's ShareConsumer (KIP-932) against a broker over real sockets.

Each test drives the share-group behaviour a queue consumer relies on: records locked to one
member while it holds them, RELEASE handing a record out again with its delivery count one
higher, REJECT never handing it out again, an unacknowledged record coming back when its lock
expires, and ``share.auto.offset.reset`` set on the GROUP resource with AdminClient. Waits are
polls of the consumer under a deadline (the consumer's poll is the event), never sleeps.

The broker shortens the share heartbeat (500 ms) and assigns at once
(``group.share.assignment.interval.ms=0``), so a member gets its partition within a heartbeat;
the lowest record lock duration is lowered so a group may ask for a 1 s lock.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests.compat.support import Deadline
from trikafka.testing import ThreadedBroker

pytestmark = [
    pytest.mark.compat,
    pytest.mark.trikafka(config={
        "group.share.heartbeat.interval.ms": 500,
        "group.share.min.heartbeat.interval.ms": 500,
        "group.share.assignment.interval.ms": 0,
        "group.share.min.record.lock.duration.ms": 100,
    }),
]

TIMEOUT = 30


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"queue-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT)
    return name


def produce(bootstrap: str, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in values:
        producer.produce(topic, value=str(i).encode(), partition=0)
        producer.flush(TIMEOUT)  # one batch per record: a member may take any single one
    assert producer.flush(TIMEOUT) == 0


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)


def consumer(bootstrap: str, group: str, topic: str, *, explicit: bool = False, max_records: int = 500,
             name: str = "share") -> ShareConsumer:
    c = ShareConsumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "share.acknowledgement.mode": "explicit" if explicit else "implicit",
        "max.poll.records": max_records,
    })
    c.subscribe([topic])
    return c


def poll_until(c: ShareConsumer, enough, what: str) -> list:
    """Poll ``c`` until ``enough(records so far)``; every record polled is returned."""
    got: list = []
    deadline = Deadline(TIMEOUT)
    while not enough(got):
        assert deadline, f"timed out waiting for {what}; got {[(m.offset(), m.delivery_count()) for m in got]}"
        for m in c.poll(0.5):
            assert m.error() is None, m.error()
            got.append(m)
    return got


def test_records_of_one_partition_go_to_one_member_each(kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = new_topic(bootstrap), "several-members"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, topic, range(30))
    a = consumer(bootstrap, group, topic, explicit=True, max_records=5, name="a")
    b = consumer(bootstrap, group, topic, explicit=True, max_records=5, name="b")
    try:
        held_by_a = poll_until(a, lambda got: got, "a's first records")
        held_by_b = poll_until(b, lambda got: got, "b's first records")
        # Both members hold partition 0; what a holds is locked to a, so b gets other records.
        assert {m.offset() for m in held_by_a}.isdisjoint(m.offset() for m in held_by_b)
        kafka_broker.wait_for_share_group_state(group, "Stable", members=2)
        described = kafka_broker.thread.call(lambda: kafka_broker.broker.core.shares.groups[group])
        assert [m.assignment for m in described.members.values()] == [{topic: frozenset({0})}] * 2
        by_member: dict[str, set[int]] = {}
        for record in kafka_broker.share_partition(group, topic, 0).records:
            if record.state == "Acquired":
                by_member.setdefault(record.member_id, set()).add(record.offset)
        assert sorted(by_member.values(), key=min) == sorted(
            [{m.offset() for m in held_by_a}, {m.offset() for m in held_by_b}], key=min)
        seen = [m.offset() for m in held_by_a + held_by_b]
        for c, held in ((a, held_by_a), (b, held_by_b)):
            for m in held:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(TIMEOUT)
        # The rest, across both members: every record delivered once in all.
        while len(seen) < 30:
            for c in (a, b):
                for m in c.poll(0.2):
                    assert m.error() is None, m.error()
                    seen.append(m.offset())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                c.commit_sync(TIMEOUT)
        assert sorted(seen) == list(range(30))
    finally:
        a.close()
        b.close()
    done = kafka_broker.wait_for_share_records(group, topic, 0, state="Acknowledged", at_least=30)
    assert done.start_offset == 30 and done.records == ()


def test_release_redelivers_with_the_delivery_count_one_higher(kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = new_topic(bootstrap), "release"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, topic, range(3))
    c = consumer(bootstrap, group, topic, explicit=True)
    try:
        first = poll_until(c, lambda got: len(got) >= 3, "three records")
        assert [(m.offset(), m.delivery_count()) for m in first] == [(0, 1), (1, 1), (2, 1)]
        c.acknowledge(first[0], AcknowledgeType.RELEASE)
        for m in first[1:]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync(TIMEOUT)
        again = poll_until(c, lambda got: got, "the released record again")
        assert [(m.offset(), m.delivery_count(), m.value()) for m in again] == [(0, 2, b"0")]
        c.acknowledge(again[0], AcknowledgeType.ACCEPT)
        c.commit_sync(TIMEOUT)
    finally:
        c.close()


def test_reject_is_never_delivered_again(kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = new_topic(bootstrap), "reject"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, topic, range(3))
    c = consumer(bootstrap, group, topic, explicit=True)
    try:
        first = poll_until(c, lambda got: len(got) >= 3, "three records")
        c.acknowledge(first[0], AcknowledgeType.REJECT)
        c.acknowledge(first[1], AcknowledgeType.RELEASE)
        c.acknowledge(first[2], AcknowledgeType.ACCEPT)
        c.commit_sync(TIMEOUT)
        produce(bootstrap, topic, range(3, 5))
        rest = poll_until(c, lambda got: {m.offset() for m in got} >= {1, 3, 4}, "the released and new records")
        assert 0 not in {m.offset() for m in rest}
        for m in rest:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync(TIMEOUT)
    finally:
        c.close()
    done = kafka_broker.wait_for_share_records(group, topic, 0, state="Acknowledged", at_least=4)
    assert (done.start_offset, done.count("Archived")) == (5, 1)


def test_an_unacknowledged_record_comes_back_when_its_lock_expires(kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = new_topic(bootstrap), "lock-expiry"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.record.lock.duration.ms": "1000"})
    produce(bootstrap, topic, range(1))
    holder = consumer(bootstrap, group, topic, explicit=True, name="holder")
    other = consumer(bootstrap, group, topic, explicit=True, name="other")
    try:
        held = poll_until(holder, lambda got: got, "the record, by the holder")
        assert [(m.offset(), m.delivery_count()) for m in held] == [(0, 1)]
        # The holder never acknowledges: after the lock (1 s) the record is the other's.
        again = poll_until(other, lambda got: got, "the record after its lock expired")
        assert [(m.offset(), m.delivery_count()) for m in again] == [(0, 2)]
        other.acknowledge(again[0], AcknowledgeType.ACCEPT)
        other.commit_sync(TIMEOUT)
    finally:
        other.close()
        holder.close()


def test_auto_offset_reset_earliest_set_on_the_group_resource(kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap)
    produce(bootstrap, topic, range(5))  # before any share group reads the topic
    set_group_configs(bootstrap, "from-earliest", {"share.auto.offset.reset": "earliest"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.GROUP, "from-earliest")
    described = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert described["share.auto.offset.reset"].value == "earliest"
    c = consumer(bootstrap, "from-earliest", topic)
    try:
        got = poll_until(c, lambda got: len(got) >= 5, "the five earlier records")
        assert sorted(m.offset() for m in got) == [0, 1, 2, 3, 4]
    finally:
        c.close()


def test_a_group_without_the_config_starts_at_the_end(kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap)
    produce(bootstrap, topic, range(5))
    c = consumer(bootstrap, "from-latest", topic)
    try:
        poll_until(c, lambda got: kafka_broker.thread.call(
            lambda: ("from-latest", topic, 0) in kafka_broker.broker.core.shares.partitions), "the share partition")
        produce(bootstrap, topic, range(5, 7))
        got = poll_until(c, lambda got: len(got) >= 2, "the two later records")
        assert sorted(m.offset() for m in got) == [5, 6]
    finally:
        c.close()


def test_the_delivery_count_limit_archives_and_copies_to_the_dead_letter_queue(kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = new_topic(bootstrap), "dlq-group"
    dlq = "dlq." + topic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(dlq, 1, 1)])[dlq].result(TIMEOUT)
    set_group_configs(bootstrap, group, {
        "share.auto.offset.reset": "earliest", "share.delivery.count.limit": "2",
        "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.copy.record.enable": "true",
    })
    produce(bootstrap, topic, range(2))
    c = consumer(bootstrap, group, topic, explicit=True)
    try:
        for delivery in (1, 2):  # released twice: the limit (2) is reached, the record archived
            got = poll_until(c, lambda got: any(m.offset() == 0 for m in got), f"delivery {delivery}")
            for m in got:
                if m.offset() == 0:
                    assert m.delivery_count() == delivery
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                else:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(TIMEOUT)
        produce(bootstrap, topic, range(2, 3))
        later = poll_until(c, lambda got: any(m.offset() == 2 for m in got), "the next record")
        assert 0 not in {m.offset() for m in later}
        for m in later:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync(TIMEOUT)
    finally:
        c.close()
    kafka_broker.wait_for_high_watermark(dlq, 0, at_least=1)
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-reader", "auto.offset.reset": "earliest"})
    try:
        reader.subscribe([dlq])
        deadline = Deadline(TIMEOUT)
        message = None
        while message is None or message.error() is not None:
            assert deadline, "no dead letter read"
            message = reader.poll(0.5)
        headers = {k: v.decode() for k, v in message.headers()}
        assert message.value() == b"0"
        assert headers == {
            "__dlq.errors.topic": topic, "__dlq.errors.partition": "0", "__dlq.errors.offset": "0",
            "__dlq.errors.group": group, "__dlq.errors.delivery.count": "2",
            "__dlq.errors.message": "Offset delivery count exceeded the threshold.",
        }
    finally:
        reader.close()


def test_a_restart_on_a_data_dir_keeps_what_was_acknowledged(tmp_path):
    config = {"log.dirs": str(tmp_path), "group.share.heartbeat.interval.ms": 500,
              "group.share.min.heartbeat.interval.ms": 500, "group.share.assignment.interval.ms": 0}
    with ThreadedBroker(config) as first:
        bootstrap = first.bootstrap_servers
        topic, group = new_topic(bootstrap), "durable"
        set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
        produce(bootstrap, topic, range(5))
        c = consumer(bootstrap, group, topic, explicit=True)
        try:
            got = poll_until(c, lambda got: len(got) >= 5, "five records")
            for m in got:
                c.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 3 else AcknowledgeType.RELEASE)
            c.commit_sync(TIMEOUT)
        finally:
            c.close()
    with ThreadedBroker(config) as second:
        c = consumer(second.bootstrap_servers, group, topic, explicit=True)
        try:
            got = poll_until(c, lambda got: len(got) >= 2, "the two released records")
            assert sorted((m.offset(), m.delivery_count()) for m in got) == [(3, 2), (4, 2)]
            for m in got:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(TIMEOUT)
        finally:
            c.close()


def test_a_three_broker_cluster_serves_each_share_partition_at_its_leader(kafka_cluster):
    cluster = kafka_cluster(brokers=3)
    bootstrap = cluster.bootstrap_servers
    topic, group = new_topic(bootstrap, partitions=3), "cluster-share"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        producer.produce(topic, value=str(i).encode(), partition=i % 3)
    assert producer.flush(TIMEOUT) == 0
    c = consumer(bootstrap, group, topic)
    try:
        got = poll_until(c, lambda got: len(got) >= 30, "every record of the three partitions")
        assert sorted(int(m.value()) for m in got) == list(range(30))
        c.commit_sync(TIMEOUT)
    finally:
        c.close()


def test_read_committed_delivers_no_aborted_records(kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = new_topic(bootstrap), "committed-only"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "share-txn"})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted", partition=0)
    producer.flush(TIMEOUT)
    producer.abort_transaction(TIMEOUT)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed", partition=0)
    producer.commit_transaction(TIMEOUT)
    c = consumer(bootstrap, group, topic)
    try:
        got = poll_until(c, lambda got: got, "the committed record")
        assert [m.value() for m in got] == [b"committed"]
        c.commit_sync(TIMEOUT)
    finally:
        c.close()
    # Every offset is done: the aborted record and both markers archived, the committed one accepted.
    done = kafka_broker.wait_for_share_records(group, topic, 0, state="Acknowledged", at_least=1)
    assert (done.start_offset, done.records, done.totals) == (4, (), {"Acknowledged": 1, "Archived": 3})


def test_a_lost_share_session_is_opened_again(kafka_broker):
    """A fault on ShareFetch (SHARE_SESSION_NOT_FOUND, as after a broker restart): the consumer
    opens a new session and the records still arrive, each once."""
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = new_topic(bootstrap), "session-lost"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, topic, range(3))
    kafka_broker.inject_error("ShareFetch", "SHARE_SESSION_NOT_FOUND", count=1)
    c = consumer(bootstrap, group, topic)
    try:
        got = poll_until(c, lambda got: len(got) >= 3, "three records")
        assert sorted(m.offset() for m in got) == [0, 1, 2]
        c.commit_sync(TIMEOUT)
    finally:
        c.close()
    assert kafka_broker.faults == []  # the fault was used
    kafka_broker.wait_for_share_records(group, topic, 0, state="Acknowledged", at_least=3)
