"""``__consumer_offsets`` is compacted like any compacted topic: after many commits to a few
partitions its log holds about one record per key, and a restart replays only those and
still knows every group's last committed offset."""

from __future__ import annotations

from trikafka.coordinator.offsets import OFFSETS_TOPIC
from trikafka.testing import open_test_broker

from ..server.test_topics_and_data import create_topic, request


async def _commit(client, group: str, offsets: dict[int, int]) -> None:
    response = await client.request(
        request(
            8,
            8,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": o,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                        for p, o in offsets.items()
                    ],
                }
            ],
        )
    )
    assert all(p.error_code == 0 for t in response.topics for p in t.partitions)


async def _fetch(client, group: str) -> dict[int, int]:
    response = await client.request(request(9, 7, group_id=group, topics=None, require_stable=False))
    return {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions}


async def test_offsets_topic_is_compacted_and_replays_the_last_commits(autojump_clock, tmp_path):
    config = {"log_dirs": [str(tmp_path)], "offsets_topic_num_partitions": 1, "offsets_topic_segment_bytes": 2048}
    async with open_test_broker(**config) as tb, tb.client() as client:
        await create_topic(client, "t", partitions=3)
        for i in range(150):
            await _commit(client, "g", {i % 3: i})
        await _commit(client, "h", {0: 7})
        log = tb.broker.replica_manager.get_log(OFFSETS_TOPIC, 0)
        before = log.size_in_bytes
        log.roll()  # what the next commit past segment.bytes would do
        assert tb.broker.log_cleaner.clean_once() >= 1
        after = log.size_in_bytes
        assert after < before / 10, (before, after)
        assert await _fetch(client, "g") == {0: 147, 1: 148, 2: 149}
    async with open_test_broker(**config) as tb, tb.client() as client:
        log = tb.broker.replica_manager.get_log(OFFSETS_TOPIC, 0)
        assert log.size_in_bytes == after
        assert await _fetch(client, "g") == {0: 147, 1: 148, 2: 149}
        assert await _fetch(client, "h") == {0: 7}
