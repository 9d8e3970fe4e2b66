"""Incremental fetch sessions (KIP-227): the sans-IO cache, then the broker over the in-memory
transport with MockClock.

The cache tests drive :mod:`trikafka.server.fetch_sessions` with explicit times and a seeded
random source; the broker tests send Fetch v12 (topic names) and v13+ (topic ids) requests and
check which partitions come back, what session id and epoch rules the broker applies, and that
an idle incremental poll is answered with no partitions at all.
"""

from __future__ import annotations

import random

import pytest

from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch
from trikafka.server.fetch_sessions import (
    EVICTION_MS,
    FetchManager,
    FetchSessionCache,
    PartitionRequest,
    next_epoch,
)
from trikafka.testing import open_test_broker

from .test_topics_and_data import create_topic, metadata, produce, records_of, request


def _parts(*names: str, partitions: int = 1) -> list[PartitionRequest]:
    return [PartitionRequest(n, p, 0, 1000) for n in names for p in range(partitions)]


def _result(item: PartitionRequest, hw: int = 0, records: bytes = b"", error=ErrorCode.none) -> dict:
    return {"key": item.topic, "partition_index": item.partition, "error_code": error,
            "high_watermark": hw, "log_start_offset": 0, "preferred_read_replica": -1, "records": records}


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _manager(slots: int = 10, seed: int = 1) -> tuple[FetchManager, Clock]:
    clock = Clock()
    return FetchManager(FetchSessionCache(slots, rng=random.Random(seed)), clock), clock


def _open(manager: FetchManager, partitions: list[PartitionRequest], privileged: bool = False) -> int:
    context = manager.new_context(0, 0, partitions, [], privileged=privileged)
    _, session_id, _ = context.respond([_result(p) for p in context.partitions])
    return session_id


# --- the sans-IO cache -----------------------------------------------------------------------


def test_epochs_wrap_to_one_and_final_stays_final() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(7) == 8
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(-1) == -1


def test_full_fetch_opens_a_session_and_incremental_answers_only_news() -> None:
    manager, _ = _manager()
    parts = _parts("a", "b", partitions=2)
    session_id = _open(manager, parts)
    assert session_id > 0
    session = manager.cache.get(session_id)
    assert session.epoch == 1 and list(session.partitions) == [p.key for p in parts]

    # Nothing changed: every partition is read, none is answered.
    context = manager.new_context(session_id, 1, [], [])
    assert [p.key for p in context.partitions] == [p.key for p in parts]
    error, sid, kept = context.respond([_result(p) for p in context.partitions])
    assert (error, sid, kept) == (ErrorCode.none, session_id, [])

    # One partition got records, another a new high watermark only: both answered; the one
    # with records moves to the back of the session's order.
    context = manager.new_context(session_id, 2, [], [])
    results = [_result(p) for p in context.partitions]
    results[0] = _result(parts[0], hw=3, records=b"x")
    results[3] = _result(parts[3], hw=5)
    _, _, kept = context.respond(results)
    assert [(r["key"], r["partition_index"]) for r in kept] == [("a", 0), ("b", 1)]
    assert list(session.partitions)[-1] == ("a", 0)
    # The high watermark is remembered: the same value again is no news.
    context = manager.new_context(session_id, 3, [], [])
    results = [_result(p, hw={("a", 0): 3, ("b", 1): 5}.get(p.key, 0)) for p in context.partitions]
    assert context.respond(results)[2] == []


def test_incremental_updates_adds_and_forgets_partitions() -> None:
    manager, _ = _manager()
    session_id = _open(manager, _parts("a", partitions=2))
    moved = PartitionRequest("a", 1, 42, 1000)
    new = PartitionRequest("c", 0, 7, 500)
    context = manager.new_context(session_id, 1, [moved, new], [("a", 0)])
    assert [(p.key, p.fetch_offset) for p in context.partitions] == [(("a", 1), 42), (("c", 0), 7)]
    # A new partition is news the first time (its high watermark was unknown); a moved one
    # with nothing new is not.
    kept = context.respond([_result(p) for p in context.partitions])[2]
    assert [(r["key"], r["partition_index"]) for r in kept] == [("c", 0)]
    # Forgetting every partition closes the session; the fetch is then sessionless.
    context = manager.new_context(session_id, 2, [], [("a", 1), ("c", 0)])
    assert context.respond([])[1] == 0
    assert manager.cache.get(session_id) is None


@pytest.mark.parametrize(
    ("session_id", "epoch", "error"),
    [(12345, 1, ErrorCode.fetch_session_id_not_found), (None, 5, ErrorCode.invalid_fetch_session_epoch)],
)
def test_unknown_session_and_wrong_epoch_are_refused(session_id, epoch, error) -> None:
    manager, _ = _manager()
    opened = _open(manager, _parts("a"))
    context = manager.new_context(session_id or opened, epoch, [], [])
    assert context.partitions == []
    assert context.respond([]) == (error, 0, [])
    assert manager.cache.get(opened).epoch == 1, "a refused request does not advance the epoch"


def test_topic_ids_must_stay_topic_ids() -> None:
    manager, _ = _manager()
    context = manager.new_context(0, 0, _parts("a"), [], uses_topic_ids=True)
    _, session_id, _ = context.respond([_result(p) for p in context.partitions])
    refused = manager.new_context(session_id, 1, [], [], uses_topic_ids=False)
    assert refused.respond([])[0] == ErrorCode.fetch_session_topic_id_error


def test_full_fetch_closes_the_session_it_names_and_final_epoch_opens_none() -> None:
    manager, _ = _manager()
    first = _open(manager, _parts("a"))
    context = manager.new_context(first, -1, _parts("a"), [])
    assert context.respond([_result(p) for p in context.partitions])[1] == 0
    assert manager.cache.get(first) is None and len(manager.cache) == 0


def test_a_racing_duplicate_loses_at_answer_time() -> None:
    manager, _ = _manager()
    session_id = _open(manager, _parts("a"))
    slow = manager.new_context(session_id, 1, [], [])  # a long poll, answered later
    fast = manager.new_context(session_id, 2, [], [])
    assert fast.respond([_result(p) for p in fast.partitions])[0] == ErrorCode.none
    assert slow.respond([_result(p) for p in slow.partitions])[0] == ErrorCode.invalid_fetch_session_epoch


def test_eviction_follows_kafkas_rules() -> None:
    manager, clock = _manager(slots=2)
    small = _open(manager, _parts("s"))
    big = _open(manager, _parts("b", partitions=5))
    # Full, nothing stale, nothing old enough to be evictable: no session for a newcomer.
    assert _open(manager, _parts("n", partitions=9)) == 0
    # A privileged newcomer (a follower) may evict a consumer's session at once: the smallest.
    follower = _open(manager, _parts("f", partitions=1), privileged=True)
    assert follower > 0 and manager.cache.get(small) is None and manager.cache.evictions == 1
    # Once older than EVICTION_MS at a touch, a session may be evicted by a bigger newcomer...
    clock.now = EVICTION_MS + 1
    manager.cache.touch(manager.cache.get(big), clock.now)
    manager.cache.touch(manager.cache.get(follower), clock.now)
    # ...but not by a smaller one (2 < 5 partitions), and a consumer never evicts a follower's
    # session (privileged sorts last).
    assert _open(manager, _parts("y", partitions=2)) == 0
    bigger = _open(manager, _parts("x", partitions=9))
    assert bigger > 0 and manager.cache.get(big) is None and manager.cache.get(follower) is not None
    # A session idle longer than EVICTION_MS is stale: anyone may take its slot, the least
    # recently used first.
    clock.now = 3 * EVICTION_MS
    manager.cache.touch(manager.cache.get(bigger), clock.now - 1)
    assert _open(manager, _parts("z", partitions=1)) > 0
    assert manager.cache.get(follower) is None and manager.cache.get(bigger) is not None


def test_zero_slots_means_no_sessions() -> None:
    manager, _ = _manager(slots=0)
    assert _open(manager, _parts("a")) == 0


# --- through the broker ----------------------------------------------------------------------


def _fetch(version, topics, *, session_id=0, epoch=0, forgotten=(), by_id=False, max_wait=0):
    return request(
        1, version, replica_id=-1, max_wait=max_wait, min_bytes=1, max_bytes=10_000_000, isolation_level=0,
        session_id=session_id, session_epoch=epoch, rack_id="",
        topics=[
            {"topic": None if by_id else t, "topic_id": t if by_id else None,
             "partitions": [{"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
                             "log_start_offset": -1, "partition_max_bytes": 1_000_000} for p, o in parts]}
            for t, parts in topics.items()
        ],
        forgotten_topics_data=[
            {"topic": None if by_id else t, "topic_id": t if by_id else None, "partitions": list(ps)}
            for t, ps in forgotten
        ],
    )


def _answered(response) -> list[tuple]:
    return [
        (getattr(t, "topic_id", None) or t.topic, p.partition_index) for t in response.responses for p in t.partitions
    ]


@pytest.mark.parametrize("version", [7, 12, 13, 18])
async def test_consumer_session_over_the_wire(autojump_clock, version):
    by_id = version >= 13
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "s", partitions=4)
        topic_id = (await metadata(client, ["s"])).topics[0].topic_id
        key = topic_id if by_id else "s"
        everything = {key: [(p, 0) for p in range(4)]}
        full = await client.request(_fetch(version, everything, by_id=by_id))
        assert full.error_code == ErrorCode.none and full.session_id > 0
        assert len(_answered(full)) == 4
        sid = full.session_id

        idle = await client.request(_fetch(version, {}, session_id=sid, epoch=1, by_id=by_id))
        assert (idle.error_code, idle.session_id, _answered(idle)) == (ErrorCode.none, sid, [])

        await produce(client, 9, "s", None, 2, build_batch([(b"k", b"v", [], 0)]))
        news = await client.request(_fetch(version, {}, session_id=sid, epoch=2, by_id=by_id))
        assert _answered(news) == [(key, 2)]
        assert [r[2] for r in records_of(news.responses[0].partitions[0].records)] == [b"v"]
        # The client moves partition 2 past the record and forgets partition 3.
        moved = await client.request(
            _fetch(version, {key: [(2, 1)]}, session_id=sid, epoch=3, forgotten=[(key, [3])], by_id=by_id)
        )
        assert _answered(moved) == []
        await produce(client, 9, "s", None, 3, build_batch([(b"k", b"forgotten", [], 0)]))
        quiet = await client.request(_fetch(version, {}, session_id=sid, epoch=4, by_id=by_id))
        assert _answered(quiet) == [], "partition 3 left the session"

        stale = await client.request(_fetch(version, {}, session_id=sid, epoch=4, by_id=by_id))
        assert stale.error_code == ErrorCode.invalid_fetch_session_epoch and stale.session_id == 0
        unknown = await client.request(_fetch(version, {}, session_id=sid + 1, epoch=1, by_id=by_id))
        assert unknown.error_code == ErrorCode.fetch_session_id_not_found
        # A full fetch with FINAL_EPOCH closes the session and stays sessionless.
        closed = await client.request(_fetch(version, everything, session_id=sid, epoch=-1, by_id=by_id))
        assert closed.session_id == 0 and len(_answered(closed)) == 4
        gone = await client.request(_fetch(version, {}, session_id=sid, epoch=5, by_id=by_id))
        assert gone.error_code == ErrorCode.fetch_session_id_not_found


async def test_incremental_long_poll_wakes_on_a_produce_to_a_session_partition(autojump_clock):
    import trio

    async with open_test_broker() as tb, tb.client() as client, tb.client() as producer:
        await create_topic(client, "lp", partitions=2)
        full = await client.request(_fetch(12, {"lp": [(0, 0), (1, 0)]}))
        sid = full.session_id

        async def later():
            await trio.sleep(0.2)
            await produce(producer, 9, "lp", None, 1, build_batch([(b"k", b"late", [], 0)]))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(later)
            start = trio.current_time()
            # The request names no partition: the broker waits on the session's partitions.
            response = await client.request(_fetch(12, {}, session_id=sid, epoch=1, max_wait=5000))
            waited = trio.current_time() - start
        assert _answered(response) == [("lp", 1)]
        assert 0.2 <= waited < 5


async def test_kafka_python_style_sessionless_and_old_versions_get_session_zero(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "old")
        for version in range(4, 7):  # the oldest Fetch advertised is v4
            response = await client.request(_fetch(version, {"old": [(0, 0)]}))
            assert getattr(response, "session_id", 0) == 0
        response = await client.request(_fetch(12, {"old": [(0, 0)]}, epoch=-1))
        assert response.session_id == 0


async def test_max_incremental_fetch_session_cache_slots_bounds_the_cache(autojump_clock):
    async with open_test_broker(max_incremental_fetch_session_cache_slots=1) as tb, tb.client() as client:
        await create_topic(client, "c")
        first = await client.request(_fetch(12, {"c": [(0, 0)]}))
        second = await client.request(_fetch(12, {"c": [(0, 0)]}))
        assert first.session_id > 0 and second.session_id == 0, "no room, nothing evictable yet"
