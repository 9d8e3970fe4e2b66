"""Transactions of the Trio producer: commit, abort, cancellation, offsets, fencing — in
virtual time, checked with raw read_committed Fetch and OffsetFetch."""

from __future__ import annotations

import pytest
import trio

from trikafka.client import TopicPartition, open_producer
from trikafka.client.errors import ProducerFencedError
from trikafka.client.transactions import TransactionStateError
from trikafka.protocol.entities import build
from trikafka.protocol.registry import ApiVersionSpec
from trikafka.testing import open_test_broker

from .support import committed_view, fetch, values


async def test_commit_is_visible_and_abort_is_not(autojump_clock):
    async with open_test_broker() as broker, open_producer(broker, transactional_id="tx") as producer:
        async with producer.transaction():
            await producer.send("out", b"committed-1")
            await producer.enqueue("out", b"committed-2")
        with pytest.raises(RuntimeError, match="boom"):
            async with producer.transaction():
                await producer.send("out", b"aborted")
                raise RuntimeError("boom")
        async with producer.transaction():
            await producer.send("out", b"committed-3")
        partition = await fetch(broker, "out", committed=True)
        assert committed_view(partition) == [b"committed-1", b"committed-2", b"committed-3"]
        assert values(partition) == [b"committed-1", b"committed-2", b"aborted", b"committed-3"]
        assert partition.last_stable_offset == partition.high_watermark


async def test_cancelled_transaction_aborts_and_the_next_one_works(autojump_clock):
    async with open_test_broker() as broker, open_producer(broker, transactional_id="tx", linger_ms=1000) as producer:
        with trio.move_on_after(0.5):  # cancels the send while its batch lingers
            async with producer.transaction():
                await producer.send("out", b"never")
        assert producer.txn.state == "READY"
        async with producer.transaction():
            await producer.send("out", b"kept")
        partition = await fetch(broker, "out", committed=True)
        assert committed_view(partition) == [b"kept"]
        assert b"never" not in values(partition)  # dropped before it was sent


async def test_offsets_commit_with_the_transaction_only(autojump_clock):
    async def committed_offset():
        spec = ApiVersionSpec.resolve(9, 7)
        async with broker.client() as connection:
            answer = await connection.request(build(
                spec.request_type, group_id="g", require_stable=True,
                topics=[{"name": "in", "partition_indexes": [0]}],
            ))
        return answer.topics[0].partitions[0].committed_offset

    async with open_test_broker() as broker, open_producer(broker, transactional_id="tx") as producer:
        async with producer.transaction():
            await producer.send("in", b"the input topic exists")
        with pytest.raises(RuntimeError):
            async with producer.transaction():
                await producer.send("out", b"x")
                await producer.send_offsets_to_transaction({TopicPartition("in", 0): 41}, "g")
                raise RuntimeError
        assert await committed_offset() == -1
        async with producer.transaction():
            await producer.send("out", b"y")
            await producer.send_offsets_to_transaction({TopicPartition("in", 0): 42}, "g")
        assert await committed_offset() == 42


async def test_a_second_producer_fences_the_first(autojump_clock):
    async with open_test_broker() as broker, open_producer(broker, transactional_id="same") as old:
        async with old.transaction():
            await old.send("out", b"old")
        async with open_producer(broker, transactional_id="same") as new:
            with pytest.raises(ProducerFencedError):
                async with old.transaction():
                    await old.send("out", b"zombie")
            with pytest.raises(TransactionStateError, match="failed fatally"):
                await old.begin_transaction()
            async with new.transaction():
                await new.send("out", b"new")
        assert committed_view(await fetch(broker, "out", committed=True)) == [b"old", b"new"]


async def test_sends_outside_a_transaction_are_refused(autojump_clock):
    async with open_test_broker() as broker, open_producer(broker, transactional_id="tx") as producer:
        with pytest.raises(TransactionStateError, match="inside a transaction"):
            await producer.send("out", b"x")
