"""The share-partition machine and the share coordinator's timers, in virtual time.

The pure :class:`SharePartition` is driven offset by offset; the coordinator's lock and
session deadlines run on trio's clock under ``autojump_clock``, so a 30 s lock expires at once
and the test waits on the coordinator's own signals (``released``, the state-change callback).
"""

from __future__ import annotations

import math

import pytest
import trio

from trikafka.config import BrokerConfig
from trikafka.coordinator.share.assignor import assign_simple
from trikafka.coordinator.share.coordinator import ShareCoordinator
from trikafka.coordinator.share.partition import RecordState, SharePartition, SharePartitionLimits
from trikafka.coordinator.share.sessions import ShareSessionCache
from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.server.wiring import share_settings

LIMITS = SharePartitionLimits(lock_duration_ms=30_000, delivery_count_limit=3, max_record_locks=100)
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4


def fresh(start: int = 0) -> SharePartition:
    sp = SharePartition("g", "t", 0)
    sp.initialize(start)
    return sp


def test_acquire_locks_records_to_one_member_until_acknowledged():
    sp = fresh()
    assert sp.acquire("a", [(0, 4, False)], 3, now=0.0, limits=LIMITS) == [(0, 2, 1)]
    assert sp.acquire("b", [(0, 4, False)], 10, now=0.0, limits=LIMITS) == [(3, 4, 1)]
    with pytest.raises(KafkaProtocolError) as caught:
        sp.acknowledge("b", 0, 0, (ACCEPT,), 0.0, LIMITS)  # a holds it
    assert caught.value.error_code == ErrorCode.invalid_record_state
    sp.acknowledge("a", 0, 2, (ACCEPT,), 0.0, LIMITS)
    assert sp.start_offset == 3 and set(sp.in_flight) == {3, 4}


def test_release_makes_a_record_available_with_its_count_and_the_limit_archives_it():
    sp = fresh()
    for delivery in (1, 2, 3):
        assert sp.acquire("a", [(0, 0, False)], 10, now=0.0, limits=LIMITS) == [(0, 0, delivery)]
        sp.acknowledge("a", 0, 0, (RELEASE,), 0.0, LIMITS)
    assert sp.start_offset == 1 and not sp.in_flight  # archived at the limit, then forgotten
    assert sp.archived_for_dlq == [(0, 3, "DELIVERY_COUNT_EXCEEDED")]


def test_reject_archives_and_per_offset_types_apply_one_each():
    sp = fresh()
    sp.acquire("a", [(0, 2, False)], 10, now=0.0, limits=LIMITS)
    sp.acknowledge("a", 0, 2, (RELEASE, REJECT, ACCEPT), 0.0, LIMITS)
    assert sp.in_flight[0].state is RecordState.AVAILABLE
    assert sp.in_flight[1].state is RecordState.ARCHIVED
    assert sp.in_flight[2].state is RecordState.ACKNOWLEDGED
    assert sp.archived_for_dlq == [(1, 1, "REJECTED")]
    assert sp.acquire("b", [(0, 2, False)], 10, now=0.0, limits=LIMITS) == [(0, 0, 2)]


def test_control_records_and_gaps_are_archived_never_acquired():
    sp = fresh()
    assert sp.acquire("a", [(0, 0, False), (1, 1, True), (4, 5, False)], 10, now=0.0, limits=LIMITS) == \
        [(0, 0, 1), (4, 5, 1)]
    assert [sp.in_flight[o].state for o in (1, 2, 3)] == [RecordState.ARCHIVED] * 3
    sp.acknowledge("a", 0, 0, (ACCEPT,), 0.0, LIMITS)
    assert sp.start_offset == 4


def test_the_record_lock_limit_bounds_what_is_in_flight():
    sp = fresh()
    small = SharePartitionLimits(30_000, 3, max_record_locks=2)
    assert sp.acquire("a", [(0, 9, False)], 10, now=0.0, limits=small) == [(0, 1, 1)]
    assert sp.end_offset == 2


def test_records_past_a_full_lock_window_stay_unread_never_taken_for_gaps():
    # the read returned more batches than the window holds: the ones past it are records, not gaps
    sp = fresh()
    small = SharePartitionLimits(30_000, 3, max_record_locks=2)
    batches = [(0, 0, False), (1, 1, False), (2, 2, False), (3, 3, False)]
    assert sp.acquire("a", batches, 10, now=0.0, limits=small) == [(0, 1, 1)]
    assert (sp.end_offset, sp.totals["Archived"], set(sp.in_flight)) == (2, 0, {0, 1})
    sp.acknowledge("a", 0, 1, (ACCEPT,), 0.0, small)
    assert sp.acquire("a", batches, 10, now=0.0, limits=small) == [(2, 3, 1)]
    assert sp.totals == {"Acknowledged": 2, "Archived": 0}


def test_locks_expire_and_renew_pushes_them_back():
    sp = fresh()
    sp.acquire("a", [(0, 1, False)], 10, now=0.0, limits=LIMITS)
    assert sp.next_deadline() == 30.0
    sp.acknowledge("a", 1, 1, (RENEW,), 20.0, LIMITS)
    assert sp.expire_locks(30.0, LIMITS) == 1
    assert sp.in_flight[0].state is RecordState.AVAILABLE and sp.in_flight[1].state is RecordState.ACQUIRED
    assert sp.next_deadline() == 50.0
    sp.acknowledge("a", 1, 1, (ACCEPT,), 21.0, LIMITS)
    assert sp.next_deadline() == math.inf


def test_simple_assignor_shares_partitions_when_members_outnumber_them():
    members = {f"m{i}": ("t",) for i in range(5)}
    assignment = assign_simple(members, {"t": (0, 1)})
    assert all(len(a["t"]) == 1 for a in assignment.values())
    assert sorted(p for a in assignment.values() for p in a["t"]) == [0, 0, 0, 1, 1]
    assert assign_simple({"a": ("t",), "b": ("t",)}, {"t": range(5)}) == {"a": {"t": frozenset({0, 2, 4})},
                                                                          "b": {"t": frozenset({1, 3})}}


def test_simple_assignor_assigns_only_the_partitions_it_is_given():
    """The coordinator hands it the initialized share partitions only."""
    assert assign_simple({"a": ("t",), "b": ("t",)}, {"t": (0, 3)}) == {"a": {"t": frozenset({0})},
                                                                        "b": {"t": frozenset({3})}}
    assert assign_simple({"a": ("t",)}, {"t": ()}) == {"a": {}}


async def test_the_coordinator_assigns_only_initialized_share_partitions(autojump_clock):
    """Partitions of a subscribed topic are initialized at the heartbeat (Kafka's
    InitializeShareGroupState); one whose log cannot be read yet is not assigned, and is once it is."""
    readable = {0}

    def start(group_id: str, topic: str, partition: int) -> int | None:
        return 7 if partition in readable else None

    coordinator = ShareCoordinator(share_settings(BrokerConfig()), lambda: {"t": 2}, initial_offset=start)
    fields = dict(rack_id=None, client_id="c", client_host="/h")
    first = coordinator.heartbeat("g", "m", 0, subscribed=("t",), **fields)
    assert first.assignment == {"t": frozenset({0})}
    assert coordinator.partitions[("g", "t", 0)].start_offset == 7
    assert ("g", "t", 1) not in coordinator.partitions
    readable.add(1)
    autojump_clock.jump(5)  # past share.assignment.interval.ms
    second = coordinator.heartbeat("g", "m", first.member_epoch, subscribed=None, **fields)
    assert second.assignment == {"t": frozenset({0, 1})}
    assert coordinator.partitions[("g", "t", 1)].initialized


def test_share_sessions_check_their_epochs():
    cache = ShareSessionCache(max_sessions=1)
    session, _ = cache.open("g", "m", [("t", 0)])
    assert cache.get("g", "m", 1) is session
    session.next_epoch()
    with pytest.raises(KafkaProtocolError) as caught:
        cache.get("g", "m", 1)
    assert caught.value.error_code == ErrorCode.invalid_share_session_epoch
    with pytest.raises(KafkaProtocolError) as caught:
        cache.open("g", "other", [])
    assert caught.value.error_code == ErrorCode.share_session_limit_reached


async def test_an_acquisition_lock_expires_in_virtual_time(autojump_clock):
    shares = ShareCoordinator(share_settings(BrokerConfig()), lambda: {"t": 1})
    async with trio.open_nursery() as nursery:
        await nursery.start(shares.run)
        sp = shares.share_partition("g", "t", 0)
        sp.initialize(0)
        start = trio.current_time()
        sp.acquire("a", [(0, 0, False)], 10, now=start, limits=shares.limits("g"))
        shares.changed(sp)
        await shares.released.wait_value(lambda v: v > 0)
        assert trio.current_time() - start == pytest.approx(30.0)  # group.share.record.lock.duration.ms
        assert sp.in_flight[0].state is RecordState.AVAILABLE and sp.in_flight[0].delivery_count == 1
        nursery.cancel_scope.cancel()


async def test_a_silent_member_is_removed_after_the_session_timeout(autojump_clock):
    changed = trio.Event()
    shares = ShareCoordinator(share_settings(BrokerConfig()), lambda: {"t": 1}, on_state_change=lambda: changed.set())
    async with trio.open_nursery() as nursery:
        await nursery.start(shares.run)
        result = shares.heartbeat("g", "m1", 0, rack_id=None, subscribed=("t",), client_id="c", client_host="/h")
        assert result.assignment == {"t": frozenset({0})} and result.member_epoch >= 1
        sp = shares.share_partition("g", "t", 0)
        sp.initialize(0)
        sp.acquire("m1", [(0, 0, False)], 10, now=trio.current_time(), limits=shares.limits("g"))
        shares.changed(sp)
        start = trio.current_time()
        while shares.groups["g"].members:
            changed = trio.Event()
            await changed.wait()
        assert trio.current_time() - start == pytest.approx(45.0)  # group.share.session.timeout.ms
        assert shares.groups["g"].state == "Empty"
        nursery.cancel_scope.cancel()


def test_a_new_target_assignment_waits_for_the_assignment_interval():
    from trikafka.coordinator.share.group import ShareGroup

    group = ShareGroup("g")
    common = dict(rack_id=None, client_id="c", client_host="/h", topics={"t": 2}, max_size=10,
                  heartbeat_interval_ms=5000, assignment_interval_ms=1000)
    a = group.heartbeat("a", 0, subscribed=("t",), now=0.0, **common)
    assert a.assignment == {"t": frozenset({0, 1})}
    b = group.heartbeat("b", 0, subscribed=("t",), now=0.5, **common)
    assert b.assignment == {} and group.group_epoch > group.assignment_epoch  # within the interval
    b = group.heartbeat("b", b.member_epoch, subscribed=None, now=1.0, **common)
    assert b.assignment == {"t": frozenset({1})}
    a = group.heartbeat("a", a.member_epoch, subscribed=None, now=1.1, **common)
    assert a.assignment == {"t": frozenset({0})} and a.member_epoch == b.member_epoch == group.assignment_epoch
