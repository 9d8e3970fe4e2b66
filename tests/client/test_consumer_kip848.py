"""KIP-848 membership in the Trio consumer (``group_protocol="consumer"``), against trikafka.

Two members split a topic without a partition owned twice; the one that gives partitions up
is told exactly which (``on_partitions_revoked``) before the other is told of them; commits
carry the member epoch (OffsetCommit v9); ``group.remote.assignor`` reaches the coordinator;
a static member's leave keeps its place; config that mixes the protocols is refused.
"""

from __future__ import annotations

import pytest
import trio

from trikafka.client import NewTopic, TopicPartition, open_admin, open_consumer, open_producer
from trikafka.client.config import ClientConfig
from trikafka.errors import ConfigError
from trikafka.testing import open_test_broker

ALL = {TopicPartition("t", p) for p in range(4)}


class Recorder:
    def __init__(self, name, log):
        self.name, self.log = name, log

    async def on_partitions_revoked(self, partitions):
        self.log.append((self.name, "revoked", frozenset(partitions)))

    def on_partitions_assigned(self, partitions):
        self.log.append((self.name, "assigned", frozenset(partitions)))

    def on_partitions_lost(self, partitions):
        self.log.append((self.name, "lost", frozenset(partitions)))


async def poll_until(consumer, predicate, limit_s=120):
    with trio.fail_after(limit_s):
        while not predicate():
            await consumer.getmany(timeout_ms=200)


async def setup(tb, records=8):
    async with open_admin(tb) as admin:
        await admin.create_topics([NewTopic("t", 4, 1)])
    async with open_producer(tb) as producer:
        for i in range(records):
            await producer.send("t", b"v%d" % i, partition=i % 4)


async def test_two_members_split_the_topic_and_revocation_comes_first(autojump_clock):
    log: list = []
    async with open_test_broker() as tb:
        await setup(tb)
        common = dict(group_id="g", group_protocol="consumer", auto_offset_reset="earliest", enable_auto_commit=False)
        async with open_consumer(tb, client_id="a", **common) as a:
            a.subscribe(["t"], listener=Recorder("a", log))
            await poll_until(a, lambda: a.assignment() == ALL)
            assert log == [("a", "assigned", frozenset(ALL))]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll_until, a, lambda: len(a.assignment()) == 2)
                async with open_consumer(tb, client_id="b", **common) as b:
                    b.subscribe(["t"], listener=Recorder("b", log))
                    await poll_until(b, lambda: len(b.assignment()) == 2)
                    assert a.assignment() | b.assignment() == ALL and not a.assignment() & b.assignment()
                    moved = frozenset(b.assignment())
                    assert ("a", "revoked", moved) in log and ("b", "assigned", moved) in log
                    assert log.index(("a", "revoked", moved)) < log.index(("b", "assigned", moved))
                    assert not [e for e in log if e[1] == "lost"]
                    async with open_admin(tb) as admin:
                        described = (await admin.describe_consumer_groups(["g"]))["g"]
                    assert described.type == "consumer" and len(described.members) == 2
                    assert {m.member_epoch for m in described.members} == {
                        b.group_metadata().generation_id,
                        a.group_metadata().generation_id,
                    }
                    nursery.cancel_scope.cancel()


async def test_commits_carry_the_member_epoch_and_the_remote_assignor_is_used(autojump_clock):
    async with open_test_broker() as tb:
        await setup(tb)
        async with open_consumer(tb, group_id="g", group_protocol="consumer", group_remote_assignor="range",
                                 auto_offset_reset="earliest", enable_auto_commit=False) as c:
            c.subscribe(["t"])
            received = []
            with trio.fail_after(60):
                while len(received) < 8:
                    batches = await c.getmany(timeout_ms=500)
                    received += [r for records in batches.values() for r in records]
            assert c.group_metadata().generation_id > 0
            await c.commit()
            assert await c.committed(sorted(ALL)) == {tp: 2 for tp in ALL}
            async with open_admin(tb) as admin:
                described = (await admin.describe_consumer_groups(["g"]))["g"]
            assert described.protocol == "range"  # the assignor the coordinator used
        async with open_admin(tb) as admin:  # a dynamic member's close leaves the group
            assert (await admin.describe_consumer_groups(["g"]))["g"].members == ()


async def test_a_static_members_leave_keeps_its_place(autojump_clock):
    async with open_test_broker() as tb:
        await setup(tb)
        common = dict(group_id="g", group_protocol="consumer", group_instance_id="i-1", auto_offset_reset="earliest")
        async with open_consumer(tb, **common) as c:
            c.subscribe(["t"])
            await poll_until(c, lambda: c.assignment() == ALL)
        async with open_admin(tb) as admin:
            members = (await admin.describe_consumer_groups(["g"]))["g"].members
        assert [m.group_instance_id for m in members] == ["i-1"]  # epoch -2: kept for session.timeout.ms
        async with open_consumer(tb, **common) as c:
            c.subscribe(["t"])
            await poll_until(c, lambda: c.assignment() == ALL)


def test_config_that_mixes_the_protocols_is_refused():
    with pytest.raises(ConfigError, match="group.remote.assignor.*group.protocol=consumer"):
        ClientConfig.for_role("consumer", group_id="g", group_remote_assignor="range")
    with pytest.raises(ConfigError, match="partition.assignment.strategy.*group.protocol=classic"):
        ClientConfig.for_role(
            "consumer", group_id="g", group_protocol="consumer", partition_assignment_strategy="range"
        )
    with pytest.raises(ConfigError, match="group.protocol"):
        ClientConfig.for_role("consumer", group_protocol="modern")


async def test_a_fenced_member_loses_its_partitions_and_joins_again(autojump_clock):
    log: list = []
    async with open_test_broker() as tb:
        await setup(tb)
        async with open_consumer(tb, group_id="g", group_protocol="consumer", auto_offset_reset="earliest") as c:
            c.subscribe(["t"], listener=Recorder("c", log))
            await poll_until(c, lambda: c.assignment() == ALL)
            tb.faults.inject_error("CONSUMER_GROUP_HEARTBEAT", "FENCED_MEMBER_EPOCH", count=1)
            await poll_until(c, lambda: ("c", "lost", frozenset(ALL)) in log)  # the heartbeat task's next answer
            await poll_until(c, lambda: c.assignment() == ALL)
        assert log == [
            ("c", "assigned", frozenset(ALL)), ("c", "lost", frozenset(ALL)), ("c", "assigned", frozenset(ALL)),
            ("c", "revoked", frozenset(ALL)),  # the close
        ]


async def test_consume_transform_produce_exactly_once_with_kip848_membership(autojump_clock):
    """The pipeline shape of examples/trio_pipeline.py with a KIP-848 member: offsets go into
    the transaction with the member epoch (TxnOffsetCommit), the output is read once."""
    async with open_test_broker() as tb:
        await setup(tb)
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("out", 1, 1)])
        async with (
            open_consumer(tb, group_id="eos", group_protocol="consumer", isolation_level="read_committed",
                          enable_auto_commit=False, auto_offset_reset="earliest") as consumer,
            open_producer(tb, transactional_id="eos-848") as producer,
        ):
            consumer.subscribe(["t"])
            done = 0
            with trio.fail_after(120):
                while done < 8:
                    batches = await consumer.getmany(timeout_ms=500)
                    if not batches:
                        continue
                    async with producer.transaction():
                        for records in batches.values():
                            for record in records:
                                await producer.send("out", record.value.upper(), partition=0)
                        offsets = {tp: records[-1].offset + 1 for tp, records in batches.items()}
                        await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
                    done += sum(len(r) for r in batches.values())
        async with open_consumer(tb, group_id="eos", group_protocol="consumer", enable_auto_commit=False) as again:
            assert await again.committed(sorted(ALL)) == {tp: 2 for tp in ALL}
        async with open_consumer(tb, isolation_level="read_committed", auto_offset_reset="earliest") as reader:
            reader.assign([TopicPartition("out", 0)])
            out = []
            for _ in range(4):
                batches = await reader.getmany(timeout_ms=500)
                out += [r.value for rs in batches.values() for r in rs]
        assert sorted(out) == sorted(b"V%d" % i for i in range(8))


async def test_a_pattern_is_sent_as_the_regex_and_a_topic_created_later_joins(autojump_clock):
    """``subscribe(pattern=...)``: the heartbeat carries SubscribedTopicRegex (the coordinator
    resolves it, Kafka 4), never the names the client matched; a matching topic created later
    is assigned without a new subscribe."""
    async with open_test_broker() as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("orders-eu", 2, 1), NewTopic("audit", 1, 1)])
        tb.faults.recorder.start()
        async with open_consumer(tb, group_id="g", group_protocol="consumer", client_id="rx") as c:
            c.subscribe(pattern=r"orders-.*")
            eu = {TopicPartition("orders-eu", p) for p in range(2)}
            await poll_until(c, lambda: c.assignment() == eu)
            async with open_admin(tb) as admin:
                await admin.create_topics([NewTopic("orders-us", 1, 1)])
            await poll_until(c, lambda: c.assignment() == eu | {TopicPartition("orders-us", 0)})
            c.unsubscribe()
            c.subscribe(["audit"])  # back to names: the regex is cleared ("")
            await poll_until(c, lambda: c.assignment() == {TopicPartition("audit", 0)})
        heartbeats = [r.body for r in tb.faults.recorder.requests("ConsumerGroupHeartbeat", client_id="rx")]
        joined = [h for h in heartbeats if h.member_epoch >= 0]
        regexes = [h.subscribed_topic_regex for h in joined if h.subscribed_topic_regex is not None]
        assert regexes[0] == "orders-.*" and regexes[-1] == ""
        for h in joined:
            if h.subscribed_topic_regex == "orders-.*":
                assert list(h.subscribed_topic_names) == []  # never the client-side matches
