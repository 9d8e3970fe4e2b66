"""aiokafka's producer and consumer, measured the way the Trio client's rows measure theirs.

The ``trio_produce``/``trio_consume`` rows set the Trio client beside confluent-kafka *and*
aiokafka on the same broker in the same round (issue 31's goals: ≥ 2× aiokafka on every row).
aiokafka gets the Trio producer's settings (acks=1, linger 5 ms, 1 MB batches) and the
consumer's defaults (``fetch_max_bytes`` 50 MB, ``max_partition_fetch_bytes`` 1 MB), runs in
``asyncio.run`` in this process, and is timed from the first send to the end of ``flush()``,
or from assignment to the last record.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["aiokafka_consume", "aiokafka_produce"]


async def _produce(bootstrap: str, topic: str, partitions: int, size: int, count: int) -> float:
    from aiokafka import AIOKafkaProducer

    value = b"x" * size
    per_partition = count / partitions
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=5, max_batch_size=1_000_000, max_request_size=2_000_000
    )
    await producer.start()
    try:
        await producer.partitions_for(topic)  # connected, metadata known: not timed
        start = time.perf_counter()
        futures = [await producer.send(topic, value, partition=int(i / per_partition)) for i in range(count)]
        await producer.flush()
        elapsed = time.perf_counter() - start
        await asyncio.gather(*futures)  # raises if any was not delivered
        return elapsed
    finally:
        await producer.stop()


def aiokafka_produce(bootstrap: str, topic: str, partitions: int, size: int, count: int) -> float:
    """Seconds to send ``count`` records of ``size`` bytes and flush."""
    return asyncio.run(_produce(bootstrap, topic, partitions, size, count))


async def _consume(bootstrap: str, topic: str, partitions: int, count: int, limit_s: float) -> tuple[float, int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        await consumer._client.force_metadata_update()  # connected, metadata known: not timed
        got = payload = 0
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.seek_to_beginning()
        async with asyncio.timeout(limit_s):
            while got < count:
                for records in (await consumer.getmany(timeout_ms=500, max_records=100_000)).values():
                    got += len(records)
                    payload += sum(len(r.value) for r in records)
        return time.perf_counter() - start, payload
    finally:
        await consumer.stop()


def aiokafka_consume(bootstrap: str, topic: str, partitions: int, count: int, limit_s: float) -> tuple[float, int]:
    """Seconds to read ``count`` records from the beginning, and their payload bytes."""
    return asyncio.run(_consume(bootstrap, topic, partitions, count, limit_s))
