"""Consumer groups over the in-memory transport, in virtual time (MockClock).

Every timeout of the protocol — the initial rebalance delay, session expiry, the rebalance
timeout — is asserted to the millisecond of virtual time, which is only possible because the
coordinator's timers run on trio's clock.
"""

from __future__ import annotations

import json

import pytest
import trio

from trikafka.errors import ErrorCode
from trikafka.protocol.entities import build
from trikafka.protocol.registry import ApiRegistry
from trikafka.testing import open_test_broker

REGISTRY = ApiRegistry()
SESSION_MS = 10_000


def request(api_key: int, version: int, **fields):
    return build(REGISTRY.get(api_key, version).request_type, **fields)


class Member:
    """One group member, speaking the classic protocol through the project's client."""

    def __init__(self, client, group: str, instance_id: str | None = None) -> None:
        self.client = client
        self.group = group
        self.instance_id = instance_id
        self.member_id = ""
        self.generation = -1
        self.join_response = None
        self.assignment: list[int] = []

    async def join(self, rebalance_ms: int = 60_000):
        while True:
            response = await self.client.request(
                request(
                    11,
                    9,
                    group_id=self.group,
                    session_timeout=SESSION_MS,
                    rebalance_timeout=rebalance_ms,
                    member_id=self.member_id,
                    group_instance_id=self.instance_id,
                    protocol_type="consumer",
                    protocols=[{"name": "range", "metadata": b"topics"}],
                    reason=None,
                )
            )
            if response.error_code == ErrorCode.member_id_required:
                self.member_id = response.member_id
                continue
            self.join_response = response
            if response.error_code == ErrorCode.none:
                self.member_id = response.member_id
                self.generation = response.generation_id
            return response

    async def sync(self, partitions: int = 0):
        assignments = []
        response = self.join_response
        if response.leader == self.member_id and response.members and not response.skip_assignment:
            ids = [m.member_id for m in response.members]
            for i, member_id in enumerate(ids):
                mine = [p for p in range(partitions) if p % len(ids) == i]
                assignments.append({"member_id": member_id, "assignment": json.dumps(mine).encode()})
        result = await self.client.request(
            request(
                14,
                5,
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                protocol_type="consumer",
                protocol_name="range",
                assignments=assignments,
            )
        )
        if result.error_code == ErrorCode.none:
            self.assignment = json.loads(result.assignment or b"[]")
        return result

    async def heartbeat(self) -> ErrorCode:
        response = await self.client.request(
            request(12, 4, group_id=self.group, generation_id=self.generation,
                    member_id=self.member_id, group_instance_id=self.instance_id)
        )
        return response.error_code

    async def leave(self) -> ErrorCode:
        response = await self.client.request(
            request(13, 5, group_id=self.group,
                    members=[{"member_id": self.member_id, "group_instance_id": self.instance_id, "reason": None}])
        )
        return response.members[0].error_code


async def describe(client, group: str):
    response = await client.request(request(15, 5, groups=[group], include_authorized_operations=False))
    return response.groups[0]


async def join_all(members, partitions: int, rebalance_ms: int = 60_000):
    async with trio.open_nursery() as nursery:
        for member in members:
            nursery.start_soon(member.join, rebalance_ms)
    async with trio.open_nursery() as nursery:
        for member in members:
            nursery.start_soon(member.sync, partitions)


async def test_three_members_form_one_generation_with_a_complete_disjoint_assignment(autojump_clock):
    async with open_test_broker() as tb:
        async with tb.client() as a, tb.client() as b, tb.client() as c:
            members = [Member(x, "trio") for x in (a, b, c)]
            await join_all(members, partitions=7)
            assert {m.generation for m in members} == {1}
            leaders = {m.join_response.leader for m in members}
            assert len(leaders) == 1
            assigned = [p for m in members for p in m.assignment]
            assert sorted(assigned) == list(range(7))  # complete and disjoint
            described = await describe(a, "trio")
            assert described.group_state == "Stable"
            assert len(described.members) == 3


async def test_initial_rebalance_delay_holds_and_extends_the_first_rebalance(autojump_clock):
    async with open_test_broker(group_initial_rebalance_delay_ms=3000) as tb:
        async with tb.client() as a, tb.client() as b:
            first, second = Member(a, "delayed"), Member(b, "delayed")
            start = trio.current_time()
            answered = {}

            async def join(member, name, after):
                await trio.sleep(after)
                await member.join()
                answered[name] = trio.current_time() - start

            async with trio.open_nursery() as nursery:
                nursery.start_soon(join, first, "first", 0)
                nursery.start_soon(join, second, "second", 2)
            # Joined at 0 s and 2 s: the 3 s delay runs out at 3 s with a newcomer, so it
            # runs once more, and both answers come at 6 s with one generation.
            assert answered == {"first": pytest.approx(6.0), "second": pytest.approx(6.0)}
            assert first.generation == second.generation == 1


async def test_lone_member_waits_exactly_the_initial_delay(autojump_clock):
    async with open_test_broker(group_initial_rebalance_delay_ms=3000) as tb, tb.client() as a:
        start = trio.current_time()
        await Member(a, "alone").join()
        assert trio.current_time() - start == pytest.approx(3.0)


async def test_silent_member_expires_at_exactly_the_session_timeout(autojump_clock):
    async with open_test_broker(group_initial_rebalance_delay_ms=0) as tb:
        async with tb.client() as a, tb.client() as b, tb.client() as observer:
            alive, silent = Member(a, "hb"), Member(b, "hb")
            await join_all([alive, silent], partitions=4)
            assert alive.generation == 1
            last_heartbeat = trio.current_time()
            assert await silent.heartbeat() == ErrorCode.none
            codes = []

            async def keep_alive():
                while True:
                    await trio.sleep(1)
                    codes.append(await alive.heartbeat())
                    if codes[-1] != ErrorCode.none:
                        return

            async with trio.open_nursery() as nursery:
                nursery.start_soon(keep_alive)
                await trio.sleep_until(last_heartbeat + SESSION_MS / 1000 - 0.001)
                assert len((await describe(observer, "hb")).members) == 2  # not before
                await trio.sleep_until(last_heartbeat + SESSION_MS / 1000 + 0.001)
                described = await describe(observer, "hb")
                assert [m.member_id for m in described.members] == [alive.member_id]
                assert described.group_state == "PreparingRebalance"
            assert codes[-1] == ErrorCode.rebalance_in_progress
            # The survivor rejoins and gets every partition.
            await alive.join()
            await alive.sync(partitions=4)
            assert alive.generation == 2
            assert alive.assignment == [0, 1, 2, 3]


async def test_member_that_does_not_rejoin_is_removed_at_the_rebalance_timeout(autojump_clock):
    async with open_test_broker(group_initial_rebalance_delay_ms=0) as tb:
        async with tb.client() as a, tb.client() as b:
            first, second = Member(a, "rt"), Member(b, "rt")
            await join_all([first, second], partitions=2, rebalance_ms=20_000)
            # The leader's JoinGroup starts a rebalance (a follower's, unchanged, would just
            # get the current generation back), so the leader plays the eager member.
            eager, lazy = (first, second) if first.join_response.leader == first.member_id else (second, first)
            start = trio.current_time()
            codes = []
            # eager rejoins (as a leader does to rebalance); lazy keeps heartbeating — which
            # keeps it in the group — but never rejoins, so only the rebalance timeout ends it.
            async with trio.open_nursery() as nursery:

                async def heartbeats():
                    while True:
                        codes.append(await lazy.heartbeat())
                        await trio.sleep(1)

                nursery.start_soon(heartbeats)
                await eager.join(rebalance_ms=20_000)
                nursery.cancel_scope.cancel()
            assert trio.current_time() - start == pytest.approx(20.0)
            assert ErrorCode.rebalance_in_progress in codes
            assert eager.generation == 2
            assert [m.member_id for m in eager.join_response.members] == [eager.member_id]


async def test_static_member_restart_keeps_generation_and_assignment(autojump_clock):
    async with open_test_broker(group_initial_rebalance_delay_ms=0) as tb:
        async with tb.client() as a, tb.client() as b, tb.client() as c:
            static = Member(a, "static", instance_id="consumer-1")
            other = Member(b, "static", instance_id="consumer-2")
            await join_all([static, other], partitions=4)
            old_id, old_assignment = static.member_id, static.assignment
            # The process restarts: a new connection, no member id, the same instance id.
            restarted = Member(c, "static", instance_id="consumer-1")
            response = await restarted.join()
            assert response.error_code == ErrorCode.none
            assert restarted.member_id != old_id
            assert restarted.generation == 1  # no rebalance
            await restarted.sync()
            assert restarted.assignment == old_assignment
            assert await other.heartbeat() == ErrorCode.none
            assert await static.heartbeat() == ErrorCode.fenced_instance_id
            assert (await describe(a, "static")).group_state == "Stable"


async def test_join_errors(autojump_clock):
    async with open_test_broker(group_max_size=1, group_initial_rebalance_delay_ms=0) as tb:
        async with tb.client() as a, tb.client() as b:
            response = await a.request(request(11, 9, group_id="g", session_timeout=1000, rebalance_timeout=1000,
                                               member_id="", group_instance_id=None, protocol_type="consumer",
                                               protocols=[{"name": "range", "metadata": b""}]))
            assert response.error_code == ErrorCode.invalid_session_timeout
            first = Member(a, "g")
            await first.join()
            await first.sync()
            response = await Member(b, "g").join()
            assert response.error_code == ErrorCode.group_max_size_reached
            response = await b.request(request(11, 9, group_id="g", session_timeout=SESSION_MS, rebalance_timeout=1000,
                                               member_id="", group_instance_id="x", protocol_type="other",
                                               protocols=[{"name": "range", "metadata": b""}]))
            assert response.error_code == ErrorCode.inconsistent_group_protocol
            unknown = Member(b, "g")
            unknown.member_id, unknown.generation = "nobody", 1
            assert await unknown.heartbeat() == ErrorCode.unknown_member_id
            first_generation = first.generation
            first.generation = 99
            assert await first.heartbeat() == ErrorCode.illegal_generation
            first.generation = first_generation
            assert await first.leave() == ErrorCode.none
            assert (await describe(a, "g")).group_state == "Empty"


async def commit(client, group, generation, member_id, offsets, version=9):
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": "m", "commit_timestamp": -1}
        )
    response = await client.request(request(8, version, group_id=group, generation_id_or_member_epoch=generation,
                                             generation_id=generation, member_id=member_id, group_instance_id=None,
                                             retention_time=-1,
                                             topics=[{"name": t, "partitions": p} for t, p in topics.items()]))
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def fetch(client, group, version=7):
    response = await client.request(request(9, version, group_id=group, topics=None, require_stable=False))
    return {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}


async def create_topic(client, name, partitions):
    await client.request(request(19, 7, topics=[{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                                 "assignments": [], "configs": []}], timeout=1000, validate_only=False))


async def test_offsets_commit_fetch_and_generation_rules(autojump_clock):
    async with open_test_broker(group_initial_rebalance_delay_ms=0) as tb, tb.client() as a, tb.client() as b:
        await create_topic(a, "t", 2)
        # A standalone consumer (no group membership) commits with generation -1.
        assert await commit(a, "solo", -1, "", {("t", 0): 5, ("t", 1): 7}) == {
            ("t", 0): ErrorCode.none,
            ("t", 1): ErrorCode.none,
        }
        assert await fetch(a, "solo") == {("t", 0): 5, ("t", 1): 7}
        assert await commit(a, "solo", -1, "", {("nope", 0): 1}) == {("nope", 0): ErrorCode.unknown_topic_or_partition}
        member = Member(b, "members")
        await member.join()
        await member.sync(partitions=2)
        assert await commit(b, "members", member.generation, member.member_id, {("t", 0): 3}) == {
            ("t", 0): ErrorCode.none
        }
        assert await commit(b, "members", member.generation + 1, member.member_id, {("t", 0): 4}) == {
            ("t", 0): ErrorCode.illegal_generation
        }
        assert await commit(b, "members", member.generation, "stranger", {("t", 0): 4}) == {
            ("t", 0): ErrorCode.unknown_member_id
        }
        assert await fetch(b, "members") == {("t", 0): 3}
        # Multi-group OffsetFetch (v8+).
        response = await a.request(
            request(
                9,
                8,
                groups=[{"group_id": "solo", "topics": None}, {"group_id": "members", "topics": None}],
                require_stable=False,
            )
        )
        assert [(g.group_id, len(g.topics[0].partitions)) for g in response.groups] == [("solo", 2), ("members", 1)]


async def test_list_describe_delete_groups(autojump_clock):
    async with open_test_broker(group_initial_rebalance_delay_ms=0) as tb, tb.client() as a:
        await create_topic(a, "t", 1)
        await commit(a, "idle", -1, "", {("t", 0): 1})
        member = Member(a, "busy")
        await member.join()
        await member.sync(partitions=1)
        listed = await a.request(request(16, 4, states_filter=[]))
        assert sorted((g.group_id, g.group_state) for g in listed.groups) == [("busy", "Stable"), ("idle", "Empty")]
        stable_only = await a.request(request(16, 4, states_filter=["Stable"]))
        assert [g.group_id for g in stable_only.groups] == ["busy"]
        deleted = await a.request(request(42, 2, groups_names=["idle", "busy", "ghost"]))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            ("idle", ErrorCode.none), ("busy", ErrorCode.non_empty_group), ("ghost", ErrorCode.group_id_not_found)]
        assert await fetch(a, "idle") == {}
        gone = await describe(a, "idle")
        assert gone.group_state == "Dead"


async def test_offsets_expire_after_retention_for_empty_groups(autojump_clock):
    async with (
        open_test_broker(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000) as tb,
        tb.client() as a,
    ):
        await create_topic(a, "t", 1)
        await commit(a, "old", -1, "", {("t", 0): 9})
        await trio.sleep(50)
        assert await fetch(a, "old") == {("t", 0): 9}
        await trio.sleep(20)  # past 60 s since the commit, and a check has run
        assert await fetch(a, "old") == {}


async def test_committed_offsets_and_groups_survive_a_broker_restart(autojump_clock, tmp_path):
    config = {"log_dirs": str(tmp_path), "group_initial_rebalance_delay_ms": 0}
    async with open_test_broker(**config) as tb, tb.client() as a:
        await create_topic(a, "t", 2)
        member = Member(a, "durable", instance_id="c-1")
        await member.join()
        await member.sync(partitions=2)
        await commit(a, "durable", member.generation, member.member_id, {("t", 0): 11, ("t", 1): 22})
    async with open_test_broker(**config) as tb, tb.client() as a:
        assert await fetch(a, "durable") == {("t", 0): 11, ("t", 1): 22}
        described = await describe(a, "durable")
        assert described.group_state == "Stable"
        assert [m.group_instance_id for m in described.members] == ["c-1"]
        # The static member comes back after the restart without a rebalance.
        again = Member(a, "durable", instance_id="c-1")
        await again.join()
        assert again.generation == member.generation


async def test_a_session_expiry_wakes_wait_for_group_state_with_no_request(autojump_clock):
    """The coordinator's timer alone empties the group; the awaitable state sees it at the
    session timeout exactly, without waiting for some later response to be sent."""
    async with open_test_broker(group_initial_rebalance_delay_ms=0) as tb:
        async with tb.client() as client:
            member = Member(client, "quiet")
            await join_all([member], partitions=1)
            stable = trio.current_time()
            await tb.broker.wait_for_group_state("quiet", "Stable", members=1)
            with trio.fail_after(SESSION_MS / 1000 + 1):
                await tb.broker.wait_for_group_state("quiet", "Empty", members=0)
            assert trio.current_time() - stable == pytest.approx(SESSION_MS / 1000)
