"""The fetch session cache's eviction choices (Kafka's ``FetchSessionCache.tryEvict``), pinned
case by case and against a plain reference that scans every session as the rules read.

The cache keeps its orders in heaps so a newcomer's eviction is O(log N); these tests say the
heaps choose exactly what a full scan would: the stalest session beyond ``eviction_ms`` first
(ties by id), else the cheapest evictable one by (privileged, size, id), and only when the
newcomer is bigger.
"""

from __future__ import annotations

import random

from trikafka.server.fetch_sessions import EVICTION_MS, FetchSessionCache

from .test_fetch_sessions import _manager, _open, _parts


def _cache(slots: int, seed: int = 3) -> FetchSessionCache:
    return FetchSessionCache(slots, rng=random.Random(seed))


def _create(cache: FetchSessionCache, now: int, size: int, privileged: bool = False) -> int:
    return cache.maybe_create(now, privileged, False, lambda: {("t", p): None for p in range(size)})


def test_equal_sizes_evict_the_lower_id() -> None:
    cache = _cache(3)
    ids = [_create(cache, 0, 4) for _ in range(3)]
    now = EVICTION_MS + 1
    for session_id in ids:  # all old now, none stale: evictable by everyone, same size
        cache.touch(cache.get(session_id), now)
    assert _create(cache, now, 5) > 0
    assert cache.get(min(ids)) is None and all(cache.get(i) for i in ids if i != min(ids))


def test_equally_stale_sessions_go_lowest_id_first() -> None:
    cache = _cache(3)
    ids = [_create(cache, 5, size) for size in (9, 1, 5)]  # last used at the same instant
    now = 5 + EVICTION_MS + 1
    order = []
    for _ in ids:
        before = {s.id for s in cache}
        assert _create(cache, now, 100) > 0
        order += list(before - {s.id for s in cache})
    assert order == sorted(ids), "stale ones leave by (last used, id), whatever their size"


def test_a_newcomer_must_be_bigger_than_the_cheapest() -> None:
    cache = _cache(1)
    only = _create(cache, 0, 3)
    cache.touch(cache.get(only), EVICTION_MS + 1)
    # Kafka compares (privileged, size, 0) with the victim's (privileged, size, id): a tie in size loses.
    assert _create(cache, EVICTION_MS + 2, 2) == 0 and _create(cache, EVICTION_MS + 2, 3) == 0
    assert cache.get(only) is not None
    assert _create(cache, EVICTION_MS + 2, 4) > 0 and cache.get(only) is None


def test_privileged_sessions_outrank_consumers_both_ways() -> None:
    manager, clock = _manager(slots=3)
    consumers = [_open(manager, _parts("c", partitions=n)) for n in (7, 2)]
    follower = _open(manager, _parts("f", partitions=50), privileged=True)
    # A follower evicts a consumer's session at once, the smallest, even when itself bigger...
    second = _open(manager, _parts("g", partitions=1), privileged=True)
    assert second > 0 and manager.cache.get(consumers[1]) is None
    # ...but not a fresh follower's session: only the other consumer's.
    third = _open(manager, _parts("h", partitions=1), privileged=True)
    assert third > 0 and manager.cache.get(consumers[0]) is None
    assert _open(manager, _parts("i", partitions=99), privileged=True) == 0, "followers' sessions are young"
    # Old enough, a follower's session is evictable by followers, the smallest first; consumers
    # still never evict one (privileged sorts after every consumer session).
    clock.now = EVICTION_MS + 1
    for session_id in (follower, second, third):
        manager.cache.touch(manager.cache.get(session_id), clock.now)
    assert _open(manager, _parts("j", partitions=500)) == 0
    fourth = _open(manager, _parts("k", partitions=2), privileged=True)
    smaller = min((second, third))
    assert fourth > 0 and manager.cache.get(smaller) is None and manager.cache.get(follower) is not None


def _reference_victim(sessions: dict, privileged: bool, size: int, now: int) -> int | None:
    """The rules as a full scan (what the cache did before its heaps)."""
    if not sessions:
        return None
    stalest = min(sessions.values(), key=lambda s: (s["used"], s["id"]))
    if now - stalest["used"] > EVICTION_MS:
        return stalest["id"]
    flag = "by_privileged" if privileged else "by_all"
    candidates = [s for s in sessions.values() if s[flag]]
    if not candidates:
        return None
    cheapest = min((s["privileged"], s["size"], s["id"]) for s in candidates)
    return None if (privileged, size, 0) < cheapest else cheapest[2]


def test_eviction_matches_a_full_scan_over_a_random_history() -> None:
    rng = random.Random(7)
    cache = _cache(40, seed=11)
    model: dict[int, dict] = {}
    now = 0
    for _ in range(5000):
        now += rng.choice((0, 0, 1, 50, 5_000, 40_000))
        op = rng.random()
        if op < 0.45 or not model:
            privileged, size = rng.random() < 0.2, rng.randint(1, 6)
            expected = _reference_victim(model, privileged, size, now) if len(model) >= 40 else None
            full = len(model) >= 40
            before = set(model)
            session_id = _create(cache, now, size, privileged)
            if full and expected is None:
                assert session_id == 0
            else:
                assert session_id > 0
                if full:
                    assert {s.id for s in cache} == (before - {expected}) | {session_id}
                    del model[expected]
                model[session_id] = {"id": session_id, "privileged": privileged, "created": now}
                _model_touch(model[session_id], now, size)
        elif op < 0.9:
            session = cache.get(rng.choice(list(model)))
            session.partitions = {("t", p): None for p in range(rng.randint(1, 6))}
            cache.touch(session, now)
            _model_touch(model[session.id], now, len(session.partitions))
        else:
            del model[cache.remove(rng.choice(list(model))).id]
        assert cache.total_partitions == sum(s["size"] for s in model.values())
    assert cache.evictions > 100, "the history exercised eviction"


def _model_touch(entry: dict, now: int, size: int) -> None:
    old = now - entry["created"] > EVICTION_MS
    entry.update(used=now, size=size, by_all=old, by_privileged=not entry["privileged"] or old)
