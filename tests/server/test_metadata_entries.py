"""Metadata for every topic is built from each topic's cached, encoded entry (TopicEntries):
every version decodes to the topics as they are, and every change — a topic created, grown or
deleted, a leader moved — is in the next answer."""

from __future__ import annotations

from trikafka import open_cluster
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import IMPLEMENTED_APIS
from trikafka.testing import open_test_broker

from ..cluster.support import connected
from ..cluster.support import create_topic as cluster_create_topic
from ..cluster.support import metadata as cluster_metadata
from .test_topics_and_data import create_topic, metadata, request


def shape(md) -> list[tuple]:
    return [(t.name, t.error_code, len(t.partitions), [p.partition_index for p in t.partitions]) for t in md.topics]


async def test_every_version_of_an_all_topics_answer_decodes_to_the_topics(autojump_clock):
    low, high = IMPLEMENTED_APIS[3]
    async with open_test_broker() as tb, tb.client() as client:
        for name, count in (("b", 2), ("a", 3), ("c", 1)):
            await create_topic(client, name, count)
        for version in range(low, high + 1):
            for _ in range(2):  # the encoded entries' first use, then their reuse
                md = await metadata(client, [] if version == 0 else None, version=version)
                assert shape(md) == [
                    ("a", ErrorCode.none, 3, [0, 1, 2]),
                    ("b", ErrorCode.none, 2, [0, 1]),
                    ("c", ErrorCode.none, 1, [0]),
                ], version
                assert [b.node_id for b in md.brokers] == [tb.broker.config.node_id], version
                assert all(p.leader_id == tb.broker.config.node_id for t in md.topics for p in t.partitions)


async def test_an_all_topics_answer_follows_creation_growth_and_deletion(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "keep", 1)
        await create_topic(client, "doomed", 1)
        assert [t.name for t in (await metadata(client, None)).topics] == ["doomed", "keep"]
        grown = await client.request(request(37, 3, topics=[
            {"name": "keep", "count": 4, "assignments": None}], timeout=1000, validate_only=False))
        assert grown.results[0].error_code == ErrorCode.none
        deleted = await client.request(request(20, 5, topic_names=["doomed"], topics=[], timeout=1000))
        assert deleted.responses[0].error_code == ErrorCode.none
        await create_topic(client, "new", 2)
        md = await metadata(client, None)
        assert [(t.name, len(t.partitions)) for t in md.topics] == [("keep", 4), ("new", 2)]


async def test_an_all_topics_answer_follows_a_leader_that_moved(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 2) as client:
            await cluster_create_topic(client, "s")
            before = (await cluster_metadata(client, None)).topics[0].partitions[0]
            assert before.leader_id == 1
        await cluster.stop_broker(1)
        async with connected(cluster, 2) as client:
            after = (await cluster_metadata(client, None)).topics[0].partitions[0]
            assert (after.leader_id, after.leader_epoch, after.offline_replicas) == (2, 1, (1,))
