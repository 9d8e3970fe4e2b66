"""KIP-848 consumer groups over the in-memory transport, in virtual time (MockClock).

Members speak raw ConsumerGroupHeartbeat requests, so each test controls exactly what a
member reports (its epoch, the partitions it still owns) and checks Kafka's rules: epochs,
the target assignment, revoke before assign, session expiry, static members, fencing.
"""

from __future__ import annotations

import trio

from trikafka.errors import ErrorCode
from trikafka.protocol.entities import build
from trikafka.protocol.registry import ApiRegistry
from trikafka.testing import open_test_broker

REGISTRY = ApiRegistry()
HEARTBEAT, DESCRIBE = 68, 69


def request(api_key: int, version: int, **fields):
    return build(REGISTRY.get(api_key, version).request_type, **fields)


async def create_topic(client, name, partitions):
    response = await client.request(
        request(
            19,
            7,
            topics=[
                {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
            ],
            timeout=1000,
            validate_only=False,
        )
    )
    assert response.topics[0].error_code == ErrorCode.none


class Member:
    """A consumer-protocol member that owns exactly what it was told, unless held back."""

    def __init__(self, client, group: str, member_id: str, topics=("t",), instance_id=None, assignor=None):
        self.client, self.group, self.member_id = client, group, member_id
        self.topics, self.instance_id, self.assignor = list(topics), instance_id, assignor
        self.epoch = 0
        self.owned: dict = {}  # topic id → set of partitions
        self.names: dict = {}

    async def heartbeat(self, *, owned=None, epoch=None, full=False, **extra):
        joining = self.epoch == 0
        send_owned = self.owned if owned is None else owned
        response = await self.client.request(
            request(
                HEARTBEAT, 1,
                group_id=self.group, member_id=self.member_id,
                member_epoch=self.epoch if epoch is None else epoch,
                instance_id=self.instance_id, rack_id=None,
                rebalance_timeout=60_000 if joining or full else -1,
                subscribed_topic_names=self.topics if joining or full else None,
                subscribed_topic_regex=None, server_assignor=self.assignor if joining else None,
                topic_partitions=[{"topic_id": t, "partitions": sorted(ps)} for t, ps in send_owned.items()],
                **extra,
            )
        )
        if response.error_code == ErrorCode.none:
            self.epoch = response.member_epoch
            if response.assignment is not None:
                self.owned = {tp.topic_id: set(tp.partitions) for tp in response.assignment.topic_partitions}
        return response

    def partitions(self) -> set[int]:
        return {p for ps in self.owned.values() for p in ps}

    async def leave(self, epoch=-1):
        return await self.client.request(
            request(
                HEARTBEAT,
                1,
                group_id=self.group,
                member_id=self.member_id,
                member_epoch=epoch,
                instance_id=self.instance_id,
                rack_id=None,
                rebalance_timeout=-1,
                subscribed_topic_names=None,
                subscribed_topic_regex=None,
                server_assignor=None,
                topic_partitions=None,
            )
        )


async def describe(client, group):
    response = await client.request(request(DESCRIBE, 1, group_ids=[group], include_authorized_operations=False))
    return response.groups[0]


async def test_join_gets_all_partitions_then_second_member_triggers_revoke_before_assign(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "t", 4)
        a = Member(c, "g", "member-a")
        r = await a.heartbeat()
        assert (r.error_code, r.member_epoch, r.heartbeat_interval.total_seconds()) == (ErrorCode.none, 1, 5)
        assert a.partitions() == {0, 1, 2, 3}
        b = Member(c, "g", "member-b")
        r = await b.heartbeat()
        # The group epoch is 2; b's target partitions are still a's: b reaches epoch 2 with nothing.
        assert r.member_epoch == 2 and b.partitions() == set()
        group = await describe(c, "g")
        assert (group.group_epoch, group.assignment_epoch, group.group_state) == (2, 2, "Reconciling")
        # a must revoke two partitions first: it stays at epoch 1 with its kept half.
        r = await a.heartbeat(owned=a.owned)
        assert r.member_epoch == 1 and len(a.partitions()) == 2
        revoked = {0, 1, 2, 3} - a.partitions()
        # b is told nothing new while a still owns them...
        r = await b.heartbeat()
        assert b.partitions() == set()
        # ...a acknowledges the revocation (its owned set no longer has them): epoch 2...
        r = await a.heartbeat()
        assert r.member_epoch == 2
        # ...and only now does b receive them.
        await b.heartbeat()
        assert b.partitions() == revoked
        assert (await describe(c, "g")).group_state == "Stable"


async def test_three_members_never_share_a_partition(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "t", 6)
        members = [Member(c, "g3", f"m{i}") for i in range(3)]
        owners_seen = []
        for m in members:  # each joins; everyone heartbeats in turn until stable
            await m.heartbeat()
            for _ in range(4):
                for other in members:
                    if other.epoch:
                        await other.heartbeat()
                    claimed = [p for x in members for p in x.partitions()]
                    assert len(claimed) == len(set(claimed)), "a partition had two owners"
                    owners_seen.append(len(claimed))
        assert sorted(len(m.partitions()) for m in members) == [2, 2, 2]
        assert set().union(*(m.partitions() for m in members)) == set(range(6))
        # The one that leaves gives its partitions up; the other two take them after a rebalance.
        gone = members.pop()
        assert (await gone.leave()).member_epoch == -1
        for _ in range(3):
            for m in members:
                await m.heartbeat()
        assert sorted(len(m.partitions()) for m in members) == [3, 3]
        assert set().union(*(m.partitions() for m in members)) == set(range(6))


async def test_session_expiry_fences_the_silent_member_at_exactly_its_timeout(autojump_clock):
    async with open_test_broker(group_consumer_session_timeout_ms=45_000) as tb, tb.client() as c:
        await create_topic(c, "t", 2)
        a, b = Member(c, "g", "a"), Member(c, "g", "b")
        await a.heartbeat()
        await b.heartbeat()
        await a.heartbeat()
        await a.heartbeat()
        await b.heartbeat()
        start = trio.current_time()
        # a keeps heartbeating; b goes silent.
        for _ in range(8):
            await trio.sleep(5)
            await a.heartbeat()
        assert len((await describe(c, "g")).members) == 2
        await trio.sleep(45 - (trio.current_time() - start) - 0.001)
        assert len((await describe(c, "g")).members) == 2
        await trio.sleep(0.002)
        group = await describe(c, "g")
        assert [m.member_id for m in group.members] == ["a"]
        await a.heartbeat()
        assert a.partitions() == {0, 1}
        r = await b.heartbeat()
        assert r.error_code == ErrorCode.unknown_member_id


async def test_fencing_on_wrong_epochs(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "t", 2)
        a = Member(c, "g", "a")
        await a.heartbeat()
        assert (await a.heartbeat(epoch=5)).error_code == ErrorCode.fenced_member_epoch
        b = Member(c, "g", "b")
        await b.heartbeat()
        await a.heartbeat()  # revoke one
        await a.heartbeat()  # acknowledged: epoch 2
        assert a.epoch == 2
        # The previous epoch is accepted with a subset of the assignment (a lost response)...
        assert (await a.heartbeat(epoch=1)).error_code == ErrorCode.none
        # ...but not while claiming partitions it no longer has.
        (topic_id,) = a.owned
        assert (await a.heartbeat(epoch=1, owned={topic_id: {0, 1}})).error_code == ErrorCode.fenced_member_epoch
        r = await c.request(
            request(
                HEARTBEAT,
                1,
                group_id="g",
                member_id="a",
                member_epoch=-3,
                instance_id=None,
                rack_id=None,
                rebalance_timeout=-1,
                subscribed_topic_names=None,
                subscribed_topic_regex=None,
                server_assignor=None,
                topic_partitions=None,
            )
        )
        assert r.error_code == ErrorCode.invalid_request
        bad = Member(c, "g", "c", assignor="sticky")
        assert (await bad.heartbeat()).error_code == ErrorCode.unsupported_assignor
        r = await Member(c, "g", "").heartbeat()
        assert r.error_code == ErrorCode.invalid_request and r.error_message == "MemberId can't be empty."


async def test_static_member_leaves_temporarily_and_its_replacement_keeps_the_partitions(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "t", 4)
        a = Member(c, "g", "a1", instance_id="instance-a")
        b = Member(c, "g", "b", instance_id="instance-b")
        await a.heartbeat()
        await b.heartbeat()
        for _ in range(2):
            await a.heartbeat()
            await b.heartbeat()
        mine = a.partitions()
        assert len(mine) == 2
        epoch = (await describe(c, "g")).group_epoch
        # A different member id may not take an instance id that is still in use.
        assert (
            await Member(c, "g", "a2", instance_id="instance-a").heartbeat()
        ).error_code == ErrorCode.unreleased_instance_id
        assert (await a.leave(epoch=-2)).member_epoch == -2
        # The restarted instance joins with a new member id and gets the same partitions, no rebalance.
        a2 = Member(c, "g", "a2", instance_id="instance-a")
        r = await a2.heartbeat()
        assert r.error_code == ErrorCode.none and a2.partitions() == mine
        assert (await describe(c, "g")).group_epoch == epoch
        # The old member id is fenced out.
        assert (await a.heartbeat(epoch=a.epoch)).error_code == ErrorCode.fenced_instance_id


async def test_range_assignor_and_restart_keeps_the_group(tmp_path, autojump_clock):
    config = dict(log_dirs=str(tmp_path), offsets_topic_num_partitions=1)
    async with open_test_broker(**config) as tb, tb.client() as c:
        await create_topic(c, "t", 4)
        a, b = Member(c, "gr", "a", assignor="range"), Member(c, "gr", "b", assignor="range")
        await a.heartbeat()
        await b.heartbeat()
        for _ in range(2):
            await a.heartbeat()
            await b.heartbeat()
        assert (a.partitions(), b.partitions()) == ({0, 1}, {2, 3})
        before = await describe(c, "gr")
        assert before.assignor_name == "range"
    async with open_test_broker(**config) as tb, tb.client() as c:
        after = await describe(c, "gr")
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert {m.member_id: m.member_epoch for m in after.members} == {
            m.member_id: m.member_epoch for m in before.members
        }
        a.client = c
        r = await a.heartbeat()
        assert r.error_code == ErrorCode.none and a.partitions() == {0, 1}


async def test_offsets_need_the_current_member_epoch_and_groups_convert_when_empty(autojump_clock):
    async with (
        open_test_broker(group_initial_rebalance_delay_ms=0, group_consumer_migration_policy="disabled") as tb,
        tb.client() as c,
    ):
        await create_topic(c, "t", 1)
        a = Member(c, "g", "a")
        await a.heartbeat()

        async def commit(epoch, member_id="a", version=9):
            response = await c.request(
                request(
                    8,
                    version,
                    group_id="g",
                    generation_id_or_member_epoch=epoch,
                    member_id=member_id,
                    group_instance_id=None,
                    retention_time_ms=-1,
                    topics=[
                        {
                            "name": "t",
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "committed_offset": 7,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": None,
                                }
                            ],
                        }
                    ],
                )
            )
            return response.topics[0].partitions[0].error_code

        assert await commit(a.epoch + 1) == ErrorCode.stale_member_epoch
        assert await commit(a.epoch, member_id="x") == ErrorCode.unknown_member_id
        assert await commit(a.epoch) == ErrorCode.none
        listed = await c.request(request(16, 5, states_filter=[], types_filter=["consumer"]))
        assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [("g", "consumer", "Stable")]
        classic = await c.request(request(15, 6, groups=["g"], include_authorized_operations=False))
        assert classic.groups[0].error_code == ErrorCode.group_id_not_found
        join = request(
            11,
            9,
            group_id="g",
            session_timeout=10_000,
            rebalance_timeout=10_000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": b""}],
            reason=None,
        )
        # A classic member may join a consumer group with members (Kafka 4, whatever the policy).
        assert (await c.request(join)).error_code == ErrorCode.member_id_required
        await a.leave()
        # Empty now: a classic member converts it back, offsets kept.
        response = await c.request(join)
        assert response.error_code == ErrorCode.member_id_required
        fetched = await c.request(request(9, 8, groups=[{"group_id": "g", "topics": None}], require_stable=False))
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 7
        # And with the policy "disabled", a consumer heartbeat into a classic group with members is refused.
        joined = await c.request(
            build(
                type(join),
                **{**{f: getattr(join, f) for f in join.__dataclass_fields__}, "member_id": response.member_id},
            )
        )
        assert joined.error_code == ErrorCode.none
        r = await Member(c, "g", "b").heartbeat()
        assert r.error_code == ErrorCode.group_id_not_found


async def test_a_member_that_does_not_revoke_is_fenced_at_its_rebalance_timeout(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "t", 2)
        a, b = Member(c, "g", "a"), Member(c, "g", "b")
        await a.heartbeat()
        await b.heartbeat()
        held = dict(a.owned)
        await a.heartbeat(owned=held)  # told to revoke one partition...
        start = trio.current_time()
        for _ in range(11):  # ...keeps heartbeating while still owning it, for 55 s
            await trio.sleep(5)
            await a.heartbeat(owned=held)
            await b.heartbeat()
            assert b.partitions() == set()
        await trio.sleep(60 - (trio.current_time() - start) + 0.001)  # rebalance timeout: 60 s
        assert [m.member_id for m in (await describe(c, "g")).members] == ["b"]
        assert (await a.heartbeat(owned=held)).error_code == ErrorCode.unknown_member_id
        await b.heartbeat()
        await b.heartbeat()
        assert b.partitions() == {0, 1}


async def test_without_the_consumer_protocol_the_apis_are_not_served(autojump_clock):
    async with open_test_broker(group_coordinator_rebalance_protocols="classic") as tb, tb.client() as c:
        versions = await c.request(request(18, 3, client_software_name="t", client_software_version="1"))
        assert {k.api_key for k in versions.api_keys} & {HEARTBEAT, DESCRIBE} == set()


def test_uniform_is_balanced_and_sticky_and_range_is_contiguous():
    from trikafka.coordinator.consumer.consumer_assignors import assign

    subs = {m: frozenset({"t"}) for m in ("a", "b")}
    first = assign("uniform", subs, {"t": 6}, {})
    assert sorted(len(first[m]["t"]) for m in subs) == [3, 3]
    # A third member takes one partition from each: nobody else moves.
    subs3 = {**subs, "c": frozenset({"t"})}
    second = assign("uniform", subs3, {"t": 6}, first)
    assert sorted(len(second[m]["t"]) for m in subs3) == [2, 2, 2]
    assert second["a"]["t"] <= first["a"]["t"] and second["b"]["t"] <= first["b"]["t"]
    # Different subscriptions: every partition to a member subscribed to its topic.
    mixed = assign("uniform", {"a": frozenset({"t", "u"}), "b": frozenset({"t"})}, {"t": 2, "u": 2}, {})
    assert mixed["b"].keys() == {"t"} and sum(len(ps) for m in mixed.values() for ps in m.values()) == 4
    assert assign("range", subs, {"t": 5, "u": 2}, {}) == {
        "a": {"t": frozenset({0, 1, 2})},
        "b": {"t": frozenset({3, 4})},
    }


async def test_regex_subscription_picks_up_a_new_matching_topic(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "orders-eu", 1)
        await create_topic(c, "payments", 1)
        m = Member(c, "g", "m", topics=())
        r = await c.request(
            request(
                HEARTBEAT,
                1,
                group_id="g",
                member_id="m",
                member_epoch=0,
                instance_id=None,
                rack_id=None,
                rebalance_timeout=60_000,
                subscribed_topic_names=None,
                subscribed_topic_regex="orders-.*",
                server_assignor=None,
                topic_partitions=[],
            )
        )
        # Kafka 4 resolves the regex in the background: nothing in the answer that brought it...
        assert r.error_code == ErrorCode.none and r.member_epoch == 1 and not r.assignment.topic_partitions
        m.epoch = r.member_epoch
        r = await m.heartbeat()  # ...its topics at the next heartbeat, in a new epoch
        assert r.member_epoch == 2 and len(m.owned) == 1
        await create_topic(c, "orders-us", 2)
        await trio.sleep(11)  # a group's regexes are resolved again at most every 10 s
        await m.heartbeat()  # the new topic asks for a resolution...
        r = await m.heartbeat()  # ...whose result bumped the group epoch
        assert r.member_epoch == 3 and sum(len(ps) for ps in m.owned.values()) == 3
        described = (await describe(c, "g")).members[0]
        assert described.subscribed_topic_regex == "orders-.*"
        assert sorted(t.topic_name for t in described.assignment.topic_partitions) == ["orders-eu", "orders-us"]
        bad = await c.request(
            request(
                HEARTBEAT,
                1,
                group_id="g",
                member_id="x",
                member_epoch=0,
                instance_id=None,
                rack_id=None,
                rebalance_timeout=60_000,
                subscribed_topic_names=None,
                subscribed_topic_regex="orders-(",
                server_assignor=None,
                topic_partitions=[],
            )
        )
        assert bad.error_code == ErrorCode.invalid_regular_expression


async def test_a_static_member_that_does_not_come_back_is_removed_at_its_session_timeout(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "t", 2)
        a = Member(c, "g", "a", instance_id="ia")
        b = Member(c, "g", "b")
        await a.heartbeat()
        await b.heartbeat()
        await a.heartbeat()
        await a.heartbeat()
        await b.heartbeat()
        assert len(b.partitions()) == 1
        await a.leave(epoch=-2)
        start = trio.current_time()
        for _ in range(8):  # b heartbeats; a's partition stays reserved for instance ia
            await trio.sleep(5)
            await b.heartbeat()
            assert len(b.partitions()) == 1
        await trio.sleep(45 - (trio.current_time() - start) + 0.001)
        assert [m.member_id for m in (await describe(c, "g")).members] == ["b"]
        await b.heartbeat()
        await b.heartbeat()
        assert b.partitions() == {0, 1}


async def test_offset_delete_and_delete_groups_respect_a_live_consumer_group(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "t", 1)
        await create_topic(c, "other", 1)
        a = Member(c, "g", "a")
        await a.heartbeat()
        commit = request(
            8,
            9,
            group_id="g",
            generation_id_or_member_epoch=a.epoch,
            member_id="a",
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[
                {
                    "name": n,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 3,
                            "committed_leader_epoch": -1,
                            "committed_metadata": None,
                        }
                    ],
                }
                for n in ("t", "other")
            ],
        )
        assert all(p.error_code == ErrorCode.none for t in (await c.request(commit)).topics for p in t.partitions)
        deleted = await c.request(
            request(
                47,
                0,
                group_id="g",
                topics=[{"name": n, "partitions": [{"partition_index": 0}]} for n in ("t", "other")],
            )
        )
        codes = {t.name: t.partitions[0].error_code for t in deleted.topics}
        assert codes == {"t": ErrorCode.group_subscribed_to_topic, "other": ErrorCode.none}
        assert (await c.request(request(42, 2, groups_names=["g"]))).results[0].error_code == ErrorCode.non_empty_group
        await a.leave()
        assert (await c.request(request(42, 2, groups_names=["g"]))).results[0].error_code == ErrorCode.none
        gone = await describe(c, "g")
        assert (gone.error_code, gone.error_message) == (ErrorCode.group_id_not_found, "Group g not found.")


async def test_acls_guard_the_consumer_group_apis_as_kafka_does(autojump_clock):
    from trikafka.config import BrokerConfig
    from trikafka.security.authorizer import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourceType,
    )

    def allow(name, operation, resource):
        return AclBinding(
            resource, name, PatternType.LITERAL, "User:ANONYMOUS", "*", operation, AclPermissionType.ALLOW
        )

    config = BrokerConfig.from_mapping(
        {
            "listeners": "PLAINTEXT://memory:9092",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        }
    )
    async with open_test_broker(config) as tb, tb.client() as c:
        tb.broker.path.context.acls.create([allow("kafka-cluster", AclOperation.CREATE, ResourceType.CLUSTER),
                                       allow("g", AclOperation.READ, ResourceType.GROUP)])
        await create_topic(c, "t", 1)
        assert (await Member(c, "other", "m").heartbeat()).error_code == ErrorCode.group_authorization_failed
        assert (await Member(c, "g", "m").heartbeat()).error_code == ErrorCode.none
        described = await c.request(request(DESCRIBE, 1, group_ids=["g", "other"], include_authorized_operations=True))
        assert [g.error_code for g in described.groups] == [ErrorCode.none, ErrorCode.group_authorization_failed]
        assert described.groups[0].authorized_operations == (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)
        verify = await c.request(
            request(
                24,
                4,
                transactions=[
                    {"transactional_id": "x", "producer_id": 0, "producer_epoch": 0, "verify_only": True, "topics": []}
                ],
            )
        )
        assert verify.error_code == ErrorCode.cluster_authorization_failed


async def test_a_revocation_in_progress_survives_a_restart_with_its_deadline(tmp_path, autojump_clock):
    config = dict(log_dirs=str(tmp_path), offsets_topic_num_partitions=1)
    async with open_test_broker(**config) as tb, tb.client() as c:
        await create_topic(c, "t", 2)
        a, b = Member(c, "g", "a"), Member(c, "g", "b")
        await a.heartbeat()
        await b.heartbeat()
        held = dict(a.owned)
        await a.heartbeat(owned=held)  # a must give one partition to b
    async with open_test_broker(**config) as tb, tb.client() as c:
        a.client = b.client = c
        start = trio.current_time()
        for _ in range(11):  # a still holds it after the restart; b gets nothing meanwhile
            await trio.sleep(5)
            assert (await a.heartbeat(owned=held)).error_code == ErrorCode.none
            await b.heartbeat()
            assert b.partitions() == set()
        await trio.sleep(60 - (trio.current_time() - start) + 0.001)
        assert [m.member_id for m in (await describe(c, "g")).members] == ["b"]
        await b.heartbeat()
        await b.heartbeat()
        assert b.partitions() == {0, 1}
