"""The Trio consumer's throughput next to confluent-kafka's and aiokafka's, on the same broker and data.

One topic is filled by confluent-kafka's producer (the ``produce`` workload's shape: ``count``
messages of ``size`` bytes in contiguous blocks per partition), then read whole twice: by the
Trio consumer (``assign`` every partition, ``seek_to_beginning``, ``getmany`` batches), by
aiokafka's (the same calls, benchmarks/aiokafka_client.py) and by confluent-kafka's consumer
(the ``consume`` workload). Each is timed from assignment to the
last message. Figures: each MB/s and the ratios Trio / confluent-kafka and Trio / aiokafka;
issue 31's goals (≥ 1.0× confluent-kafka, ≥ 2× aiokafka) are judged in the report. ``benchmarks/catalog.py``
lists these rows after the ``trio_produce`` ones (``python -m benchmarks --only trio_consume``).
"""

from __future__ import annotations

import time

import trio

from benchmarks.aiokafka_client import aiokafka_consume
from benchmarks.workloads import RoundState, Settings, Workload, consume, produce, versus_confluent

__all__ = ["trio_consume", "trio_consume_workloads"]


async def _consume(bootstrap: str, topic: str, partitions: int, count: int, limit_s: float) -> tuple[float, int]:
    from trikafka.client import TopicPartition, open_consumer

    async with open_consumer(bootstrap, enable_auto_commit=False, auto_offset_reset="earliest") as consumer:
        await consumer.client.wait_for_topic(topic)  # connected, metadata known: not timed
        got = payload = 0
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        with trio.fail_after(limit_s):
            while got < count:
                for records in (await consumer.getmany(timeout_ms=500, max_records=100_000)).values():
                    got += len(records)
                    payload += sum(len(r.value) for r in records)
        return time.perf_counter() - start, payload


def trio_consume(target, settings, state, *, label: str, size: int, count: int) -> dict:  # noqa: ANN001
    own = RoundState(state.round)
    produce(target, settings, own, label=label, size=size, count=count)
    topic, partitions = own.topics[(target.name, label)]
    elapsed, payload = trio.run(_consume, target.bootstrap, topic, partitions, count, settings.step_timeout)
    aio_elapsed, aio_payload = aiokafka_consume(target.bootstrap, topic, partitions, count, settings.step_timeout)
    reference = consume(target, settings, own, label=label, size=size, count=count)
    ours = payload / elapsed / 1e6
    aio = aio_payload / aio_elapsed / 1e6
    return {
        "aiokafka_mb_per_s": aio,
        "ratio_aiokafka": ours / aio,
        "mb_per_s": ours,
        "msgs_per_s": count / elapsed,
        "confluent_mb_per_s": reference["mb_per_s"],
        "ratio": ours / reference["mb_per_s"],
        "seconds": elapsed,
    }


def trio_consume_workloads(settings: Settings) -> list[Workload]:
    """The ``trio_consume_<label>`` rows, one per produce size of the settings."""
    return versus_confluent("trio_consume", "Trio consumer", trio_consume, settings)
