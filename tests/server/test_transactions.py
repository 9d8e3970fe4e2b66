"""Transactions (KIP-98) over the in-memory transport, in virtual time (MockClock).

The project's Trio client speaks the raw APIs — InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn, Produce, Fetch — so every answer, error code and
offset is checked as a client would see it: the last stable offset against the high
watermark, the aborted transactions of a read_committed Fetch, fencing, timeouts and a
restart of a file-backed broker with a transaction left open.
"""

from __future__ import annotations

import dataclasses
import datetime
import json

import trio
import trio.testing

from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch, build_control_batch, iter_batches, iter_records
from trikafka.testing import open_test_broker

from .test_topics_and_data import create_topic, fetch_request, request

TOPIC = "txn"
NOW = 1_700_000_000_000


def records(values: list[bytes], pid: int, epoch: int, seq: int, transactional: bool = True) -> bytes:
    return build_batch(
        [(b"k", v, [], NOW) for v in values],
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional,
    )


def values_of(data: bytes) -> list[tuple[int, bytes | None, bool]]:
    """(offset, value, is control) of every record."""
    out = []
    for header in iter_batches(data):
        for record in iter_records(data, header):
            out.append((record.offset, record.value, header.is_control))
    return out


def committed_view(partition) -> list[tuple[int, bytes]]:
    """What a read_committed consumer delivers: records neither control nor aborted."""
    aborted = {(t.producer_id, t.first_offset) for t in partition.aborted_transactions or ()}
    data = partition.records
    out, dropping = [], set()
    starts = {first: pid for pid, first in aborted}
    for header in iter_batches(data):
        if header.base_offset in starts and starts[header.base_offset] == header.producer_id:
            dropping.add(header.producer_id)
        if header.is_control:
            dropping.discard(header.producer_id)
            continue
        if header.producer_id in dropping:
            continue
        out += [(r.offset, r.value) for r in iter_records(data, header)]
    return out


class Producer:
    """A transactional producer speaking the raw protocol."""

    def __init__(self, client, transactional_id: str, timeout_ms: int = 60_000) -> None:
        self.client = client
        self.tid = transactional_id
        self.timeout_ms = timeout_ms
        self.pid = -1
        self.epoch = -1
        self.seq: dict[int, int] = {}

    async def init(self, version: int = 4, expected: tuple[int, int] | None = None):
        pid, epoch = expected or (-1, -1)
        response = await self.client.request(
            request(22, version, transactional_id=self.tid, transaction_timeout=self.timeout_ms,
                    producer_id=pid, producer_epoch=epoch, enable2_pc=False, keep_prepared_txn=False)
        )
        if response.error_code == ErrorCode.none:
            self.pid, self.epoch, self.seq = response.producer_id, response.producer_epoch, {}
        return response

    async def add_partitions(self, *partitions: int, topic: str = TOPIC, version: int = 3):
        response = await self.client.request(
            request(24, version, v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.pid,
                    v3_and_below_producer_epoch=self.epoch,
                    v3_and_below_topics=[{"name": topic, "partitions": list(partitions)}])
        )
        codes = {r.partition_index: r.partition_error_code
                 for t in response.results_by_topic_v3_and_below for r in t.results_by_partition}
        return codes

    async def produce(self, partition: int, *values: bytes, topic: str = TOPIC, epoch: int | None = None):
        seq = self.seq.get(partition, 0)
        batch = records(list(values), self.pid, self.epoch if epoch is None else epoch, seq)
        response = await self.client.request(
            request(0, 9, transactional_id=self.tid, acks=-1, timeout=1000,
                    topic_data=[{"name": topic, "topic_id": None,
                                 "partition_data": [{"index": partition, "records": batch}]}])
        )
        result = response.responses[0].partition_responses[0]
        if result.error_code == ErrorCode.none:
            self.seq[partition] = seq + len(values)
        return result

    async def end(self, commit: bool, version: int = 3):
        response = await self.client.request(
            request(26, version, transactional_id=self.tid, producer_id=self.pid,
                    producer_epoch=self.epoch, committed=commit)
        )
        return response.error_code

    async def add_offsets(self, group: str, version: int = 3):
        response = await self.client.request(
            request(25, version, transactional_id=self.tid, producer_id=self.pid,
                    producer_epoch=self.epoch, group_id=group)
        )
        return response.error_code

    async def commit_offsets(self, group: str, offsets: dict[int, int], topic: str = TOPIC, version: int = 3):
        response = await self.client.request(
            request(28, version, transactional_id=self.tid, group_id=group, producer_id=self.pid,
                    producer_epoch=self.epoch, generation_id=-1, member_id="", group_instance_id=None,
                    topics=[{"name": topic, "partitions": [
                        {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                         "committed_metadata": ""} for p, o in offsets.items()]}])
        )
        return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}


async def fetch(client, offset: int = 0, *, committed: bool, partition: int = 0, max_wait: int = 0):
    body = dataclasses.replace(
        fetch_request(12, TOPIC, None, partition, offset, max_wait=max_wait), isolation_level=int(committed)
    )
    response = await client.request(body)
    return response.responses[0].partitions[0]


async def list_latest(client, committed: bool) -> int:
    response = await client.request(
        request(2, 7, replica_id=-1, isolation_level=int(committed),
                topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                        "timestamp": -1, "max_num_offsets": 1}]}])
    )
    return response.topics[0].partitions[0].offset


async def offset_fetch(client, group: str, require_stable: bool = False):
    response = await client.request(
        request(9, 8, groups=[{"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
                require_stable=require_stable)
    )
    partition = response.groups[0].topics[0].partitions[0]
    return partition.error_code, partition.committed_offset


# --- commit and abort ------------------------------------------------------------------


async def test_commit_moves_the_last_stable_offset(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, TOPIC)
        producer = Producer(client, "t1")
        assert (await producer.init()).error_code == ErrorCode.none
        assert await producer.add_partitions(0) == {0: ErrorCode.none}
        assert (await producer.produce(0, b"a", b"b")).base_offset == 0
        assert (await producer.produce(0, b"c")).base_offset == 2

        uncommitted = await fetch(client, committed=False)
        assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (3, 0)
        assert uncommitted.aborted_transactions is None
        assert [v for _, v, _ in values_of(uncommitted.records)] == [b"a", b"b", b"c"]
        pending = await fetch(client, committed=True)
        assert (pending.high_watermark, pending.last_stable_offset, pending.records) == (3, 0, b"")
        assert pending.aborted_transactions == ()
        assert (await list_latest(client, committed=False), await list_latest(client, committed=True)) == (3, 0)

        assert await producer.end(commit=True) == ErrorCode.none
        done = await fetch(client, committed=True)
        assert (done.high_watermark, done.last_stable_offset) == (4, 4)  # the marker is offset 3
        assert values_of(done.records)[-1][0] == 3 and values_of(done.records)[-1][2]
        assert committed_view(done) == [(0, b"a"), (1, b"b"), (2, b"c")]
        assert done.aborted_transactions == ()
        assert await list_latest(client, committed=True) == 4
        # Ending it again the same way is answered OK (a retry); the other way is refused.
        assert await producer.end(commit=True) == ErrorCode.none
        assert await producer.end(commit=False) == ErrorCode.invalid_txn_state


async def test_abort_is_listed_in_read_committed_fetches(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, TOPIC)
        producer = Producer(client, "t2")
        await producer.init()
        await producer.add_partitions(0)
        await producer.produce(0, b"x0", b"x1")
        assert await producer.end(commit=False) == ErrorCode.none  # marker at 2
        await producer.add_partitions(0)
        await producer.produce(0, b"ok")  # 3
        assert await producer.end(commit=True) == ErrorCode.none  # marker at 4

        result = await fetch(client, committed=True)
        assert [(t.producer_id, t.first_offset) for t in result.aborted_transactions] == [(producer.pid, 0)]
        assert committed_view(result) == [(3, b"ok")]
        assert result.last_stable_offset == 5
        # From past the aborted transaction on, nothing aborted overlaps.
        assert (await fetch(client, 3, committed=True)).aborted_transactions == ()
        assert (await fetch(client, committed=False)).aborted_transactions is None

        # DeleteRecords past the abort drops it from the index.
        response = await client.request(
            request(21, 2, topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 3}]}],
                    timeout=1000)
        )
        assert response.topics[0].partitions[0].low_watermark == 3
        log = tb.broker.replica_manager.get_log(TOPIC, 0)
        assert log.transactions.aborted == []


async def test_read_committed_long_poll_waits_for_the_commit(mock_clock):
    async with open_test_broker() as tb, tb.client() as client, tb.client() as poller:
        await create_topic(client, TOPIC)
        producer = Producer(client, "t3")
        await producer.init()
        await producer.add_partitions(0)
        answered: list = []

        async def long_poll():
            answered.append(await fetch(poller, committed=True, max_wait=30_000))

        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_poll)
            await trio.testing.wait_all_tasks_blocked()
            await producer.produce(0, b"v")  # the high watermark moves, the LSO does not
            await trio.testing.wait_all_tasks_blocked()
            assert answered == []
            assert await producer.end(commit=True) == ErrorCode.none
        (result,) = answered
        assert committed_view(result) == [(0, b"v")]
        assert result.last_stable_offset == 2
        assert trio.current_time() == start  # woken by the commit, not by max_wait


# --- fencing, timeouts, state errors ---------------------------------------------------


async def test_a_second_init_fences_the_first_producer(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, TOPIC)
        first = Producer(client, "shared")
        await first.init()
        await first.add_partitions(0)
        await first.produce(0, b"zombie")

        second = Producer(client, "shared")
        assert (await second.init()).error_code == ErrorCode.concurrent_transactions  # aborting
        while (response := await second.init()).error_code == ErrorCode.concurrent_transactions:
            await trio.testing.wait_all_tasks_blocked()
        assert response.error_code == ErrorCode.none
        assert (second.pid, second.epoch) == (first.pid, first.epoch + 2)

        result = await fetch(client, committed=True)
        assert [(t.producer_id, t.first_offset) for t in result.aborted_transactions] == [(first.pid, 0)]
        assert committed_view(result) == []
        assert result.last_stable_offset == 2

        assert await first.end(commit=True) == ErrorCode.producer_fenced
        assert await first.end(commit=True, version=1) == ErrorCode.invalid_producer_epoch
        assert await first.add_partitions(0) == {0: ErrorCode.producer_fenced}
        assert await first.add_partitions(0, version=1) == {0: ErrorCode.invalid_producer_epoch}
        assert (await first.produce(0, b"late")).error_code == ErrorCode.invalid_producer_epoch
        # A new instance presenting the fenced epoch (KIP-360) is fenced too.
        assert (await Producer(client, "shared").init(expected=(first.pid, first.epoch))).error_code == (
            ErrorCode.producer_fenced
        )
        assert (await Producer(client, "shared").init(version=3, expected=(first.pid, first.epoch))).error_code == (
            ErrorCode.invalid_producer_epoch
        )


async def test_transaction_timeout_aborts_on_trios_clock(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, TOPIC)
        producer = Producer(client, "slow", timeout_ms=5_000)
        await producer.init()
        await producer.add_partitions(0)
        start = trio.current_time()
        await producer.produce(0, b"too late")
        log = tb.broker.replica_manager.get_log(TOPIC, 0)
        assert log.last_stable_offset.value == 0

        await log.last_stable_offset.wait_value(lambda lso: lso > 0)

        assert trio.current_time() - start == 5.0
        assert log.last_stable_offset.value == log.high_watermark.value == 2
        result = await fetch(client, committed=True)
        assert [t.first_offset for t in result.aborted_transactions] == [0]
        assert await producer.end(commit=True) == ErrorCode.producer_fenced
        # As in Kafka, the timeout's epoch bump fences the producer for good: presenting its
        # old epoch (KIP-360) is PRODUCER_FENCED; only a fresh InitProducerId goes on.
        assert (await producer.init(expected=(producer.pid, producer.epoch))).error_code == ErrorCode.producer_fenced
        assert (await producer.init()).error_code == ErrorCode.none


async def test_state_machine_errors(autojump_clock):
    async with open_test_broker(transaction_max_timeout_ms=10_000) as tb, tb.client() as client:
        await create_topic(client, TOPIC)
        assert (
            await Producer(client, "x", timeout_ms=10_001).init()
        ).error_code == ErrorCode.invalid_transaction_timeout
        assert (await Producer(client, "", timeout_ms=1000).init()).error_code == ErrorCode.invalid_request
        producer = Producer(client, "x", timeout_ms=10_000)
        await producer.init()
        assert await producer.end(commit=True) == ErrorCode.invalid_txn_state  # Empty
        assert await Producer(client, "nobody").end(commit=True) == ErrorCode.invalid_producer_id_mapping
        assert await producer.add_partitions(0, topic="missing") == {0: ErrorCode.unknown_topic_or_partition}
        # A transactional batch for a partition not in the transaction is refused.
        assert (await producer.produce(0, b"v")).error_code == ErrorCode.invalid_txn_state
        # Clients may not write markers.
        marker = build_control_batch(producer.pid, producer.epoch, commit=True)
        response = await client.request(
            request(0, 9, transactional_id="x", acks=-1, timeout=1000,
                    topic_data=[{"name": TOPIC, "topic_id": None,
                                 "partition_data": [{"index": 0, "records": marker}]}])
        )
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.invalid_record

        # KIP-360 bumps: the current epoch bumps; a retry of that bump gets the same epoch; an
        # older epoch is fenced.
        pid, epoch = producer.pid, producer.epoch
        assert (await producer.init(expected=(pid, epoch))).producer_epoch == epoch + 1
        assert (await producer.init(expected=(pid, epoch))).producer_epoch == epoch + 1
        assert (await producer.init(expected=(pid, epoch + 1))).producer_epoch == epoch + 2
        assert (await producer.init(expected=(pid, epoch))).error_code == ErrorCode.producer_fenced

        # Describe and list.
        await producer.add_partitions(0)
        described = await client.request(request(65, 0, transactional_ids=["x", "nobody"]))
        x, nobody = described.transaction_states
        assert (x.transaction_state, x.producer_id, x.transaction_timeout) == (
            "Ongoing",
            pid,
            datetime.timedelta(seconds=10),
        )
        assert [(t.topic, list(t.partitions)) for t in x.topics] == [(TOPIC, [0])]
        assert nobody.error_code == ErrorCode.transactional_id_not_found
        listed = await client.request(request(66, 1, state_filters=["Ongoing", "Bogus"], producer_id_filters=[],
                                              duration_filter=-1))
        assert [t.transactional_id for t in listed.transaction_states] == ["x"]
        assert list(listed.unknown_state_filters) == ["Bogus"]


async def test_txn_offset_commit_applies_on_commit_only(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, TOPIC)
        producer = Producer(client, "offsets")
        await producer.init()
        # Offsets before the group joins the transaction are refused.
        assert await producer.commit_offsets("g", {0: 5}) == {0: ErrorCode.invalid_txn_state}

        assert await producer.add_offsets("g") == ErrorCode.none
        assert await producer.commit_offsets("g", {0: 5}) == {0: ErrorCode.none}
        assert await offset_fetch(client, "g") == (ErrorCode.none, -1)
        assert (await offset_fetch(client, "g", require_stable=True))[0] == ErrorCode.unstable_offset_commit
        assert await producer.end(commit=True) == ErrorCode.none
        assert await offset_fetch(client, "g", require_stable=True) == (ErrorCode.none, 5)

        await producer.add_offsets("g")
        await producer.commit_offsets("g", {0: 9})
        assert await producer.end(commit=False) == ErrorCode.none
        assert await offset_fetch(client, "g") == (ErrorCode.none, 5)


# --- restart -----------------------------------------------------------------------------


async def test_restart_with_an_open_transaction_does_not_wedge_the_lso(autojump_clock, tmp_path):
    data = str(tmp_path / "data")
    async with open_test_broker(log_dirs=data) as tb, tb.client() as client:
        await create_topic(client, TOPIC, partitions=2)
        committed = Producer(client, "done")
        await committed.init()
        await committed.add_partitions(1)
        await committed.produce(1, b"kept")
        assert await committed.end(commit=True) == ErrorCode.none
        producer = Producer(client, "open")
        await producer.init()
        await producer.add_partitions(0)
        await producer.produce(0, b"in flight")
    stored = json.loads((tmp_path / "data" / "trikafka-transactions.json").read_text())
    assert stored["transactions"]["open"]["state"] == "Ongoing"

    async with open_test_broker(log_dirs=data) as tb, tb.client() as client:
        result = await fetch(client, committed=True)
        assert (result.high_watermark, result.last_stable_offset) == (2, 2)
        assert [(t.producer_id, t.first_offset) for t in result.aborted_transactions] == [(producer.pid, 0)]
        assert committed_view(await fetch(client, committed=True, partition=1)) == [(0, b"kept")]
        producer.client = client
        assert await producer.end(commit=True) == ErrorCode.producer_fenced
        again = Producer(client, "open")
        assert (await again.init()).error_code == ErrorCode.none
        assert (again.pid, again.epoch) == (producer.pid, producer.epoch + 2)
        # The partition left its state in the log: it rebuilds it on the next start too.
        await again.add_partitions(0)
        await again.produce(0, b"second")

    (tmp_path / "data" / "trikafka-transactions.json").unlink()  # the coordinator forgot it
    async with open_test_broker(log_dirs=data) as tb, tb.client() as client:
        log = tb.broker.replica_manager.get_log(TOPIC, 0)
        assert [(t.first_offset, t.last_offset) for t in log.transactions.aborted] == [(0, 1), (2, 3)]
        result = await fetch(client, 1, committed=True)  # (a fetch reads one segment at a time)
        assert result.last_stable_offset == result.high_watermark == 4
        assert [t.first_offset for t in result.aborted_transactions] == [0, 2]
        assert committed_view(result) == []
