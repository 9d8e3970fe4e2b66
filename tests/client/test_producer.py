"""The Trio producer over the in-memory transport, in virtual time (MockClock)."""

from __future__ import annotations

import random

import pytest
import trio

from trikafka.client import NewTopic, open_admin, open_producer
from trikafka.client.errors import KafkaError, KafkaTimeoutError
from trikafka.client.partitioner import partition_for_key
from trikafka.client.transport import memory_connector
from trikafka.protocol.compression import CODECS
from trikafka.protocol.registry import ApiKey
from trikafka.testing import open_test_broker

from .faults import CountingConnector, LosingConnector
from .support import batches, fetch, values


async def test_linger_holds_a_batch_exactly_linger_ms(autojump_clock):
    async with open_test_broker() as broker, open_producer(broker, linger_ms=250) as producer:
        await producer.send("t", b"warm-up")  # metadata and producer id are fetched once
        start = trio.current_time()
        metadata = await producer.send("t", b"x")
        assert trio.current_time() - start == pytest.approx(0.250)
        assert (metadata.topic, metadata.partition, metadata.offset) == ("t", 0, 1)


async def test_a_full_batch_goes_before_linger(autojump_clock):
    async with open_test_broker() as broker, open_producer(broker, linger_ms=60_000, batch_size=1000) as producer:
        start = trio.current_time()
        futures = [await producer.enqueue("t", b"v" * 100, partition=0) for _ in range(30)]
        first = await futures[0].wait()
        assert trio.current_time() - start < 1  # not 60 s: the batch filled up
        assert first.offset == 0
        await producer.flush()  # the rest, without waiting a minute
        assert trio.current_time() - start < 1
        assert [(await f.wait()).offset for f in futures] == list(range(30))
        assert len(batches((await fetch(broker, "t")).records)) > 1


async def test_a_loop_of_enqueues_lets_the_sender_take_each_full_batch(autojump_clock):
    """A loop that only enqueues (no other checkpoint) must not hold every batch back until it
    ends: a full batch is a schedule point, so the sender has the first batch on the wire while
    the loop is still appending — as Java's and librdkafka's send threads do. It is not a
    cancel point: a cancelled caller still gets the future of a record it appended."""
    async with open_test_broker() as broker, open_producer(broker, linger_ms=60_000, batch_size=1000) as producer:
        await producer.send("t", b"warm-up", partition=0)  # metadata and producer id are fetched once
        futures = [await producer.enqueue("t", b"v" * 100, partition=0) for _ in range(40)]
        first = futures[0].batch
        assert first.encoded is not None  # drained and encoded by the sender during the loop
        with trio.CancelScope() as scope:
            scope.cancel()
            futures += [await producer.enqueue("t", b"v" * 100, partition=0) for _ in range(20)]
        assert not scope.cancelled_caught and len(futures) == 60
        await producer.flush()
        assert [(await f.wait()).offset for f in futures] == list(range(1, 61))


async def test_keys_land_on_java_partitions_and_keyless_records_stick(autojump_clock):
    async with open_test_broker(num_partitions=6) as broker, open_producer(broker) as producer:
        for key in (b"alpha", b"beta", b"gamma", b"delta", b"", b"\xff" * 33):
            metadata = await producer.send("k", b"v", key=key)
            assert metadata.partition == partition_for_key(key, 6)
        futures = [await producer.enqueue("k", b"small") for _ in range(50)]
        partitions = {(await f.wait()).partition for f in futures}
        assert len(partitions) == 1  # 50 × 5 bytes is far below batch.size


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_compression(autojump_clock, codec):
    async with open_test_broker() as broker, open_producer(broker, compression_type=codec, linger_ms=5) as producer:
        futures = [
            await producer.enqueue("c", f"value {i}".encode() * 20, key=b"k", headers={"h": b"1"}) for i in range(10)
        ]
        await producer.flush()
        [await f.wait() for f in futures]
        (header, records), = batches((await fetch(broker, "c")).records)
        assert header.compression == CODECS[codec]
        assert [r.value for r in records] == [f"value {i}".encode() * 20 for i in range(10)]
        assert records[0].headers == (("h", b"1"),)


async def test_acks_zero_and_one(autojump_clock):
    async with open_test_broker() as broker:
        async with open_producer(broker, acks=0) as producer:
            assert (await producer.send("a", b"fire")).offset == -1
        async with open_producer(broker, acks="1") as producer:
            assert producer.txn.idempotent is False  # Java: acks=1 turns default idempotence off
            assert (await producer.send("a", b"one")).offset == 1
        assert values(await fetch(broker, "a")) == [b"fire", b"one"]


async def test_lost_answer_is_retried_without_a_duplicate(autojump_clock):
    async with open_test_broker() as broker:
        connector = LosingConnector(memory_connector(broker.listener))
        async with open_producer(broker, connector=connector, linger_ms=0) as producer:
            await producer.send("i", b"first")
            connector.lose(ApiKey.PRODUCE)  # the broker writes "second"; its answer is lost
            start = trio.current_time()
            metadata = await producer.send("i", b"second")
            assert connector.lost == 1
            assert metadata.offset == 1  # the broker recognised the resent sequence
            assert 0.08 <= trio.current_time() - start <= 0.2  # retry.backoff.ms (100) ± jitter
        assert values(await fetch(broker, "i")) == [b"first", b"second"]


async def test_without_idempotence_the_same_loss_duplicates(autojump_clock):
    # The control for the test above: it can tell a duplicate when there is one.
    async with open_test_broker() as broker:
        connector = LosingConnector(memory_connector(broker.listener))
        async with open_producer(broker, connector=connector, linger_ms=0, enable_idempotence=False) as producer:
            connector.lose(ApiKey.PRODUCE)
            await producer.send("i", b"once")
        assert values(await fetch(broker, "i")) == [b"once", b"once"]


async def test_delivery_timeout_fails_the_record(autojump_clock):
    async with open_test_broker() as broker:
        connector = LosingConnector(memory_connector(broker.listener))
        config = dict(linger_ms=0, request_timeout_ms=1000, delivery_timeout_ms=5000, enable_idempotence=False, acks=1)
        async with open_producer(broker, connector=connector, **config) as producer:
            await producer.send("d", b"warm-up")
            connector.lose(ApiKey.PRODUCE, times=1000)
            start = trio.current_time()
            with pytest.raises(KafkaTimeoutError):
                await producer.send("d", b"never acknowledged")
            assert 5 <= trio.current_time() - start <= 6.5


async def test_bad_input_is_refused_clearly(autojump_clock):
    async with open_test_broker() as broker, open_producer(broker, max_request_size=1000) as producer:
        with pytest.raises(KafkaError, match="MESSAGE_TOO_LARGE"):
            await producer.send("t", b"x" * 2000)
        with pytest.raises(KafkaError, match="partition 7 of 't'"):
            await producer.send("t", b"x", partition=7)
        with pytest.raises(TypeError, match="value must be bytes, str or None"):
            await producer.send("t", 12)


@pytest.mark.parametrize("limit", [1, 3])
async def test_in_flight_requests_per_connection_are_bounded(autojump_clock, limit):
    async with open_test_broker(num_partitions=6) as broker:
        connector = CountingConnector(memory_connector(broker.listener), ApiKey.PRODUCE, answer_delay=1.0)
        config = dict(linger_ms=0, acks=1, max_in_flight_requests_per_connection=limit)
        async with open_producer(broker, connector=connector, **config) as producer:
            await producer.client.wait_for_topic("wide")
            futures = []
            for partition in range(6):  # one record per partition, each ready on its own
                futures.append(await producer.enqueue("wide", b"v", partition=partition))
                await trio.sleep(0.01)
            await producer.flush()
            assert all(f.error is None for f in futures)
        assert connector.most == limit


async def test_a_cancelled_send_is_still_delivered(autojump_clock):
    async with open_test_broker() as broker, open_producer(broker, linger_ms=1000) as producer:
        with trio.move_on_after(0.5):
            await producer.send("c", b"appended, then the caller gave up")
        await producer.flush()
        assert values(await fetch(broker, "c")) == [b"appended, then the caller gave up"]


async def test_records_unanswered_when_the_producer_stops_fail_instead_of_waiting_forever(autojump_clock):
    """Leaving the producer with an error waits request.timeout.ms for requests on the wire;
    a record whose answer has not come by then fails, naming why — its future never resolved
    before, and whoever awaited it waited for ever."""
    async with open_test_broker() as broker:
        connector = CountingConnector(memory_connector(broker.listener), ApiKey.PRODUCE)
        with pytest.raises(RuntimeError, match="the application failed"):
            async with open_producer(broker, connector=connector, linger_ms=0, request_timeout_ms=1000) as producer:
                await producer.send("s", b"warm-up")  # connected; metadata and producer id known
                connector.answer_delay = 3600  # from now on the broker's answers come an hour late
                future = await producer.enqueue("s", b"on the wire, never answered")
                with trio.move_on_after(0.5):
                    await future.wait()
                assert connector.outstanding == 1 and not future.done()
                raise RuntimeError("the application failed")
        assert future.done()
        assert isinstance(future.error, KafkaError)
        assert "the producer closed before the broker answered" in str(future.error)
        with pytest.raises(KafkaError, match="closed before the broker answered"):
            await future.wait()


async def test_a_vanished_topic_is_retried_after_a_metadata_refresh(autojump_clock):
    async with open_test_broker() as broker, open_producer(broker, linger_ms=0) as producer:
        assert (await producer.send("gone", b"first")).offset == 0
        async with open_admin(broker) as admin:
            await admin.delete_topics(["gone"])
        version = producer.client.cluster.version
        # The producer's metadata still names the old topic: the broker answers
        # UNKNOWN_TOPIC_OR_PARTITION, the producer refreshes (auto-creating it) and retries.
        metadata = await producer.send("gone", b"second")
        assert metadata.offset == 0
        assert producer.client.cluster.version > version
        assert values(await fetch(broker, "gone")) == [b"second"]


async def test_after_a_failed_numbered_batch_the_producer_starts_a_new_id(autojump_clock):
    async with open_test_broker() as broker:
        connector = LosingConnector(memory_connector(broker.listener))
        config = dict(linger_ms=0, request_timeout_ms=1000, delivery_timeout_ms=3000)
        async with open_producer(broker, connector=connector, **config) as producer:
            await producer.send("s", b"kept-1")
            first_id = producer.txn.producer_id
            connector.drop(ApiKey.PRODUCE, times=1000)
            with pytest.raises(KafkaTimeoutError):
                await producer.send("s", b"never arrives")  # sequence 1, never written
            connector.unsent.clear()
            # Sequence 2 after the gap would be OUT_OF_ORDER_SEQUENCE_NUMBER forever.
            assert (await producer.send("s", b"kept-2")).offset == 1
            assert producer.txn.producer_id != first_id
        assert values(await fetch(broker, "s")) == [b"kept-1", b"kept-2"]


async def test_records_follow_a_topic_that_grew_partitions(autojump_clock):
    # The producer keeps a topic's partition count between records; a refresh that reports
    # more partitions must reach explicit partitions, keys and the sticky partitioner alike.
    async with (
        open_test_broker(num_partitions=2) as broker,
        open_producer(broker, linger_ms=0, batch_size=50) as producer,
    ):
        producer.partitioner.rng = random.Random(3)
        assert (await producer.send("g", b"before", partition=1)).partition == 1
        with pytest.raises(KafkaError, match="partition 3 of 'g', which has 2"):
            await producer.send("g", b"x", partition=3)
        async with open_admin(broker) as admin:
            await admin.create_partitions({"g": 4})
        await producer.client.refresh_metadata()
        assert (await producer.send("g", b"after", partition=3)).partition == 3
        assert partition_for_key(b"k14", 2) == 1  # the key moves with the partition count
        assert (await producer.send("g", b"keyed", key=b"k14")).partition == 3
        keyless = [await producer.enqueue("g", b"v" * 30) for _ in range(40)]  # a switch every 2
        assert {(await f.wait()).partition for f in keyless} == {0, 1, 2, 3}
        assert values(await fetch(broker, "g", 3))[:2] == [b"after", b"keyed"]


async def test_a_topic_deleted_and_created_again_is_not_sent_by_its_old_metadata(autojump_clock):
    async with open_test_broker(num_partitions=4) as broker, open_producer(broker, linger_ms=0) as producer:
        assert (await producer.send("r", b"old", partition=3)).partition == 3
        assert (await producer.send("r", b"old", key=b"k14")).partition == 3
        async with open_admin(broker) as admin:
            await admin.delete_topics(["r"])
            await admin.create_topics([NewTopic("r", 2)])
        await producer.client.refresh_metadata()
        with pytest.raises(KafkaError, match="partition 3 of 'r', which has 2"):
            await producer.send("r", b"x", partition=3)
        assert (await producer.send("r", b"new", key=b"k14")).partition == 1
        assert values(await fetch(broker, "r", 1)) == [b"new"]


async def test_a_forgotten_topic_is_looked_up_again(autojump_clock):
    # The client drops a topic it deleted (ClusterMetadata.forget) without a refresh; the
    # producer must not keep sending by what it knew of it.
    async with open_test_broker(num_partitions=4) as broker, open_producer(broker, linger_ms=0) as producer:
        assert (await producer.send("f", b"old", partition=3)).partition == 3
        async with open_admin(broker) as admin:
            await admin.delete_topics(["f"])
            await admin.create_topics([NewTopic("f", 1)])
        producer.client.cluster.forget("f")
        with pytest.raises(KafkaError, match="partition 3 of 'f', which has 1"):
            await producer.send("f", b"x", partition=3)
        assert (await producer.send("f", b"new")).partition == 0


async def test_a_partition_that_is_not_an_int_is_refused_clearly(autojump_clock):
    async with open_test_broker() as broker, open_producer(broker) as producer:
        with pytest.raises(TypeError, match="partition must be an int, not float"):
            await producer.send("t", b"x", partition=0.0)
        with pytest.raises(TypeError, match="partition must be an int, not str"):
            await producer.send("t", b"x", partition="0")
        assert (await producer.send("t", b"x", partition=False)).partition == 0
