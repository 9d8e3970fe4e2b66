"""What a new fetch session costs once the cache is full, vs the cache's slots.

``python -m benchmarks.fetch_session_cache [--slots 1000,10000,100000] [--new N]``. The broker's
:class:`~trikafka.server.fetch_sessions.FetchSessionCache` (sans-IO, driven directly with explicit
times) is filled to ``slots`` sessions of one partition each; then ``N`` newcomers each take a
slot (default: as many as the slots), in Kafka's two ways (``FetchSessionCache.tryEvict``):

* ``stale``: every cached session has been idle longer than ``eviction_ms``, so each newcomer
  evicts the least recently used one;
* ``cheapest``: the cached sessions are old enough to be evictable but used recently, so each
  newcomer (two partitions) evicts the smallest evictable one.

The figure is CPU µs per newcomer (``time.process_time``), which a rebalance of N consumers pays
N times once the slots (Kafka's ``max.incremental.fetch.session.cache.slots``, 1,000) are full.
"""

from __future__ import annotations

import argparse
import random
import time

from trikafka.server.fetch_sessions import EVICTION_MS, FetchSessionCache

__all__ = ["new_session_cost"]


def _partitions(size: int):  # noqa: ANN202
    return lambda: {("t", p): None for p in range(size)}


def new_session_cost(slots: int, newcomers: int | None = None) -> dict[str, float]:
    """CPU µs per new session at a full cache of ``slots``, for each way of finding room;
    ``newcomers`` defaults to ``slots`` (every slot turned over once, so the cache's amortised
    housekeeping is counted in full)."""
    figures = {}
    for mode in ("stale", "cheapest"):
        cache = FetchSessionCache(slots, rng=random.Random(1))
        ids = [cache.maybe_create(0, False, False, _partitions(1)) for _ in range(slots)]
        now = EVICTION_MS + 1
        if mode == "cheapest":  # used just now: evictable (old), not stale
            for session_id in ids:
                cache.touch(cache.get(session_id), now)
        count = min(newcomers or slots, slots)
        started = time.process_time()
        for i in range(count):
            assert cache.maybe_create(now + i, False, False, _partitions(2)) > 0
        figures[f"{mode}_us"] = (time.process_time() - started) * 1e6 / count
        assert cache.evictions == count and len(cache) == slots
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", default="1000,10000,100000")
    parser.add_argument("--new", type=int, default=None, help="newcomers per size (default: the slots)")
    args = parser.parse_args()
    print("| slots | new session, stale victim (µs) | new session, cheapest victim (µs) |\n|---:|---:|---:|")
    for slots in (int(s) for s in args.slots.split(",")):
        figures = new_session_cost(slots, args.new)
        print(f"| {slots:,} | {figures['stale_us']:.1f} | {figures['cheapest_us']:.1f} |")


if __name__ == "__main__":
    main()
