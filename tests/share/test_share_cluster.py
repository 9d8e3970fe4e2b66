"""Share groups in an in-process cluster, on the wire in virtual time: the membership APIs go
to the group's coordinator (NOT_COORDINATOR elsewhere), ShareFetch to the partition's leader
(NOT_LEADER_OR_FOLLOWER elsewhere, with the leader and where it listens)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.cluster.support import connected, create_topic, request
from tests.share.test_share_wire import heartbeat, share_fetch
from trikafka import open_cluster
from trikafka.server.replica.cluster_view import GROUP_KEY


async def test_share_apis_reach_the_coordinator_and_the_leader(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        owner = cluster.coordinator(GROUP_KEY, "g")
        other = next(n for n in (1, 2, 3) if n != owner)
        async with connected(cluster, other) as client:
            await create_topic(client, "t")
            refused = await client.request(heartbeat("g"))
            assert refused.error_code == ErrorCode.not_coordinator
            described = await client.request(request(77, 1, group_ids=["g"], include_authorized_operations=False))
            assert described.groups[0].error_code == ErrorCode.not_coordinator
        async with connected(cluster, owner) as client:
            assert (await client.request(heartbeat("g"))).error_code == ErrorCode.none
            metadata = await client.request(request(3, 12, topics=[{"name": "t", "topic_id": None}],
                                                    allow_auto_topic_creation=False,
                                                    include_topic_authorized_operations=False))
        topic_id = metadata.topics[0].topic_id
        leader = metadata.topics[0].partitions[0].leader_id
        follower = next(n for n in (1, 2, 3) if n != leader)
        async with connected(cluster, follower) as client:
            answer = await client.request(share_fetch("g", topic_id, epoch=0))
            part = answer.responses[0].partitions[0]
            assert part.error_code == ErrorCode.not_leader_or_follower
            assert part.current_leader.leader_id == leader
            assert [e.node_id for e in answer.node_endpoints] == [leader]
        async with connected(cluster, leader) as client:
            answer = await client.request(share_fetch("g", topic_id, epoch=0))
            assert (answer.error_code, answer.responses) == (ErrorCode.none, ())  # served; nothing to acquire yet
