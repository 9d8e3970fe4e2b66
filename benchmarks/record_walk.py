"""Micro-benchmark of batch validation: ``python -m benchmarks.record_walk``.

Not part of ``make bench`` (no broker, no client): it times the per-record walk that Kafka's
LogValidator also does, with the native walk and the pure-Python reference, and the whole
``iter_batches`` (header, CRC, walk) per record. CPU time of this process (``process_time``),
so a loaded machine inflates the figures less than wall time would; best and median of
``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from trikafka.protocol import records
from trikafka.protocol.records import BATCH_HEADER_SIZE, build_batch, iter_batches

__all__ = ["main"]

SHAPES = ((100, 1000), (1_000, 100), (10_000, 100))  # value bytes, records per batch


def _time(fn: Callable[[], object], per: int, rounds: int, number: int) -> tuple[float, float]:
    results = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(number):
            fn()
        results.append((time.process_time() - start) / number / per * 1e6)
    return min(results), statistics.median(results)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.record_walk")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=100, help="batches per round")
    args = parser.parse_args(argv)
    native = getattr(records, "NATIVE_RECORD_WALK", False)  # absent before the C walk
    walks = {"python": getattr(records, "_py_walk_records", records._walk_records)}
    if native:
        walks["native"] = records._walk_records
    print(f"native walk in use: {native}; µs per record, best (median)")
    saved = records._walk_records
    try:
        for size, count in SHAPES:
            batch = build_batch([(None, os.urandom(size), [], i) for i in range(count)])
            view = memoryview(batch)
            for name, walk in walks.items():
                records._walk_records = walk
                w = _time(
                    lambda walk=walk, view=view, count=count: walk(
                        view, BATCH_HEADER_SIZE, len(view), count, 0
                    ),
                    count, args.rounds, args.number,
                )
                v = _time(
                    lambda batch=batch: list(iter_batches(batch)), count, args.rounds, args.number
                )
                print(
                    f"{size:>6} B x {count:>4}/batch  {name:<6}  walk {w[0]:7.3f} ({w[1]:7.3f})"
                    f"  iter_batches {v[0]:7.3f} ({v[1]:7.3f})"
                )
    finally:
        records._walk_records = saved


if __name__ == "__main__":
    main()
