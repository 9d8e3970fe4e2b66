"""Share consumers joining a backlog bigger than a share partition's in-flight window
(``group.share.partition.max.record.locks``), in virtual time (``autojump_clock``).

Found with the share-group scale benchmark: 30 members joining after 20,000 records (8
partitions, so 2,500 a partition against the default 2,000 locks) never received them all.
A fetch that met the full window in the middle of what it read took the batches after that
point for gaps and archived their records: never delivered, while every member kept polling.
"""

from __future__ import annotations

from collections import Counter

import trio

from trikafka.client import open_admin, open_producer, open_share_consumer
from trikafka.client.admin_types import AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic, OpType
from trikafka.testing import open_test_broker

FAST = {"group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500,
        "group.share.assignment.interval.ms": 0, "group.share.partition.max.record.locks": 100}
PARTITIONS = 3
PER_PARTITION = 250  # records, each its own batch: well past the 100-record window


async def test_members_joining_a_backlog_past_the_lock_window_get_every_record_once(autojump_clock):
    async with open_test_broker(**FAST) as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("q", PARTITIONS, 1)])
            await admin.incremental_alter_configs({ConfigResource(ConfigResourceType.GROUP, "g"): [
                AlterConfigOp("share.auto.offset.reset", "earliest", OpType.SET)]})
        async with open_producer(tb) as producer:
            for i in range(PER_PARTITION):
                for partition in range(PARTITIONS):
                    await producer.send("q", b"%d" % i, partition=partition)
        delivered: Counter = Counter()
        everything = trio.Event()

        async def member() -> None:
            async with open_share_consumer(tb, group_id="g", max_poll_records=500) as consumer:
                consumer.subscribe("q")
                while not everything.is_set():
                    for record in await consumer.poll(200):  # implicit mode: the next poll accepts them
                        assert record.delivery_count == 1
                        delivered[(record.partition, record.offset)] += 1
                    if len(delivered) == PARTITIONS * PER_PARTITION:
                        everything.set()

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(member)
            with trio.fail_after(300):  # virtual seconds; without the fix: 100 a partition, ever
                await everything.wait()
        assert delivered == Counter({(p, o): 1 for p in range(PARTITIONS) for o in range(PER_PARTITION)})
        for partition in range(PARTITIONS):
            snapshot = await tb.broker.wait_for_share_records("g", "q", partition, state="Acknowledged",
                                                              at_least=PER_PARTITION)
            assert (snapshot.start_offset, snapshot.totals["Archived"]) == (PER_PARTITION, 0)
