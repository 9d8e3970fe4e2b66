"""Client-side incremental fetch sessions (KIP-227): the handler's rules, then on the wire.

The consumer opens a session with its first (full) Fetch and from then on names only the
partitions whose position moved; an idle partition stays in the broker's session without being
named. A session error makes the next Fetch full again, and nothing is lost or read twice.
"""

from __future__ import annotations

import trio
from kio.schema.errors import ErrorCode

from trikafka.client import NewTopic, TopicPartition, open_admin, open_consumer, open_producer
from trikafka.client.fetch_session import FetchSessionHandler
from trikafka.testing import open_test_broker

P = [TopicPartition("t", p) for p in range(4)]


def test_full_then_incremental_then_reset():
    handler = FetchSessionHandler()
    assert handler.build({P[0]: 0, P[1]: 0}) == (0, 0, {P[0]: 0, P[1]: 0}, [])
    assert handler.handle_response(0, 77)
    # position of P[0] moved, P[1] did not, P[2] is new: name P[0] and P[2] only
    assert handler.build({P[0]: 5, P[1]: 0, P[2]: 0}) == (77, 1, {P[0]: 5, P[2]: 0}, [])
    assert handler.handle_response(0, 77)
    assert handler.build({P[0]: 5, P[2]: 0}) == (77, 2, {}, [P[1]])  # P[1] forgotten
    assert not handler.handle_response(ErrorCode.invalid_fetch_session_epoch, 0)  # dropped: start over
    assert handler.build({P[0]: 5}) == (77, 0, {P[0]: 5}, [])  # full, replacing session 77
    assert handler.handle_response(0, 0)  # the broker kept no session: full again next time
    assert handler.build({P[0]: 6}) == (0, 0, {P[0]: 6}, [])


def test_the_epoch_wraps_to_one():
    handler = FetchSessionHandler()
    handler.build({P[0]: 0})
    handler.handle_response(0, 9)
    handler.epoch = 2**31 - 1
    handler.build({P[0]: 0})
    handler.handle_response(0, 9)
    assert handler.epoch == 1


async def test_on_the_wire_only_moved_partitions_are_named(autojump_clock):
    async with open_test_broker() as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("t", 4, 1)])
        tb.faults.recorder.start()
        async with (
            open_producer(tb) as producer,
            open_consumer(tb, auto_offset_reset="earliest", client_id="reader") as consumer,
        ):
            consumer.assign(P)
            received = []
            for i in range(6):
                await producer.send("t", b"v%d" % i, partition=0)  # only partition 0 moves
                with trio.fail_after(30):
                    while len(received) < i + 1:
                        batches = await consumer.getmany(timeout_ms=500)
                        received += [r.value for rs in batches.values() for r in rs]
            tb.faults.inject_error("FETCH", "FETCH_SESSION_ID_NOT_FOUND", count=1)
            await producer.send("t", b"after", partition=0)
            with trio.fail_after(30):
                while len(received) < 7:
                    batches = await consumer.getmany(timeout_ms=500)
                    received += [r.value for rs in batches.values() for r in rs]
        assert received == [b"v0", b"v1", b"v2", b"v3", b"v4", b"v5", b"after"]  # none lost, none twice
        fetches = [r.body for r in tb.faults.recorder.requests("Fetch", client_id="reader")]
        assert fetches[0].session_epoch == 0 and len(fetches[0].topics[0].partitions) == 4  # full, opens it
        incremental = [f for f in fetches if f.session_epoch > 0]
        assert len(incremental) >= 5 and all(f.session_id != 0 for f in incremental)
        named = [{p.partition for t in f.topics for p in t.partitions} for f in incremental]
        assert all(n <= {0} for n in named), named  # idle partitions 1-3 are never named again
        # after the injected FETCH_SESSION_ID_NOT_FOUND: one full fetch naming all four again
        full_again = [f for f in fetches[1:] if f.session_epoch == 0]
        assert len(full_again) == 1 and len(full_again[0].topics[0].partitions) == 4
