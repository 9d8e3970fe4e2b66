"""Share-group APIs on the wire, over the in-memory transport in virtual time: what a client
sends that no ShareConsumer test drives — wrong epochs, the wrong kind of group, the admin
APIs (90–92), a bad group config — and the long poll woken by a produce.
"""

from __future__ import annotations

import trio
from kio.schema.errors import ErrorCode

from tests.server.test_topics_and_data import create_topic, metadata, produce, request
from trikafka.protocol.records import build_batch
from trikafka.testing import open_test_broker

MEMBER = "7TqKaOJVQ6u0LPRj4sfKzA"
GROUP_RESOURCE = 32


def heartbeat(group: str, member: str = MEMBER, epoch: int = 0, topics=("t",)):
    return request(76, 1, group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
                   subscribed_topic_names=list(topics) if topics is not None else None)


def share_fetch(group: str, topic_id, *, epoch: int, partitions=(0,), acks=None, max_wait: int = 0,
                member: str = MEMBER, version: int = 1):
    return request(
        78,
        version,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait=max_wait,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=100,
        batch_size=100,
        topics=[
            {
                "topic_id": topic_id,
                "partitions": [
                    {"partition_index": p, "acknowledgement_batches": (acks or {}).get(p, [])} for p in partitions
                ],
            }
        ],
        forgotten_topics_data=[],
    )


def share_ack(group: str, topic_id, *, epoch: int, acks, member: str = MEMBER):
    return request(79, 1, group_id=group, member_id=member, share_session_epoch=epoch, topics=[
        {"topic_id": topic_id, "partitions": [{"partition_index": p, "acknowledgement_batches": b}
                                              for p, b in acks.items()]}])


def set_group_config(group: str, key: str, value: str):
    return request(44, 1, resources=[{"resource_type": GROUP_RESOURCE, "resource_name": group, "configs": [
        {"name": key, "config_operation": 0, "value": value}]}], validate_only=False)


async def setup(client, group: str = "g", earliest: bool = True):
    await create_topic(client, "t")
    topic_id = (await metadata(client, ["t"])).topics[0].topic_id
    if earliest:
        answer = await client.request(set_group_config(group, "share.auto.offset.reset", "earliest"))
        assert answer.responses[0].error_code == ErrorCode.none
    joined = await client.request(heartbeat(group))
    assert joined.error_code == ErrorCode.none and joined.member_epoch >= 1
    return topic_id


def acquired(response) -> list[tuple[int, int, int]]:
    return [(r.first_offset, r.last_offset, r.delivery_count)
            for t in response.responses for p in t.partitions for r in p.acquired_records]


async def test_the_share_apis_are_advertised(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        versions = await client.request(request(18, 3, client_software_name="t", client_software_version="1"))
        ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert {k: ranges[k] for k in (76, 77, 78, 79, 90, 91, 92)} == {
            76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 90: (0, 1), 91: (0, 0), 92: (0, 0)}


async def test_share_session_epochs_are_checked(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        topic_id = await setup(client)
        await produce(client, 9, "t", None, 0, build_batch([(None, b"a", [], 0), (None, b"b", [], 0)]))
        batch = [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]
        opening_with_acks = await client.request(share_fetch("g", topic_id, epoch=0, acks={0: batch}))
        assert opening_with_acks.error_code == ErrorCode.invalid_request
        unknown = await client.request(share_fetch("g", topic_id, epoch=3))
        assert unknown.error_code == ErrorCode.share_session_not_found
        first = await client.request(share_fetch("g", topic_id, epoch=0))
        assert acquired(first) == [(0, 1, 1)]
        wrong = await client.request(share_fetch("g", topic_id, epoch=5))
        assert wrong.error_code == ErrorCode.invalid_share_session_epoch
        ack_at_zero = await client.request(share_ack("g", topic_id, epoch=0, acks={0: batch}))
        assert ack_at_zero.error_code == ErrorCode.invalid_share_session_epoch
        acked = await client.request(share_ack("g", topic_id, epoch=1, acks={0: batch}))
        assert acked.error_code == ErrorCode.none
        assert acked.responses[0].partitions[0].error_code == ErrorCode.none
        # Offset 0 is done; acknowledging it again is INVALID_RECORD_STATE for that partition.
        again = await client.request(share_fetch("g", topic_id, epoch=2, acks={0: batch}))
        assert again.responses[0].partitions[0].acknowledge_error_code == ErrorCode.invalid_record_state
        # The final ShareAcknowledge closes the session and releases offset 1.
        closed = await client.request(share_ack("g", topic_id, epoch=-1, acks={}))
        assert closed.error_code == ErrorCode.none
        reopened = await client.request(share_fetch("g", topic_id, epoch=0))
        assert acquired(reopened) == [(1, 1, 2)]


async def test_a_group_id_is_one_kind_of_group(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await setup(client, "shared")
        join = await client.request(request(
            11, 5, group_id="shared", session_timeout=10_000, rebalance_timeout=10_000, member_id="",
            group_instance_id=None, protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}]))
        assert join.error_code == ErrorCode.inconsistent_group_protocol
        consumer = await client.request(request(
            68, 0, group_id="shared", member_id="", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout=10_000, subscribed_topic_names=["t"], server_assignor=None, topic_partitions=[]))
        assert consumer.error_code == ErrorCode.group_id_not_found
        await client.request(request(8, 8, group_id="classic", generation_id_or_member_epoch=-1, member_id="",
                                     group_instance_id=None, topics=[{"name": "t", "partitions": [
                                         {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                                          "committed_metadata": None}]}]))
        refused = await client.request(heartbeat("classic"))
        assert (refused.error_code, refused.error_message) == (ErrorCode.group_id_not_found,
                                                               "Group classic is not a share group.")
        listed = await client.request(request(16, 5, states_filter=[], types_filter=["share"]))
        assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [("shared", "share", "Stable")]
        described = await client.request(request(77, 1, group_ids=["shared", "classic"],
                                                 include_authorized_operations=False))
        shared, classic = described.groups
        assert (shared.group_state, shared.assignor_name, len(shared.members)) == ("Stable", "simple", 1)
        assert shared.members[0].assignment.topic_partitions[0].partitions == (0,)
        assert classic.error_code == ErrorCode.group_id_not_found
        busy = await client.request(request(42, 2, groups_names=["shared"]))
        assert busy.results[0].error_code == ErrorCode.non_empty_group
        left = await client.request(heartbeat("shared", epoch=-1, topics=None))
        assert left.member_epoch == -1
        deleted = await client.request(request(42, 2, groups_names=["shared"]))
        assert deleted.results[0].error_code == ErrorCode.none


async def test_share_group_offsets_are_described_altered_and_deleted(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        topic_id = await setup(client)
        await produce(client, 9, "t", None, 0, build_batch([(None, b"%d" % i, [], 0) for i in range(5)]))
        await client.request(share_fetch("g", topic_id, epoch=0))
        await client.request(share_ack("g", topic_id, epoch=1, acks={
            0: [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]}]}))
        described = await client.request(request(90, 1, groups=[{"group_id": "g", "topics": None}]))
        part = described.groups[0].topics[0].partitions[0]
        assert (part.start_offset, part.lag) == (2, 3)
        busy = await client.request(request(91, 0, group_id="g", topics=[
            {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 4}]}]))
        assert busy.error_code == ErrorCode.non_empty_group
        await client.request(share_ack("g", topic_id, epoch=-1, acks={}))
        await client.request(heartbeat("g", epoch=-1, topics=None))
        altered = await client.request(request(91, 0, group_id="g", topics=[
            {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 4}]}]))
        assert altered.error_code == ErrorCode.none
        described = await client.request(request(90, 1, groups=[{"group_id": "g", "topics": None}]))
        assert described.groups[0].topics[0].partitions[0].start_offset == 4
        deleted = await client.request(request(92, 0, group_id="g", topics=[{"topic_name": "t"}]))
        assert deleted.error_code == ErrorCode.none and deleted.responses[0].error_code == ErrorCode.none
        described = await client.request(request(90, 1, groups=[{"group_id": "g", "topics": None}]))
        assert described.groups[0].topics == ()


async def test_a_bad_group_config_names_the_key_and_what_is_allowed(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        for key, value in (("share.auto.offset.reset", "sometimes"), ("share.record.lock.duration.ms", "5"),
                           ("share.delivery.count.limit", "11"), ("consumer.session.timeout.ms", "5000")):
            answer = await client.request(set_group_config("g", key, value))
            assert answer.responses[0].error_code == ErrorCode.invalid_config, key
            assert key in answer.responses[0].error_message and value in answer.responses[0].error_message
        ok = await client.request(set_group_config("g", "share.auto.offset.reset", "by_duration:PT1H"))
        assert ok.responses[0].error_code == ErrorCode.none


async def test_a_share_fetch_long_poll_wakes_on_a_produce(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client, tb.client() as producer:
        topic_id = await setup(client)
        await client.request(share_fetch("g", topic_id, epoch=0))  # opens the session, nothing yet

        async def later():
            await trio.sleep(1)
            await produce(producer, 9, "t", None, 0, build_batch([(None, b"late", [], 0)]))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(later)
            start = trio.current_time()
            woken = await client.request(share_fetch("g", topic_id, epoch=1, max_wait=30_000))
            assert acquired(woken) == [(0, 0, 1)]
            assert trio.current_time() - start < 30


async def test_acls_as_kafka_checks_them(autojump_clock):
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
    async with open_test_broker(config) as tb, tb.client() as client:
        tb.broker.path.context.acls.create([
            allow("kafka-cluster", AclOperation.CREATE, ResourceType.CLUSTER),
            allow("t", AclOperation.DESCRIBE, ResourceType.TOPIC),
            allow("g", AclOperation.READ, ResourceType.GROUP),
        ])
        await create_topic(client, "t")
        topic_id = (await metadata(client, ["t"])).topics[0].topic_id
        refused = await client.request(heartbeat("other"))
        assert refused.error_code == ErrorCode.group_authorization_failed
        hidden = await client.request(heartbeat("g", topics=("t", "secret")))
        assert (hidden.error_code, hidden.error_message) == (ErrorCode.topic_authorization_failed,
                                                             "Unauthorized topics: secret")
        # DESCRIBE on "t" but not READ: joined and assigned, but a fetch of it is refused.
        joined = await client.request(heartbeat("g"))
        assert joined.error_code == ErrorCode.none and joined.assignment.topic_partitions[0].partitions == (0,)
        fetched = await client.request(share_fetch("g", topic_id, epoch=0))
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
        not_ours = await client.request(share_fetch("other", topic_id, epoch=0))
        assert not_ours.error_code == ErrorCode.group_authorization_failed


async def test_a_lock_expires_in_virtual_time_and_the_record_is_redelivered(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        topic_id = await setup(client)
        await produce(client, 9, "t", None, 0, build_batch([(None, b"x", [], 0)]))
        start = trio.current_time()
        assert acquired(await client.request(share_fetch("g", topic_id, epoch=0))) == [(0, 0, 1)]
        snapshot = await tb.broker.wait_for_share_records("g", "t", 0, state="Available", at_least=1)
        assert trio.current_time() - start == 30  # group.share.record.lock.duration.ms, on trio's clock
        assert [(r.offset, r.state, r.delivery_count) for r in snapshot.records] == [(0, "Available", 1)]
        assert acquired(await client.request(share_fetch("g", topic_id, epoch=1))) == [(0, 0, 2)]
        group = await tb.broker.wait_for_share_group_state("g", "Empty", members=0)  # no heartbeats: expired
        assert group.members == () and trio.current_time() - start >= 45


async def test_member_epochs_are_fenced_and_the_group_size_is_bounded(autojump_clock):
    async with open_test_broker(**{"group.share.max.size": 10, "group.share.assignment.interval.ms": 0}) as tb, \
            tb.client() as client:
        await create_topic(client, "t")
        joined = await client.request(heartbeat("g"))
        stale = await client.request(heartbeat("g", epoch=joined.member_epoch + 1, topics=None))
        assert stale.error_code == ErrorCode.fenced_member_epoch
        stranger = await client.request(heartbeat("g", member="nobody-knows-me-at-all", epoch=3, topics=None))
        assert stranger.error_code == ErrorCode.unknown_member_id
        no_topics = await client.request(heartbeat("g", member="joins-without-topics", topics=None))
        assert no_topics.error_code == ErrorCode.invalid_request
        for i in range(9):
            assert (await client.request(heartbeat("g", member=f"member-{i:02d}-padding"))).error_code == ErrorCode.none
        full = await client.request(heartbeat("g", member="one-too-many-members"))
        assert full.error_code == ErrorCode.group_max_size_reached
        # Every member shares the one partition: the simple assignor gives it to all of them.
        again = await client.request(heartbeat("g", epoch=joined.member_epoch, topics=None))
        assert again.error_code == ErrorCode.none
        described = await client.request(request(77, 1, group_ids=["g"], include_authorized_operations=False))
        assert len(described.groups[0].members) == 10
        assert all(m.assignment.topic_partitions[0].partitions == (0,) for m in described.groups[0].members)


async def test_share_state_survives_a_restart_and_a_deleted_group_stays_deleted(tmp_path, autojump_clock):
    config = {"log_dirs": str(tmp_path)}
    async with open_test_broker(**config) as tb, tb.client() as client:
        topic_id = await setup(client, "kept")
        await produce(client, 9, "t", None, 0, build_batch([(None, b"%d" % i, [], 0) for i in range(3)]))
        await client.request(share_fetch("kept", topic_id, epoch=0))
        await client.request(share_ack("kept", topic_id, epoch=-1, acks={
            0: [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}))
        await client.request(heartbeat("kept", epoch=-1, topics=None))
        await setup_group(client, "gone", topic_id)
        deleted = await client.request(request(42, 2, groups_names=["gone"]))
        assert deleted.results[0].error_code == ErrorCode.none
    async with open_test_broker(**config) as tb, tb.client() as client:
        snapshot = tb.broker.share_partition_snapshot("kept", "t", 0)
        assert (snapshot.start_offset, [(r.offset, r.state, r.delivery_count) for r in snapshot.records]) == (
            1, [(1, "Available", 1), (2, "Available", 1)])
        assert tb.broker.share_partition_snapshot("gone", "t", 0) is None
        assert tb.broker.share_group_snapshot("gone") is None
        listed = await client.request(request(16, 5, states_filter=[], types_filter=["share"]))
        assert [(g.group_id, g.group_state) for g in listed.groups] == [("kept", "Empty")]


async def setup_group(client, group: str, topic_id) -> None:
    await client.request(set_group_config(group, "share.auto.offset.reset", "earliest"))
    await client.request(heartbeat(group))
    await client.request(share_fetch(group, topic_id, epoch=0))
    await client.request(share_ack(group, topic_id, epoch=-1, acks={}))
    await client.request(heartbeat(group, epoch=-1, topics=None))


async def test_a_topic_created_again_under_its_name_starts_a_fresh_share_partition(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        topic_id = await setup(client)
        await produce(client, 9, "t", None, 0, build_batch([(None, b"old", [], 0)]))
        assert acquired(await client.request(share_fetch("g", topic_id, epoch=0))) == [(0, 0, 1)]
        await client.request(share_ack("g", topic_id, epoch=-1, acks={}))  # released: count 1 kept
        deleted = await client.request(request(20, 6, topics=[{"name": "t", "topic_id": None}], timeout=1000))
        assert deleted.responses[0].error_code == ErrorCode.none
        await create_topic(client, "t")
        new_id = (await metadata(client, ["t"])).topics[0].topic_id
        assert new_id != topic_id
        await produce(client, 9, "t", None, 0, build_batch([(None, b"new", [], 0)]))
        assert acquired(await client.request(share_fetch("g", new_id, epoch=0))) == [(0, 0, 1)]
