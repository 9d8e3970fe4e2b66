"""A classic confluent-kafka consumer and a ``group.protocol=consumer`` one in the same group,
over real sockets (Kafka 4's online migration, ``group.consumer.migration.policy`` bidirectional).

The classic consumer forms a classic group and the consumer-protocol one joins it, which
upgrades the group to a consumer group that keeps the classic member (it goes on with
JoinGroup, SyncGroup and Heartbeat; the coordinator assigns for both) — or the other way
round: the classic consumer joins a consumer group as a classic member. Both consume; then one leaves and
the other gets every partition: if the classic one leaves, the group stays a consumer group;
if the consumer-protocol one leaves, the group is downgraded to a classic group and
rebalances. Every record produced is consumed, none twice.
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
        "group.initial.rebalance.delay.ms": 0,
    }),
]

TOPIC, GROUP, PARTITIONS, RECORDS = "migrating", "migrating-group", 4, 400
TIMEOUT = 30


def _produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(TOPIC, key=str(i).encode(), value=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT) == 0


class Member:
    """A consumer polling in its own thread, recording what it consumed and was assigned."""

    def __init__(self, bootstrap: str, name: str, protocol: str) -> None:
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "group.protocol": protocol,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
        }
        if protocol == "classic":
            config["heartbeat.interval.ms"] = 500
        self.consumer = Consumer(config)
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
        self.consumer.close()  # commits, then leaves (LeaveGroup, or a heartbeat with epoch -1)


def wait_for(predicate, what: str) -> None:
    deadline = Deadline(TIMEOUT)
    while not predicate():
        assert deadline, f"timed out waiting for {what}"
        threading.Event().wait(0.05)


def group_type(admin: AdminClient) -> str:
    listed = admin.list_consumer_groups().result(TIMEOUT)
    (group,) = [g for g in listed.valid if g.group_id == GROUP]
    return str(group.type).split(".")[-1].lower()


@pytest.mark.parametrize("first", ["classic", "consumer"])
@pytest.mark.parametrize("leaver", ["classic", "consumer"])
def test_a_classic_and_a_consumer_protocol_member_share_a_group_then_one_takes_all(kafka_broker, first, leaver):
    bootstrap = kafka_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(TIMEOUT)
    _produce(bootstrap, 0, RECORDS // 2)
    old, new = Member(bootstrap, "classic-member", "classic"), Member(bootstrap, "consumer-member", "consumer")
    members = {"classic": old, "consumer": new}
    second = "consumer" if first == "classic" else "classic"
    members[first].thread.start()
    try:
        wait_for(
            lambda: members[first].assignment == set(range(PARTITIONS)), f"the {first} member to own every partition"
        )
        assert group_type(admin) == first
        members[second].thread.start()
        wait_for(lambda: old.assignment and new.assignment and len(old.assignment) + len(new.assignment) == PARTITIONS,
                 "the partitions split between both members")
        assert not old.assignment & new.assignment
        assert group_type(admin) == "consumer"  # upgraded online, or joined by a classic member
        wait_for(lambda: len(set(old.consumed) | set(new.consumed)) >= RECORDS // 2, "the first half")
        going, staying = members[leaver], members["consumer" if leaver == "classic" else "classic"]
        going.stop.set()
        going.thread.join(TIMEOUT)
        assert not going.thread.is_alive()
        wait_for(lambda: staying.assignment == set(range(PARTITIONS)), "the other member to own every partition")
        # The classic member left: still a consumer group. The consumer-protocol one left: the
        # group went back to classic.
        assert group_type(admin) == ("consumer" if leaver == "classic" else "classic")
        _produce(bootstrap, RECORDS // 2, RECORDS // 2)
        wait_for(lambda: len(set(old.consumed) | set(new.consumed)) >= RECORDS, "every record")
    finally:
        for member in (old, new):
            member.stop.set()
            if member.thread.is_alive():
                member.thread.join(TIMEOUT)
    counts = Counter(old.consumed + new.consumed)
    assert set(counts) == set(range(RECORDS))
    assert [value for value, n in counts.items() if n > 1] == []
    assert old.errors == [] and new.errors == []
    # Each spoke its own protocol throughout.
    assert any(r.client_id == "classic-member" for r in kafka_broker.recorded("JoinGroup"))
    assert {h.client_id for h in kafka_broker.recorded("ConsumerGroupHeartbeat")} == {"consumer-member"}
