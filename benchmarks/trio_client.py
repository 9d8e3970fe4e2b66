"""The Trio producer's throughput next to confluent-kafka's and aiokafka's, on the same broker.

Both send ``count`` messages of ``size`` bytes with acks=1 and linger.ms=5 into a fresh topic,
in contiguous blocks per partition, timed from the first send to the end of ``flush()``. The
Trio producer runs ``trio.run`` in this process (as confluent-kafka does its client); it is
given librdkafka's batch size (1 MB) so the two batch alike. Figures: both MB/s and the ratio
Trio / confluent-kafka, and aiokafka's MB/s and Trio / aiokafka (benchmarks/aiokafka_client.py),
the same round. Issue 31's goals (≥ 0.9× confluent-kafka, ≥ 2× aiokafka) are judged in the
report (benchmarks/report.py, ``GOALS``); nothing is asserted in tests.
"""

from __future__ import annotations

import time
import uuid

import trio

from benchmarks.aiokafka_client import aiokafka_produce
from benchmarks.workloads import (
    RoundState,
    Settings,
    Workload,
    partitions_for,
    produce,
    versus_confluent,
)

__all__ = ["trio_produce", "trio_produce_workloads"]


async def _produce(bootstrap: str, topic: str, partitions: int, size: int, count: int) -> float:
    from trikafka.client import open_producer

    value = b"x" * size
    per_partition = count / partitions
    async with open_producer(
        bootstrap, acks=1, linger_ms=5, batch_size=1_000_000, buffer_memory=256 * 2**20
    ) as producer:
        await producer.client.wait_for_topic(topic)  # connected, metadata known: not timed
        start = time.perf_counter()
        futures = [await producer.enqueue(topic, value, partition=int(i / per_partition)) for i in range(count)]
        await producer.flush()
        elapsed = time.perf_counter() - start
        failed = [f.error for f in futures if f.error is not None]
    if failed:
        raise RuntimeError(f"{len(failed)} of {count} not delivered: {failed[:3]}")
    return elapsed


def trio_produce(target, settings, state, *, label: str, size: int, count: int) -> dict:  # noqa: ANN001
    partitions = partitions_for(size, count)
    topic = f"bench-trio-{label}-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, partitions)
    elapsed = trio.run(_produce, target.bootstrap, topic, partitions, size, count)
    reference = produce(target, settings, RoundState(state.round), label=label, size=size, count=count)
    aio_topic = f"bench-aiokafka-{label}-{uuid.uuid4().hex[:8]}"
    target.create_topic(aio_topic, partitions)
    aio = count * size / aiokafka_produce(target.bootstrap, aio_topic, partitions, size, count) / 1e6
    ours = count * size / elapsed / 1e6
    return {
        "aiokafka_mb_per_s": aio,
        "ratio_aiokafka": ours / aio,
        "mb_per_s": ours,
        "msgs_per_s": count / elapsed,
        "confluent_mb_per_s": reference["mb_per_s"],
        "ratio": ours / reference["mb_per_s"],
        "seconds": elapsed,
    }


def trio_produce_workloads(settings: Settings) -> list[Workload]:
    """The ``trio_produce_<label>`` rows, one per produce size of the settings."""
    return versus_confluent("trio_produce", "Trio producer", trio_produce, settings)
