"""confluent-kafka consumers with ``group.protocol=consumer`` (KIP-848) over real sockets.

Two consumers share a topic's partitions through the coordinator's ``uniform`` assignor;
one leaves (``close()``: its offsets committed, then a leave heartbeat, epoch -1); the other
is given every partition — only after the leaver's revocation — and every record produced is
consumed exactly once across the two. The broker's heartbeat interval is shortened so the
rebalance takes a few hundred milliseconds, not Kafka's 5 s.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from .support import Deadline  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.trikafka(config={
        "group.consumer.heartbeat.interval.ms": 500,
        "group.consumer.min.heartbeat.interval.ms": 500,
    }),
]

TOPIC, PARTITIONS, RECORDS = "kip848", 4, 400
TIMEOUT = 30


def _produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(TOPIC, key=str(i).encode(), value=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT) == 0


class Member:
    """A consumer polling in its own thread, recording what it consumed and was assigned."""

    def __init__(self, bootstrap: str, name: str) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": "kip848-group",
            "group.protocol": "consumer",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
        })
        self.consumed: list[int] = []
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.assignment: set[int] = set()
        self.thread = threading.Thread(target=self._run, name=name)

    def _run(self) -> None:
        self.consumer.subscribe([TOPIC])
        while not self.stop.is_set():
            message = self.consumer.poll(0.1)
            self.assignment = {tp.partition for tp in self.consumer.assignment()}
            if message is None:
                continue
            if message.error():
                self.errors.append(str(message.error()))
                continue
            self.consumed.append(int(message.value()))
        self.consumer.close()  # commits, then leaves (member epoch -1)


def wait_for(predicate, what: str) -> None:
    deadline = Deadline(TIMEOUT)
    while not predicate():
        assert deadline, f"timed out waiting for {what}"
        threading.Event().wait(0.05)


def share_then_take_all(bootstrap: str) -> tuple[Member, Member]:
    """Two members split the topic 2 + 2; b leaves; a gets all four; every record is read once."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(TIMEOUT)
    _produce(bootstrap, 0, RECORDS // 2)
    a, b = Member(bootstrap, "member-a"), Member(bootstrap, "member-b")
    a.thread.start()
    b.thread.start()
    try:
        wait_for(lambda: len(a.assignment) == 2 and len(b.assignment) == 2, "a 2 + 2 split")
        assert a.assignment | b.assignment == set(range(PARTITIONS))
        wait_for(lambda: len(a.consumed) + len(b.consumed) >= RECORDS // 2, "the first half")
        b.stop.set()
        b.thread.join(TIMEOUT)
        assert not b.thread.is_alive()
        wait_for(lambda: a.assignment == set(range(PARTITIONS)), "a to own every partition")
        _produce(bootstrap, RECORDS // 2, RECORDS // 2)
        wait_for(lambda: len(set(a.consumed) | set(b.consumed)) >= RECORDS, "every record")
        group = admin.describe_consumer_groups(["kip848-group"])["kip848-group"].result(TIMEOUT)
        assert [m.client_id for m in group.members] == ["member-a"]
    finally:
        for member in (a, b):
            member.stop.set()
            member.thread.join(TIMEOUT)
    counts = Counter(a.consumed + b.consumed)
    assert set(counts) == set(range(RECORDS))
    assert [value for value, n in counts.items() if n > 1] == []
    assert a.errors == [] and b.errors == []
    return a, b


def test_two_consumers_share_then_one_takes_all_after_the_other_leaves(kafka_broker):
    share_then_take_all(kafka_broker.bootstrap_servers)
    # The broker's view: a consumer group, one member left, reconciled (after close, Empty).
    snapshot = kafka_broker.wait_for_group_state("kip848-group", "Empty", members=0)
    assert snapshot.generation_id >= 3  # a joined, b joined, b left, a left
    # The consumer protocol, not the classic one: heartbeats, no JoinGroup; b's last one left.
    heartbeats = kafka_broker.recorded("ConsumerGroupHeartbeat")
    assert heartbeats and not kafka_broker.recorded("JoinGroup")
    assert [h.body.member_epoch for h in heartbeats if h.client_id == "member-b"][-1] == -1
    commits = kafka_broker.recorded("OffsetCommit")
    assert commits and min(c.version for c in commits) >= 9


def test_the_same_on_a_three_broker_cluster(kafka_cluster):
    """The group's coordinator is whichever broker owns its __consumer_offsets partition;
    the others answer NOT_COORDINATOR and the consumers find it."""
    share_then_take_all(kafka_cluster(brokers=3).bootstrap_servers)
