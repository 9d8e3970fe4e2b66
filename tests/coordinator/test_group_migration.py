"""Online migration between classic and consumer groups (Kafka 4's group.consumer.migration.policy),
over the in-memory transport, in virtual time (MockClock).

Classic members speak raw JoinGroup/SyncGroup/Heartbeat/LeaveGroup with real embedded
consumer-protocol bytes and behave as a cooperative client does: they report what they own
when they rejoin, and own exactly what SyncGroup gave them. Consumer members speak raw
ConsumerGroupHeartbeat. After every step the test checks that no partition has two owners.
"""

from __future__ import annotations

import contextlib

import pytest
import trio

from trikafka.client.cluster import TopicPartition
from trikafka.client.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from trikafka.config import BrokerConfig
from trikafka.errors import ConfigError, ErrorCode
from trikafka.testing import open_test_broker

from .test_consumer_groups import Member, create_topic, describe, request

SESSION_MS = 10_000


class ClassicMember:
    """A classic (JoinGroup) consumer of topic ``t`` that revokes before it rejoins only what
    SyncGroup took away, as the cooperative-sticky assignor does."""

    def __init__(self, client, group: str, instance_id: str | None = None) -> None:
        self.client, self.group, self.instance_id = client, group, instance_id
        self.member_id, self.generation = "", -1
        self.owned: set[int] = set()
        self.join_response = None

    def _metadata(self) -> bytes:
        owned = tuple(TopicPartition("t", p) for p in sorted(self.owned))
        return encode_subscription(Subscription(topics=("t",), owned_partitions=owned, generation_id=self.generation))

    async def join(self):
        while True:
            response = await self.client.request(request(
                11, 9, group_id=self.group, session_timeout=SESSION_MS, rebalance_timeout=60_000,
                member_id=self.member_id, group_instance_id=self.instance_id, protocol_type="consumer",
                protocols=[{"name": "cooperative-sticky", "metadata": self._metadata()}], reason=None))
            if response.error_code == ErrorCode.member_id_required:
                self.member_id = response.member_id
                continue
            self.join_response = response
            if response.error_code == ErrorCode.none:
                self.member_id, self.generation = response.member_id, response.generation_id
            return response

    async def sync(self, partitions: int = 0):
        assignments = []
        response = self.join_response
        if response.leader == self.member_id and response.members:  # a classic group's leader: round robin
            ids = sorted(m.member_id for m in response.members)
            for i, member_id in enumerate(ids):
                mine = tuple(TopicPartition("t", p) for p in range(partitions) if p % len(ids) == i)
                assignments.append({"member_id": member_id, "assignment": encode_assignment(Assignment(mine))})
        result = await self.client.request(request(
            14, 5, group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance_id, protocol_type="consumer", protocol_name="cooperative-sticky",
            assignments=assignments))
        if result.error_code == ErrorCode.none:
            self.owned = {tp.partition for tp in decode_assignment(result.assignment).partitions}
        return result

    async def heartbeat(self) -> ErrorCode:
        response = await self.client.request(request(
            12, 4, group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance_id))
        return response.error_code

    async def rejoin(self):
        """Heartbeat said REBALANCE_IN_PROGRESS: join (reporting what it owns), then sync."""
        joined = await self.join()
        assert joined.error_code == ErrorCode.none, joined
        return await self.sync()

    async def leave(self) -> ErrorCode:
        response = await self.client.request(
            request(
                13,
                5,
                group_id=self.group,
                members=[{"member_id": self.member_id, "group_instance_id": self.instance_id, "reason": None}],
            )
        )
        return response.members[0].error_code


def owners(*members) -> dict[int, list[str]]:
    held: dict[int, list[str]] = {}
    for m in members:
        mine = m.owned if isinstance(m, ClassicMember) else m.partitions()
        for p in mine:
            held.setdefault(p, []).append(m.member_id)
    assert all(len(ids) == 1 for ids in held.values()), f"a partition with two owners: {held}"
    return held


async def list_groups(client):
    response = await client.request(request(16, 5, states_filter=[], types_filter=[]))
    return {g.group_id: (g.group_type, g.group_state) for g in response.groups}


async def classic_group(client, members, partitions: int) -> None:
    async with trio.open_nursery() as nursery:
        for m in members:
            nursery.start_soon(m.join)
    async with trio.open_nursery() as nursery:
        for m in members:
            nursery.start_soon(m.sync, partitions)


async def settle(classics, consumers, rounds: int = 6) -> None:
    """Let every member act on what it was told, checking single ownership after each step."""
    everyone = (*classics, *consumers)
    for _ in range(rounds):
        for m in classics:
            code = await m.heartbeat()
            if code == ErrorCode.rebalance_in_progress:
                assert (await m.rejoin()).error_code in (ErrorCode.none, ErrorCode.rebalance_in_progress)
            else:
                assert code == ErrorCode.none
            owners(*everyone)
        for m in consumers:
            assert (await m.heartbeat()).error_code == ErrorCode.none
            owners(*everyone)


async def classic_members(tb, stack: contextlib.AsyncExitStack, n: int) -> list[ClassicMember]:
    """Members with a connection each (a connection answers its requests in order, and a
    JoinGroup waits for the others)."""
    return [ClassicMember(await stack.enter_async_context(tb.client()), "g") for _ in range(n)]


async def mixed_group(tb, stack, c, partitions: int = 4):
    """Two classic members form a classic group; a consumer member upgrades it."""
    await create_topic(c, "t", partitions)
    classics = await classic_members(tb, stack, 2)
    await classic_group(c, classics, partitions)
    assert sorted(len(m.owned) for m in classics) == [partitions // 2] * 2
    consumer = Member(c, "g", "consumer-1")
    r = await consumer.heartbeat()
    assert r.error_code == ErrorCode.none
    return classics, consumer


async def test_a_consumer_heartbeat_upgrades_a_classic_group_and_both_kinds_share_it(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c, contextlib.AsyncExitStack() as stack:
        classics, consumer = await mixed_group(tb, stack, c)
        generation = classics[0].generation
        assert (await list_groups(c))["g"][0] == "consumer"
        described = await describe(c, "g")
        assert described.group_epoch == generation + 1  # the classic generation, then the new member
        types = {m.member_id: m.member_type for m in described.members}
        assert types == {classics[0].member_id: 0, classics[1].member_id: 0, "consumer-1": 1}
        # The partitions are still with their classic owners: the new member waits for them.
        assert consumer.partitions() == set()
        owners(*classics, consumer)
        # The classic members learn of the new epoch from Heartbeat and rejoin. Between its
        # JoinGroup (still listing what it owns) and the SyncGroup that makes it revoke, the
        # consumer member must not be given any of those partitions.
        targets = {
            m.member_id: sum(len(tp.partitions) for tp in m.target_assignment.topic_partitions)
            for m in described.members
        }
        first = next(m for m in classics if targets[m.member_id] < len(m.owned))  # one that must give some up
        assert await first.heartbeat() == ErrorCode.rebalance_in_progress
        before = set(first.owned)
        assert (await first.join()).error_code == ErrorCode.none
        assert first.generation == generation  # not reconciled until it has revoked
        await consumer.heartbeat()
        assert not consumer.partitions() & before
        await first.sync()
        assert first.owned < before  # it keeps a part and revokes the rest
        owners(*classics, consumer)
        await settle(classics, [consumer])
        held = owners(*classics, consumer)
        assert sorted(held) == [0, 1, 2, 3]
        assert sorted(len(m.owned) for m in classics) + [len(consumer.partitions())] in (
            [1, 1, 2],
            [1, 2, 1],
            [2, 1, 1],
        )
        assert len(consumer.partitions()) >= 1
        described = await describe(c, "g")
        assert described.group_state == "Stable"
        assert all(m.member_epoch == described.assignment_epoch for m in described.members)
        # Heartbeats of a settled classic member are quiet; its generation is its member epoch.
        assert await classics[0].heartbeat() == ErrorCode.none
        classics[0].generation -= 1
        assert await classics[0].heartbeat() == ErrorCode.illegal_generation


async def test_classic_members_join_a_consumer_group_and_commit_with_their_generation(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "t", 3)
        consumer = Member(c, "g", "consumer-1")
        await consumer.heartbeat()
        assert consumer.partitions() == {0, 1, 2}
        classic = ClassicMember(c, "g")  # its requests never wait: the group is a consumer group
        joined = await classic.join()
        assert (joined.error_code, joined.leader, list(joined.members)) == (ErrorCode.none, "", [])
        assert joined.protocol_name == "cooperative-sticky"
        await classic.sync()
        assert classic.owned == set()  # everything is still the consumer member's
        await settle([classic], [consumer])
        assert sorted(owners(classic, consumer)) == [0, 1, 2] and classic.owned
        commit = request(
            8,
            8,
            group_id="g",
            generation_id_or_member_epoch=classic.generation,
            member_id=classic.member_id,
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 5,
                            "committed_leader_epoch": -1,
                            "committed_metadata": None,
                        }
                    ],
                }
            ],
        )
        assert (await c.request(commit)).topics[0].partitions[0].error_code == ErrorCode.none
        stale = request(
            8,
            8,
            **{
                **{f: getattr(commit, f) for f in commit.__dataclass_fields__},
                "generation_id_or_member_epoch": classic.generation - 1,
            },
        )
        assert (await c.request(stale)).topics[0].partitions[0].error_code == ErrorCode.illegal_generation
        # A consumer-protocol member is not a classic one: LeaveGroup does not know it.
        response = await c.request(
            request(
                13, 5, group_id="g", members=[{"member_id": "consumer-1", "group_instance_id": None, "reason": None}]
            )
        )
        assert response.members[0].error_code == ErrorCode.unknown_member_id


async def test_the_last_consumer_member_leaving_downgrades_to_a_classic_group_that_rebalances(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c, contextlib.AsyncExitStack() as stack:
        classics, consumer = await mixed_group(tb, stack, c)
        await settle(classics, [consumer])
        epoch = (await describe(c, "g")).group_epoch
        assert (await consumer.leave()).error_code == ErrorCode.none
        assert (await list_groups(c))["g"] == ("classic", "PreparingRebalance")
        assert (await describe(c, "g")).error_code == ErrorCode.group_id_not_found  # no longer a consumer group
        # Every classic member is asked to rejoin; the classic group's generation continues the epoch.
        for m in classics:
            assert await m.heartbeat() == ErrorCode.rebalance_in_progress
        await classic_group(c, classics, 4)
        assert classics[0].generation == epoch + 1
        assert sorted(owners(*classics)) == [0, 1, 2, 3]
        assert (await list_groups(c))["g"] == ("classic", "Stable")
        # A classic member that leaves now leaves a classic group.
        assert await classics[0].leave() == ErrorCode.none


async def test_a_classic_member_of_a_consumer_group_is_fenced_after_its_own_session_timeout(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c, contextlib.AsyncExitStack() as stack:
        classics, consumer = await mixed_group(tb, stack, c)
        await settle(classics, [consumer])
        quiet, alive = classics
        start = trio.current_time()
        while trio.current_time() - start < SESSION_MS / 1000 - 2:
            await trio.sleep(2)
            await consumer.heartbeat()
            if await alive.heartbeat() == ErrorCode.rebalance_in_progress:
                await alive.rejoin()
        assert quiet.member_id in {m.member_id for m in (await describe(c, "g")).members}
        await trio.sleep(2.5)
        assert quiet.member_id not in {m.member_id for m in (await describe(c, "g")).members}
        assert await quiet.heartbeat() == ErrorCode.unknown_member_id
        quiet.owned = set()
        await settle([alive], [consumer])
        assert sorted(owners(alive, consumer)) == [0, 1, 2, 3]


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
async def test_without_upgrade_in_the_policy_a_classic_group_with_members_stays_classic(policy, autojump_clock):
    async with open_test_broker(group_consumer_migration_policy=policy) as tb, tb.client() as c:
        await create_topic(c, "t", 2)
        classics = [ClassicMember(c, "g")]  # alone: its JoinGroup completes at once
        await classic_group(c, classics, 2)
        r = await Member(c, "g", "consumer-1").heartbeat()
        assert r.error_code == ErrorCode.group_id_not_found
        assert (await list_groups(c))["g"] == ("classic", "Stable")
        assert await classics[0].heartbeat() == ErrorCode.none


@pytest.mark.parametrize("policy", ["disabled", "upgrade"])
async def test_without_downgrade_in_the_policy_classic_members_stay_in_the_consumer_group(policy, autojump_clock):
    async with open_test_broker(group_consumer_migration_policy=policy) as tb, tb.client() as c:
        await create_topic(c, "t", 4)
        consumer = Member(c, "g", "consumer-1")
        await consumer.heartbeat()
        classics = [ClassicMember(c, "g"), ClassicMember(c, "g")]
        for m in classics:
            await m.join()
            await m.sync()
        await settle(classics, [consumer])
        assert (await consumer.leave()).error_code == ErrorCode.none
        assert (await list_groups(c))["g"][0] == "consumer"
        consumer.owned = {}
        await settle(classics, [])
        assert sorted(owners(*classics)) == [0, 1, 2, 3]


def test_the_policy_key_is_validated_like_every_key():
    assert BrokerConfig().group_consumer_migration_policy == "bidirectional"
    assert (
        BrokerConfig.from_mapping({"group.consumer.migration.policy": "UPGRADE"}).group_consumer_migration_policy
        == "upgrade"
    )
    with pytest.raises(ConfigError) as err:
        BrokerConfig.from_mapping({"group.consumer.migration.policy": "sideways"})
    assert str(err.value) == ("invalid configuration group.consumer.migration.policy='sideways': "
                              "allowed values are disabled, downgrade, upgrade, bidirectional")


async def test_upgraded_and_downgraded_groups_survive_a_restart(tmp_path, autojump_clock):
    config = dict(log_dirs=str(tmp_path), offsets_topic_num_partitions=1)
    async with open_test_broker(**config) as tb, tb.client() as c, contextlib.AsyncExitStack() as stack:
        classics, consumer = await mixed_group(tb, stack, c)
        await settle(classics, [consumer])
        before = {m.member_id: (m.member_epoch, m.member_type) for m in (await describe(c, "g")).members}
    async with open_test_broker(**config) as tb, tb.client() as c:
        described = await describe(c, "g")
        assert {m.member_id: (m.member_epoch, m.member_type) for m in described.members} == before
        for m in (*classics, consumer):
            m.client = c
        assert {await m.heartbeat() for m in classics} == {ErrorCode.none}  # still classic members, same generation
        assert (await consumer.leave()).error_code == ErrorCode.none  # downgraded...
    async with open_test_broker(**config) as tb, tb.client() as c:
        assert (await list_groups(c))["g"][0] == "classic"  # ...and still classic after a restart
        for m in classics:
            m.client = c
        assert {await m.heartbeat() for m in classics} == {ErrorCode.none}


async def test_an_upgrade_that_would_overfill_the_group_leaves_it_classic(autojump_clock):
    async with open_test_broker(group_consumer_max_size=1) as tb, tb.client() as c:
        await create_topic(c, "t", 2)
        classic = ClassicMember(c, "g")
        await classic_group(c, [classic], 2)
        assert (await Member(c, "g", "consumer-1").heartbeat()).error_code == ErrorCode.group_max_size_reached
        assert (await list_groups(c))["g"] == ("classic", "Stable")
        assert await classic.heartbeat() == ErrorCode.none


async def test_a_classic_static_member_replacing_the_last_consumer_one_downgrades_without_a_rebalance(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "t", 2)
        consumer = Member(c, "g", "consumer-1", instance_id="instance-1")
        await consumer.heartbeat()
        classic = ClassicMember(c, "g")
        await classic.join()
        await classic.sync()
        await settle([classic], [consumer])
        kept = consumer.partitions()
        assert kept and classic.owned and not kept & classic.owned
        # A classic consumer restarts as the same static instance.
        replacement = ClassicMember(c, "g", instance_id="instance-1")
        assert (await replacement.join()).error_code == ErrorCode.none
        assert (await list_groups(c))["g"] == ("classic", "Stable")
        assert (await replacement.sync()).error_code == ErrorCode.none
        assert replacement.owned == kept  # its predecessor's partitions, no rebalance
        assert await classic.heartbeat() == ErrorCode.none
        assert await replacement.heartbeat() == ErrorCode.none
        assert (await consumer.heartbeat()).error_code == ErrorCode.group_id_not_found
