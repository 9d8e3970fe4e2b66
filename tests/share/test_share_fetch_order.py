"""What librdkafka's share tests 0172 (mixed acknowledgement modes) and 0179 (destroy with
explicit acks) rely on, on the wire over the in-memory transport in virtual time:

* a ShareFetch answers with the share partitions ready first: Kafka's partition leader loads
  a share partition (its state read from the share coordinator) when a fetch first names it,
  and the fetch completes with the first one ready, so a fetch over several partitions not
  loaded yet answers one; the others come with the next fetches;
* acknowledgements carried by a ShareFetch that also forgets their partition (a member whose
  assignment shrank) are applied before what the member still holds there goes back, so an
  acknowledged record is never handed to another member.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.server.test_topics_and_data import create_topic, metadata, produce, request
from tests.share.test_share_wire import MEMBER, acquired, heartbeat, set_group_config, share_fetch
from trikafka.protocol.records import build_batch
from trikafka.testing import open_test_broker


async def two_partitions(client, group: str = "g"):
    await create_topic(client, "t", 2)
    topic_id = (await metadata(client, ["t"])).topics[0].topic_id
    await client.request(set_group_config(group, "share.auto.offset.reset", "earliest"))
    for partition in (0, 1):
        await produce(client, 9, "t", None, partition, build_batch([(None, b"%d" % i, [], 0) for i in range(5)]))
    assert (await client.request(heartbeat(group))).error_code == ErrorCode.none
    return topic_id


def by_partition(response) -> dict[int, list[tuple[int, int, int]]]:
    return {p.partition_index: [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records]
            for t in response.responses for p in t.partitions if p.acquired_records}


async def test_a_fetch_over_new_share_partitions_answers_the_first_ready(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        topic_id = await two_partitions(client)
        first = await client.request(share_fetch("g", topic_id, epoch=0, partitions=(0, 1)))
        assert by_partition(first) == {0: [(0, 4, 1)]}
        second = await client.request(share_fetch("g", topic_id, epoch=1, partitions=(0, 1)))
        assert by_partition(second) == {1: [(0, 4, 1)]}
        # Once loaded, partitions are read together.
        await produce(client, 9, "t", None, 0, build_batch([(None, b"x", [], 0)]))
        await produce(client, 9, "t", None, 1, build_batch([(None, b"y", [], 0)]))
        third = await client.request(share_fetch("g", topic_id, epoch=2, partitions=(0, 1)))
        assert by_partition(third) == {0: [(5, 5, 1)], 1: [(5, 5, 1)]}


async def test_acks_on_a_partition_forgotten_in_the_same_fetch_are_applied_first(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "t", 1)
        topic_id = (await metadata(client, ["t"])).topics[0].topic_id
        await client.request(set_group_config("g", "share.auto.offset.reset", "earliest"))
        await produce(client, 9, "t", None, 0, build_batch([(None, b"%d" % i, [], 0) for i in range(3)]))
        await client.request(heartbeat("g"))
        held = await client.request(share_fetch("g", topic_id, epoch=0))
        assert acquired(held) == [(0, 2, 1)]
        # Accept 0-1 and forget the partition in one request: 0-1 are done, 2 goes back.
        forgetting = await client.request(request(
            78, 1, group_id="g", member_id=MEMBER, share_session_epoch=1, max_wait=0, min_bytes=1,
            max_bytes=1 << 20, max_records=100, batch_size=100,
            topics=[{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]}]}]}],
            forgotten_topics_data=[{"topic_id": topic_id, "partitions": [0]}]))
        assert forgetting.error_code == ErrorCode.none
        assert forgetting.responses[0].partitions[0].acknowledge_error_code == ErrorCode.none
        snapshot = tb.broker.share_partition_snapshot("g", "t", 0)
        assert snapshot.start_offset == 2
        assert [(r.offset, r.state) for r in snapshot.records] == [(2, "Available")]


async def test_records_produced_after_the_assignment_and_before_the_first_fetch_are_delivered(autojump_clock):
    """With ``share.auto.offset.reset=latest`` (the default) a share partition starts where its
    log ended when the member subscribed — Kafka initializes it before assigning it — not where
    it ended at the member's first ShareFetch."""
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "t", 1)
        topic_id = (await metadata(client, ["t"])).topics[0].topic_id
        await produce(client, 9, "t", None, 0, build_batch([(None, b"before", [], 0)]))
        joined = await client.request(heartbeat("g"))
        assert joined.error_code == ErrorCode.none and joined.assignment is not None
        await produce(client, 9, "t", None, 0, build_batch([(None, b"after", [], 0)]))
        fetched = await client.request(share_fetch("g", topic_id, epoch=0))
        assert by_partition(fetched) == {0: [(1, 1, 1)]}
