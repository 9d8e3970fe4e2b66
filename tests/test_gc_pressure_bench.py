"""``python -m benchmarks.gc_pressure`` runs, and a busy-polling consumer leaves the broker's
collector (nearly) nothing to do.

The count is behaviour, not speed: it does not move with a busy machine. With a deadline per
read and a process-wide table of decoded frames, 1,000 messages made ~7 collections of
generation 0 and one of generation 1; objects that live past one request are what it catches.
"""

from __future__ import annotations

from benchmarks.gc_pressure import measure


def test_a_busy_polling_consumer_leaves_the_collector_little_to_do() -> None:
    result = measure(1_000)
    assert result["latency"]["samples"] == 1_000
    collections = {int(generation): len(pauses) for generation, pauses in result["pauses"].items()}
    assert collections[0] <= 2 and collections[1] == 0, collections
