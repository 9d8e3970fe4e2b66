"""A member's session is a deadline on trio's clock (Kafka's heartbeat purgatory): the member
is still in its group a millisecond before it and gone at it — classic and KIP-848 consumer
groups, static members too. librdkafka's test 0081 closes static members (no LeaveGroup),
waits their session timeout plus one second and deletes their groups: that must work.

Also the coordinator shell's one timer queue, as another group machine (share groups) uses it:
``register_timers`` + ``apply``.
"""

from __future__ import annotations

import trio
from kio.schema.errors import ErrorCode

from trikafka.clock import now_ms
from trikafka.coordinator.group_protocol import Reply, ScheduleTimer
from trikafka.testing import open_test_broker

from . import test_consumer_groups as kip848
from .test_groups import SESSION_MS, Member, describe, join_all, request

DELETE_GROUPS = 42
EPSILON = 0.001


async def delete_group(client, group: str) -> ErrorCode:
    response = await client.request(request(DELETE_GROUPS, 2, groups_names=[group]))
    return response.results[0].error_code


async def test_closed_static_classic_members_leave_their_groups_exactly_at_the_session_deadline(autojump_clock):
    async with open_test_broker(group_initial_rebalance_delay_ms=0) as tb:
        async with tb.client() as a, tb.client() as b, tb.client() as admin:
            members = [Member(a, "static", instance_id="instance-a"), Member(b, "static", instance_id="instance-b")]
            await join_all(members, partitions=2)
            assert members[0].generation == 1
            # Both heartbeat, then close as a static member does: without LeaveGroup.
            await trio.sleep(1)
            assert await members[0].heartbeat() == ErrorCode.none
            assert await members[1].heartbeat() == ErrorCode.none
            deadline = trio.current_time() + SESSION_MS / 1000
            await trio.sleep_until(deadline - EPSILON)
            described = await describe(admin, "static")
            assert (described.group_state, len(described.members)) == ("Stable", 2)
            assert await delete_group(admin, "static") == ErrorCode.non_empty_group
            await trio.sleep_until(deadline)
            described = await describe(admin, "static")
            assert (described.group_state, len(described.members)) == ("Empty", 0)
            assert await delete_group(admin, "static") == ErrorCode.none


async def test_a_heartbeat_moves_the_classic_deadline_to_exactly_one_session_later(autojump_clock):
    async with open_test_broker(group_initial_rebalance_delay_ms=0) as tb:
        async with tb.client() as a, tb.client() as admin:
            member = Member(a, "moved", instance_id="only")
            await join_all([member], partitions=1)
            for _ in range(3):  # heartbeats at odd instants; each one sets the deadline
                await trio.sleep(SESSION_MS / 1000 * 0.7)
                assert await member.heartbeat() == ErrorCode.none
            deadline = trio.current_time() + SESSION_MS / 1000
            await trio.sleep_until(deadline - EPSILON)
            assert len((await describe(admin, "moved")).members) == 1
            await trio.sleep_until(deadline)
            assert not (await describe(admin, "moved")).members
            assert await member.heartbeat() == ErrorCode.unknown_member_id


async def test_consumer_group_members_leave_exactly_at_the_session_deadline(autojump_clock):
    async with open_test_broker(group_consumer_session_timeout_ms=45_000) as tb, tb.client() as c:
        await kip848.create_topic(c, "t", 2)
        static = kip848.Member(c, "g848", "s", instance_id="instance-s")
        dynamic = kip848.Member(c, "g848", "d")
        await static.heartbeat()
        await dynamic.heartbeat()
        await trio.sleep(2)
        await static.heartbeat()
        static_deadline = trio.current_time() + 45
        assert (await static.leave(epoch=-2)).member_epoch == -2  # keeps its place until then
        await trio.sleep(3)
        await dynamic.heartbeat()
        dynamic_deadline = trio.current_time() + 45
        await trio.sleep_until(static_deadline - EPSILON)
        assert sorted(m.member_id for m in (await kip848.describe(c, "g848")).members) == ["d", "s"]
        await trio.sleep_until(static_deadline)
        assert [m.member_id for m in (await kip848.describe(c, "g848")).members] == ["d"]
        await trio.sleep_until(dynamic_deadline - EPSILON)
        assert [m.member_id for m in (await kip848.describe(c, "g848")).members] == ["d"]
        assert await delete_group(c, "g848") == ErrorCode.non_empty_group
        await trio.sleep_until(dynamic_deadline)
        assert not (await kip848.describe(c, "g848")).members
        assert await delete_group(c, "g848") == ErrorCode.none


async def test_another_group_machine_gets_its_keys_back_at_their_deadlines(autojump_clock):
    """What a share-group machine does with the coordinator's timers: a key type of its own,
    ScheduleTimer effects through ``apply``, and each key back at its deadline exactly."""

    class ShareKey(tuple):
        pass

    fired: list[tuple[object, float]] = []
    async with open_test_broker() as tb:
        coordinator = tb.broker.group_coordinator
        coordinator.register_timers(ShareKey, lambda key, now: fired.append((key, trio.current_time())) or Reply(None))
        start, now = trio.current_time(), now_ms()
        later, sooner = ShareKey(("share-session", "g", "m1")), ShareKey(("share-session", "g", "m2"))
        coordinator.apply(Reply(None, (ScheduleTimer(later, now + 45_000), ScheduleTimer(sooner, now + 1_500))), now)
        await trio.sleep(60)
    assert fired == [(sooner, start + 1.5), (later, start + 45)]


async def test_an_offset_commit_restarts_a_classic_session_as_kafka_does(autojump_clock):
    """librdkafka commits on close, so a closed static member's session ends one session
    timeout after that commit (Kafka's OffsetMetadataManager reschedules it too); test 0081
    deletes the groups exactly one session timeout (its harness sets 6000 ms) after the close."""
    async with open_test_broker(group_initial_rebalance_delay_ms=0) as tb:
        async with tb.client() as a, tb.client() as admin:
            await kip848.create_topic(admin, "t", 1)
            member = Member(a, "commit", instance_id="closing")
            await join_all([member], partitions=1)
            assert await member.heartbeat() == ErrorCode.none
            await trio.sleep(3)
            commit = await a.request(request(
                8, 9, group_id="commit", generation_id_or_member_epoch=member.generation,
                member_id=member.member_id, group_instance_id="closing", retention_time_ms=-1,
                topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 100,
                                                      "committed_leader_epoch": -1, "committed_metadata": None}]}]))
            assert commit.topics[0].partitions[0].error_code == ErrorCode.none
            deadline = trio.current_time() + SESSION_MS / 1000
            await trio.sleep_until(deadline - EPSILON)
            assert await delete_group(admin, "commit") == ErrorCode.non_empty_group
            await trio.sleep_until(deadline)
            assert await delete_group(admin, "commit") == ErrorCode.none
