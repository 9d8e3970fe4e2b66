"""OffsetForLeaderEpoch, DescribeLogDirs, DescribeProducers and DescribeTopicPartitions over
the in-memory transport (MockClock), at every advertised version."""

from __future__ import annotations

from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch
from trikafka.testing import open_test_broker

from .test_topics_and_data import create_topic, produce, request, versions


async def test_offset_for_leader_epoch(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "e", partitions=2)
        for _ in range(3):
            await produce(client, 9, "e", None, 0, build_batch([(b"k", b"v", [], 0), (b"k", b"w", [], 0)]))
        for version in versions(23):
            response = await client.request(request(23, version, replica_id=-1, topics=[
                {"topic": "e", "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
                    {"partition": 1, "current_leader_epoch": 0, "leader_epoch": 0},
                    {"partition": 0, "current_leader_epoch": 3, "leader_epoch": 0},
                    {"partition": 7, "current_leader_epoch": -1, "leader_epoch": 0}]},
                {"topic": "nope", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]))
            first, empty, future, missing = response.topics[0].partitions
            assert (first.error_code, first.leader_epoch, first.end_offset) == (ErrorCode.none, 0, 6)
            assert (empty.error_code, empty.leader_epoch, empty.end_offset) == (ErrorCode.none, -1, -1)
            assert future.error_code == ErrorCode.unknown_leader_epoch
            assert missing.error_code == ErrorCode.unknown_topic_or_partition
            assert response.topics[1].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_describe_log_dirs_in_memory_and_on_disk(autojump_clock, tmp_path):
    for config in ({}, {"log_dirs": [str(tmp_path)]}):
        async with open_test_broker(**config) as tb, tb.client() as client:
            await create_topic(client, "d", partitions=2)
            await produce(client, 9, "d", None, 1, build_batch([(b"k", b"v" * 100, [], 0)]))
            for version in versions(35):
                response = await client.request(request(35, version, topics=None))
                (result,) = [r for r in response.results if any(t.name == "d" for t in r.topics)]
                assert result.error_code == ErrorCode.none
                assert result.log_dir == (str(tmp_path.absolute()) if config else "memory")
                sizes = {
                    p.partition_index: p.partition_size for t in result.topics if t.name == "d" for p in t.partitions
                }
                assert sizes[0] == 0 and sizes[1] > 100
                if version >= 4:
                    assert (result.total_bytes > 0) == bool(config)
                only = await client.request(request(35, version, topics=[{"topic": "d", "partitions": [1]}]))
                named = [(t.name, p.partition_index) for r in only.results for t in r.topics for p in t.partitions]
                assert named == [("d", 1)]


async def test_describe_producers(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "p")
        init = await client.request(request(22, 4, transactional_id=None, transaction_timeout=60000,
                                            producer_id=-1, producer_epoch=-1))
        batch = build_batch([(b"k", b"v", [], 1234), (b"k", b"w", [], 1250)],
                            producer_id=init.producer_id, producer_epoch=init.producer_epoch, base_sequence=0)
        await produce(client, 9, "p", None, 0, batch)
        response = await client.request(request(61, 0, topics=[{"name": "p", "partition_indexes": [0, 4]},
                                                                {"name": "zz", "partition_indexes": [0]}]))
        ok, bad = response.topics[0].partitions
        assert ok.error_code == ErrorCode.none
        (state,) = ok.active_producers
        assert (state.producer_id, state.producer_epoch, state.last_sequence, state.last_timestamp) == (
            init.producer_id, init.producer_epoch, 1, 1250)
        assert state.current_txn_start_offset == -1
        assert bad.error_code == ErrorCode.unknown_topic_or_partition
        assert response.topics[1].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_describe_topic_partitions_pages_with_a_cursor(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        for name, count in (("b", 3), ("a", 2), ("c", 1)):
            await create_topic(client, name, partitions=count)
        seen, cursor = [], None
        for _ in range(10):
            response = await client.request(request(75, 0, topics=[{"name": n} for n in ("c", "a", "b", "x")],
                                                    response_partition_limit=2, cursor=cursor))
            for topic in response.topics:
                if topic.error_code == ErrorCode.unknown_topic_or_partition:
                    assert topic.name == "x"
                    continue
                assert topic.error_code == ErrorCode.none and len(topic.partitions) <= 2
                seen.extend((topic.name, p.partition_index, p.leader_id, tuple(p.isr_nodes)) for p in topic.partitions)
            if response.next_cursor is None:
                break
            cursor = {
                "topic_name": response.next_cursor.topic_name,
                "partition_index": response.next_cursor.partition_index,
            }
        node = tb.broker.config.node_id
        assert [s[:2] for s in seen] == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2), ("c", 0)]
        assert all(s[2] == node and s[3] == (node,) for s in seen)
        everything = await client.request(request(75, 0, topics=[], response_partition_limit=2000, cursor=None))
        assert {t.name for t in everything.topics} >= {"a", "b", "c"}
