"""Transaction version 2 (KIP-890 part 2) from the broker's side, in raw requests.

A TV2 producer sends no AddPartitionsToTxn (Produce v12+ adds the partition) and no
AddOffsetsToTxn (TxnOffsetCommit v5 adds the group); EndTxn v5 bumps the epoch as the
transaction ends — markers included — and answers the id and epoch to use next, so a zombie
or a retried request of the old epoch is fenced. Brokers verify a partition with
AddPartitionsToTxn v4+ (``verify_only``). ApiVersions finalizes ``transaction.version`` 2.
"""

from __future__ import annotations

from trikafka.errors import ErrorCode
from trikafka.protocol.records import iter_batches
from trikafka.testing import open_test_broker

from .test_topics_and_data import create_topic, request
from .test_transactions import TOPIC, Producer, fetch, offset_fetch, records


class ProducerV2(Producer):
    async def produce(self, partition: int, *values: bytes, epoch: int | None = None):
        seq = self.seq.get(partition, 0)
        batch = records(list(values), self.pid, self.epoch if epoch is None else epoch, seq)
        response = await self.client.request(
            request(0, 12, transactional_id=self.tid, acks=-1, timeout=1000,
                    topic_data=[{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}])
        )
        result = response.responses[0].partition_responses[0]
        if result.error_code == ErrorCode.none:
            self.seq[partition] = seq + len(values)
        return result

    async def end_v5(self, commit: bool, *, pid: int | None = None, epoch: int | None = None):
        response = await self.client.request(
            request(26, 5, transactional_id=self.tid, producer_id=self.pid if pid is None else pid,
                    producer_epoch=self.epoch if epoch is None else epoch, committed=commit)
        )
        if response.error_code == ErrorCode.none and (response.producer_id, response.producer_epoch) != (
            self.pid,
            self.epoch,
        ):
            self.pid, self.epoch, self.seq = response.producer_id, response.producer_epoch, {}
        return response

    async def verify(self, *partitions: int, verify_only: bool = True, epoch: int | None = None, version: int = 4):
        response = await self.client.request(
            request(24, version, transactions=[{
                "transactional_id": self.tid, "producer_id": self.pid,
                "producer_epoch": self.epoch if epoch is None else epoch, "verify_only": verify_only,
                "topics": [{"name": TOPIC, "partitions": list(partitions)}]}])
        )
        (result,) = response.results_by_transaction
        return {r.partition_index: r.partition_error_code for t in result.topic_results for r in t.results_by_partition}


def markers(data: bytes) -> list[tuple[int, int]]:
    """(producer id, epoch) of every control batch."""
    return [(h.producer_id, h.producer_epoch) for h in iter_batches(data) if h.is_control]


async def test_a_transaction_without_add_partitions_ends_with_a_bumped_epoch(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, TOPIC)
        producer = ProducerV2(client, "tv2")
        assert (await producer.init(version=5)).error_code == ErrorCode.none
        pid = producer.pid
        assert producer.epoch == 0
        assert (await producer.produce(0, b"a", b"b")).error_code == ErrorCode.none  # implicitly added
        assert tb.broker.transaction_coordinator.txns["tv2"].partitions == {(TOPIC, 0)}
        response = await producer.end_v5(commit=True)
        assert (response.error_code, response.producer_id, response.producer_epoch) == (ErrorCode.none, pid, 1)
        data = (await fetch(client, committed=True)).records
        assert markers(data) == [(pid, 1)]  # the marker carries the bumped epoch
        # A zombie of the old epoch cannot add to the next transaction...
        assert (await producer.produce(0, b"late", epoch=0)).error_code == ErrorCode.invalid_producer_epoch
        # ...and a retried EndTxn of the old epoch is recognised, not fenced, and changes nothing.
        retry = await producer.end_v5(commit=True, epoch=0)
        assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (ErrorCode.none, pid, 1)
        assert (await producer.end_v5(commit=False, epoch=0)).error_code == ErrorCode.invalid_txn_state
        # An abort with nothing open bumps the epoch and writes no marker.
        end = (await fetch(client, committed=False)).high_watermark
        empty = await producer.end_v5(commit=False)
        assert (empty.error_code, empty.producer_epoch) == (ErrorCode.none, 2)
        assert (await fetch(client, committed=False)).high_watermark == end
        assert (await producer.end_v5(commit=False, epoch=1)).producer_epoch == 2  # its retry
        assert (await producer.end_v5(commit=True, epoch=1)).error_code == ErrorCode.invalid_txn_state
        assert (await producer.end_v5(commit=False, epoch=0)).error_code == ErrorCode.producer_fenced
        # The next transaction runs at epoch 2; its abort is marked with epoch 3.
        assert (await producer.produce(0, b"c")).error_code == ErrorCode.none
        assert (await producer.end_v5(commit=False)).producer_epoch == 3
        assert markers((await fetch(client, committed=False)).records)[-1] == (pid, 3)


async def test_an_exhausted_epoch_moves_to_a_new_producer_id(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, TOPIC)
        producer = ProducerV2(client, "tv2-overflow")
        await producer.init(version=5)
        old_pid = producer.pid
        tb.broker.transaction_coordinator.txns["tv2-overflow"].producer_epoch = 32765
        producer.epoch = 32765
        assert (await producer.produce(0, b"x")).error_code == ErrorCode.none
        response = await producer.end_v5(commit=True)
        assert response.error_code == ErrorCode.none
        assert response.producer_id != old_pid and response.producer_epoch == 0
        assert markers((await fetch(client, committed=True)).records) == [(old_pid, 32766)]
        retry = await producer.end_v5(commit=True, pid=old_pid, epoch=32765)
        assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (ErrorCode.none, response.producer_id, 0)
        assert (await producer.produce(0, b"y")).error_code == ErrorCode.none


async def test_add_partitions_v4_verifies_without_adding(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, TOPIC, partitions=2)
        producer = ProducerV2(client, "verify")
        await producer.init(version=5)
        assert await producer.add_partitions(0) == {0: ErrorCode.none}
        assert await producer.verify(0, 1) == {0: ErrorCode.none, 1: ErrorCode.invalid_txn_state}
        assert tb.broker.transaction_coordinator.txns["verify"].partitions == {(TOPIC, 0)}
        assert await producer.verify(0, epoch=producer.epoch + 1, version=5) == {0: ErrorCode.producer_fenced}
        assert await producer.verify(1, verify_only=False, version=5) == {1: ErrorCode.none}
        assert tb.broker.transaction_coordinator.txns["verify"].partitions == {(TOPIC, 0), (TOPIC, 1)}


async def test_txn_offset_commit_v5_joins_the_group_without_add_offsets(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, TOPIC)
        producer = ProducerV2(client, "offsets")
        await producer.init(version=5)
        assert await producer.commit_offsets("g", {0: 42}, version=4) == {0: ErrorCode.invalid_txn_state}
        assert await producer.commit_offsets("g", {0: 42}, version=5) == {0: ErrorCode.none}
        assert (await offset_fetch(client, "g"))[1] == -1
        assert (await producer.end_v5(commit=True)).error_code == ErrorCode.none
        assert (await offset_fetch(client, "g"))[1] == 42


async def test_api_versions_finalizes_transaction_version_2(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        response = await client.request(request(18, 4, client_software_name="t", client_software_version="1"))
        finalized = {f.name: f.max_version_level for f in response.finalized_features}
        assert finalized == {"transaction.version": 2, "group.version": 1, "share.version": 2}
        assert response.finalized_features_epoch >= 0
        supported = {f.name: f.max_version for f in response.supported_features}
        assert supported == finalized
        ranges = {k.api_key: k.max_version for k in response.api_keys}
        assert (ranges[26], ranges[24], ranges[28]) == (5, 5, 5)
