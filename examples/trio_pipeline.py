"""A Trio app: consume → transform → produce, exactly once, with Kafka transactions.

Each poll's records are transformed and written inside one transaction together with the
consumer's offsets (``send_offsets_to_transaction``), so the output and the progress commit
or abort together: a crash or a cancellation anywhere leaves read_committed readers of the
output with every input record transformed exactly once. The consumer is a KIP-848 member
(``group_protocol="consumer"``; ``--group-protocol classic`` for JoinGroup/SyncGroup): run
several copies, each with its own ``--transactional-id``, and they share the input's
partitions; one joining or leaving moves partitions between them, still exactly once (the
offsets carry the member epoch, so a member that lost a partition cannot commit for it).

Run it against a broker process::

    python -m trikafka --in-memory --listeners PLAINTEXT://127.0.0.1:9092 &
    python examples/trio_pipeline.py --bootstrap 127.0.0.1:9092 --input words --output shouted \\
        --seed 5 --idle-timeout 5

``--seed N`` first writes N records to the input topic; ``--idle-timeout`` stops the app after
that many seconds without input (otherwise it runs until Ctrl-C). ``examples/test_trio_pipeline.py``
runs the same ``run_pipeline`` against an in-memory broker under trio's MockClock.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any

import trio

from trikafka.client.consumer import open_consumer
from trikafka.client.errors import TransactionAbortedError
from trikafka.client.group_offsets import CommitFailedError
from trikafka.client.producer import open_producer


def shout(value: bytes | None) -> bytes | None:
    return None if value is None else value.upper() + b"!"


async def run_pipeline(
    bootstrap: Any,
    *,
    input_topic: str,
    output_topic: str,
    group_id: str = "trio-pipeline",
    transactional_id: str = "trio-pipeline-1",
    transform: Callable[[bytes | None], bytes | None] = shout,
    idle_timeout_s: float | None = None,
    group_protocol: str = "consumer",
    run_for_s: float | None = None,
) -> int:
    """Run until ``idle_timeout_s`` passes without input (forever if None), or for
    ``run_for_s`` (then leave the group between two transactions); returns how many records
    this run transformed and committed."""
    done = 0
    async with (
        open_consumer(
            bootstrap, group_id=group_id, group_protocol=group_protocol, isolation_level="read_committed",
            enable_auto_commit=False, auto_offset_reset="earliest",
        ) as consumer,
        open_producer(bootstrap, transactional_id=transactional_id) as producer,
    ):
        consumer.subscribe([input_topic])
        idle_since = trio.current_time()
        stop_at = math.inf if run_for_s is None else idle_since + run_for_s
        while trio.current_time() < stop_at and (
            idle_timeout_s is None or trio.current_time() - idle_since < idle_timeout_s
        ):
            batches = await consumer.getmany(timeout_ms=1000)
            if not batches:
                continue
            idle_since = trio.current_time()
            try:
                async with producer.transaction():
                    for records in batches.values():
                        for record in records:
                            await producer.enqueue(output_topic, transform(record.value), key=record.key)
                    offsets = {tp: records[-1].offset + 1 for tp, records in batches.items()}
                    await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            except (TransactionAbortedError, CommitFailedError):
                # Nothing of this batch is visible (a rebalance refused its offsets, or the
                # transaction aborted); read it again from where it started.
                for tp, records in batches.items():
                    if tp in consumer.assignment():  # else: its new owner reads it from the commit
                        consumer.seek(tp, records[0].offset)
                continue
            done += sum(len(records) for records in batches.values())
    return done


async def seed(bootstrap: Any, topic: str, count: int) -> None:
    async with open_producer(bootstrap) as producer:
        for i in range(count):
            await producer.enqueue(topic, b"word-%d" % i, key=b"%d" % i)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--input", default="words")
    parser.add_argument("--output", default="shouted")
    parser.add_argument("--group", default="trio-pipeline")
    parser.add_argument("--transactional-id", default="trio-pipeline-1")
    parser.add_argument("--seed", type=int, default=0, help="write N input records first")
    parser.add_argument("--idle-timeout", type=float, default=None, help="stop after S idle seconds")
    parser.add_argument("--run-for", type=float, default=None, help="leave the group after S seconds")
    parser.add_argument("--group-protocol", default="consumer", choices=("consumer", "classic"))
    args = parser.parse_args(argv)

    async def app() -> int:
        if args.seed:
            await seed(args.bootstrap, args.input, args.seed)
        return await run_pipeline(
            args.bootstrap, input_topic=args.input, output_topic=args.output, group_id=args.group,
            transactional_id=args.transactional_id, idle_timeout_s=args.idle_timeout,
            group_protocol=args.group_protocol, run_for_s=args.run_for,
        )

    try:
        count = trio.run(app)
    except KeyboardInterrupt:
        return 130
    print(f"transformed {count} records from {args.input} to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
