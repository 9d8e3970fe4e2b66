"""The scale section's share-group curve (see benchmarks.scale).

``share``  fetch rate vs members of a share group (KIP-932): a topic of ``PARTITIONS``
           partitions receives ``RECORDS`` small records; ``members`` Trio share consumers
           (``open_share_consumer``, implicit acknowledgement, on the in-memory transport) poll
           until together they were delivered every record once. The broker and the members
           share one process under trio's MockClock (``autojump_threshold=0``: waits cost no
           time), so the CPU seconds are the work of delivering and acknowledging the records
           plus the members' overhead; the figure is records per CPU second and CPU ms per
           1,000 records, which should stay flat as members are added (each record is still
           fetched, locked and acknowledged once).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import trio
import trio.testing

from benchmarks import scale_report

__all__ = ["SHARE_MEMBERS", "share_curve"]

SHARE_MEMBERS = (1, 3, 10, 30, 100)
PARTITIONS = 8
RECORDS = 20_000
FAST = {"group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500,
        "group.share.assignment.interval.ms": 0}


async def _share(members: int) -> dict:
    from trikafka.client import open_admin, open_producer, open_share_consumer
    from trikafka.client.admin_types import AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic, OpType
    from trikafka.testing import open_test_broker

    async with open_test_broker(**FAST) as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("shared", PARTITIONS, 1)])
            await admin.incremental_alter_configs({ConfigResource(ConfigResourceType.GROUP, "g"): [
                AlterConfigOp("share.auto.offset.reset", "earliest", OpType.SET)]})
        delivered: set[tuple[int, int]] = set()
        done = trio.Event()
        polls = 0
        assigned: set[int] = set()
        everyone_assigned = trio.Event()

        async def member(i: int) -> None:
            nonlocal polls
            async with open_share_consumer(tb, group_id="g", max_poll_records=500) as consumer:
                consumer.subscribe("shared")
                while not done.is_set():
                    records = await consumer.poll(200)
                    polls += 1
                    delivered.update((r.partition, r.offset) for r in records)
                    if consumer.assignment and i not in assigned:
                        assigned.add(i)
                        if len(assigned) == members:
                            everyone_assigned.set()
                    if len(delivered) >= RECORDS:
                        done.set()

        async with trio.open_nursery() as nursery:
            for i in range(members):
                nursery.start_soon(member, i)
            with trio.fail_after(600):  # virtual seconds
                await everyone_assigned.wait()  # every member polls its share before a record exists
            started, cpu, virtual = time.perf_counter(), time.process_time(), trio.current_time()
            async with open_producer(tb) as producer:
                for i in range(RECORDS):
                    await producer.enqueue("shared", b"%08d" % i, partition=i % PARTITIONS)
                await producer.flush()
            try:
                with trio.fail_after(3_600):  # virtual seconds
                    await done.wait()
            except trio.TooSlowError:
                raise RuntimeError(f"{members} members: {len(delivered)} of {RECORDS} records delivered "
                                   "in an hour (virtual)") from None
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu
            virtual = trio.current_time() - virtual
            nursery.cancel_scope.cancel()
    return {"members": members, "records": len(delivered), "wall_s": wall, "cpu_s": cpu, "virtual_s": virtual,
            "records_per_cpu_s": len(delivered) / cpu, "cpu_ms_per_1k": cpu * 1e6 / len(delivered), "polls": polls}


def share_curve(log: Callable[[str], None], sizes: tuple[int, ...] = SHARE_MEMBERS) -> dict:
    curve = {
        "id": "share-groups",
        "title": f"Share group fetch rate vs members (KIP-932, Trio share consumers; {RECORDS:,} records "
                 f"on {PARTITIONS} partitions; MockClock)",
        "x": "members",
        "columns": ["records_per_cpu_s", "cpu_ms_per_1k", "cpu_s", "wall_s", "virtual_s", "polls"],
        "labels": {"members": "members", "records_per_cpu_s": "records per CPU s",
                   "cpu_ms_per_1k": "CPU ms per 1,000 records", "cpu_s": "CPU s", "wall_s": "wall s",
                   "virtual_s": "virtual s", "polls": "polls"},
        "plot": ["records_per_cpu_s", "cpu_ms_per_1k"], "points": [],
    }
    quiet = logging.getLogger("trikafka")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # members cancelled at the end warn that their client closed
    try:
        for members in sizes:
            point = trio.run(_share, members, clock=trio.testing.MockClock(autojump_threshold=0))
            curve["points"].append(point)
            log(f"  scale share {members:>4} members: {point['records_per_cpu_s']:,.0f} records per CPU s, "
                f"{point['cpu_ms_per_1k']:.1f} CPU ms per 1,000, {point['polls']} polls")
    except Exception as exc:  # noqa: BLE001 - recorded and shown
        curve["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        quiet.setLevel(level)
    curve["verdicts"] = {  # the cost of a record should not grow with the members that share it
        "cpu_ms_per_1k": scale_report.growth_verdict(curve["points"], "members", "cpu_ms_per_1k", "flat", 20.0),
    }
    return curve
