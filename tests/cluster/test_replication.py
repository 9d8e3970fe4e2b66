"""Leaders, replication, the ISR and the high watermark, over the in-memory transport.

Every test runs a three-broker cluster under trio's MockClock and talks to it with the
project's Trio client, broker by broker, so it can see what each one answers.
"""

from __future__ import annotations

import pytest
import trio

from trikafka import open_cluster
from trikafka.errors import ErrorCode
from trikafka.protocol.records import iter_batches
from trikafka.server.replica.cluster_view import GROUP_KEY, TRANSACTION_KEY

from .support import (
    batch,
    connected,
    create_topic,
    fetch,
    fetch_request,
    find_coordinator,
    metadata,
    produce,
    records_of,
    request,
)


def replica_records(cluster, node_id: int, topic: str, partition: int = 0) -> list:
    replica = cluster.replica_log(node_id, topic, partition)
    found: list = []
    offset = replica.log_start_offset
    while offset < replica.log_end_offset:  # a read stops at a segment's end
        found += records_of(replica.read(offset, 2**31 - 1, min_one_batch=True).records)
        offset = found[-1][0] + 1
    return found


async def test_every_broker_answers_metadata_with_every_broker_and_the_leaders(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            created = await create_topic(client, "spread", partitions=3, replication_factor=2)
            assert created.error_code == ErrorCode.none
            too_many = await create_topic(client, "too-many", replication_factor=4)
            assert too_many.error_code == ErrorCode.invalid_replication_factor
            assert too_many.error_message == "Replication factor: 4 larger than available brokers: 3."
        for node_id in (1, 2, 3):
            async with connected(cluster, node_id) as client:
                md = await metadata(client, ["spread"])
                assert [(b.node_id, b.host) for b in md.brokers] == [(1, "broker-1"), (2, "broker-2"), (3, "broker-3")]
                partitions = sorted(md.topics[0].partitions, key=lambda p: p.partition_index)
                assert [p.leader_id for p in partitions] == [1, 2, 3]
                assert [p.replica_nodes for p in partitions] == [(1, 2), (2, 3), (3, 1)]
                assert [p.isr_nodes for p in partitions] == [(1, 2), (2, 3), (3, 1)]
                assert {p.leader_epoch for p in partitions} == {0}


async def test_a_broker_that_does_not_lead_says_who_does(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            await create_topic(client, "t")
        cluster.move_leader("t", 0, 2)
        # Out of the ISR too: an in-sync follower would serve a consumer's Fetch v11+ (KIP-392).
        cluster.shrink_isr("t", 0, [2, 3])
        async with connected(cluster, 1) as client:
            refused = await produce(client, "t", 0, batch(b"x"), version=10)
            assert refused.error_code == ErrorCode.not_leader_or_follower
            assert (refused.current_leader.leader_id, refused.current_leader.leader_epoch) == (2, 1)
            old = await produce(client, "t", 0, batch(b"x"), version=9)
            assert old.error_code == ErrorCode.not_leader_or_follower
            fetched = await fetch(client, "t", 0, version=12)
            assert fetched.error_code == ErrorCode.not_leader_or_follower
            assert fetched.current_leader.leader_id == 2
            topic_id = (await metadata(client, ["t"])).topics[0].topic_id
            answer = await client.request(fetch_request("t", 0, version=16, topic_id=topic_id))
            assert answer.responses[0].partitions[0].current_leader.leader_id == 2
            assert [(e.node_id, e.host) for e in answer.node_endpoints] == [(2, "broker-2")]
            produced = await client.request(request(0, 10, transactional_id=None, acks=-1, timeout=1000, topic_data=[
                {"name": "t", "partition_data": [{"index": 0, "records": batch(b"x")}]}]))
            assert [(e.node_id, e.host) for e in produced.node_endpoints] == [(2, "broker-2")]
            offsets = await client.request(
                request(
                    2,
                    7,
                    replica_id=-1,
                    isolation_level=0,
                    topics=[
                        {
                            "name": "t",
                            "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}],
                        }
                    ],
                )
            )
            assert offsets.topics[0].partitions[0].error_code == ErrorCode.not_leader_or_follower
        async with connected(cluster, 2) as client:
            accepted = await produce(client, "t", 0, batch(b"x"))
            assert (accepted.error_code, accepted.base_offset) == (ErrorCode.none, 0)


async def test_the_leader_append_reaches_every_in_sync_replica_before_the_answer(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            await create_topic(client, "r")
            for i in range(5):
                answer = await produce(client, "r", 0, batch(b"a%d" % i, b"b%d" % i))
                assert (answer.error_code, answer.base_offset) == (ErrorCode.none, 2 * i)
            expected = replica_records(cluster, 1, "r")
            assert len(expected) == 10
            for node_id in (2, 3):
                assert replica_records(cluster, node_id, "r") == expected
                replica = cluster.replica_log(node_id, "r", 0)
                assert replica.log_end_offset == 10
            fetched = await fetch(client, "r", 0)
            assert fetched.high_watermark == 10


async def test_acks_all_below_min_insync_replicas_is_refused_until_the_isr_grows_back(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            await create_topic(client, "safe", configs={"min.insync.replicas": "2"})
            assert (await produce(client, "safe", 0, batch(b"one"))).error_code == ErrorCode.none
            cluster.shrink_isr("safe", 0, to=[1])
            assert (await metadata(client, ["safe"])).topics[0].partitions[0].isr_nodes == (1,)
            refused = await produce(client, "safe", 0, batch(b"refused"))
            assert refused.error_code == ErrorCode.not_enough_replicas
            assert "min.isr" in refused.error_message
            leader_only = await produce(client, "safe", 0, batch(b"acks=1"), acks=1)
            assert (leader_only.error_code, leader_only.base_offset) == (ErrorCode.none, 1)
            # The replicas out of the ISR did not get it; the high watermark is the ISR's.
            assert cluster.replica_log(2, "safe", 0).log_end_offset == 1
            assert (await fetch(client, "safe", 0)).high_watermark == 2
            cluster.expand_isr("safe", 0, [2])
            assert replica_records(cluster, 2, "safe") == replica_records(cluster, 1, "safe")
            accepted = await produce(client, "safe", 0, batch(b"two"))
            assert (accepted.error_code, accepted.base_offset) == (ErrorCode.none, 2)
            assert cluster.replica_log(3, "safe", 0).log_end_offset == 1  # still out of the ISR
            cluster.expand_isr("safe", 0)
            assert cluster.replica_log(3, "safe", 0).log_end_offset == 3


async def test_a_leader_move_bumps_the_epoch_and_keeps_the_offsets(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            await create_topic(client, "m")
            await produce(client, "m", 0, batch(b"before"))
        cluster.move_leader("m", 0, 3)
        cluster.shrink_isr("m", 0, to=[3, 2])
        with pytest.raises(ValueError, match="live in-sync replica"):
            cluster.move_leader("m", 0, 1)  # out of the ISR: Kafka elects no such replica
        async with connected(cluster, 3) as client:
            answer = await produce(client, "m", 0, batch(b"after"))
            assert answer.base_offset == 1
            data = (await fetch(client, "m", 0)).records
        assert records_of(data) == [(0, b"before"), (1, b"after")]
        assert [h.partition_leader_epoch for h in iter_batches(data)] == [0, 1]
        assert cluster.leadership("m", 0).leader_epoch == 1


async def test_a_stopped_leader_is_replaced_from_the_isr_and_catches_up_when_it_returns(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            await create_topic(client, "s")
            await produce(client, "s", 0, batch(b"a", b"b"))
        await cluster.stop_broker(1)
        assert cluster.replica_log(1, "s", 0) is None
        lead = cluster.leadership("s", 0)
        assert (lead.leader, lead.leader_epoch, lead.isr, lead.offline) == (2, 1, (2, 3), (1,))
        async with connected(cluster, 2) as client:
            md = await metadata(client, ["s"])
            assert [b.node_id for b in md.brokers] == [2, 3]
            assert md.topics[0].partitions[0].offline_replicas == (1,)
            assert (await produce(client, "s", 0, batch(b"c"))).base_offset == 2
        await cluster.start_broker(1)  # it copies what it missed
        assert cluster.leadership("s", 0).isr == (1, 2, 3)
        assert replica_records(cluster, 1, "s") == [(0, b"a"), (1, b"b"), (2, b"c")]
        async with connected(cluster, 1) as client:
            md = await metadata(client, ["s"])
            assert [b.node_id for b in md.brokers] == [1, 2, 3]
            assert md.topics[0].partitions[0].leader_id == 2


async def test_a_partition_whose_last_in_sync_replica_stops_is_offline_until_it_returns(autojump_clock):
    async with open_cluster(brokers=2, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            await create_topic(client, "alone", replication_factor=2)
            cluster.shrink_isr("alone", 0, to=[1])
            await produce(client, "alone", 0, batch(b"only-on-1"), acks=1)
        await cluster.stop_broker(1)
        async with connected(cluster, 2) as client:
            partition = (await metadata(client, ["alone"])).topics[0].partitions[0]
            assert (partition.error_code, partition.leader_id) == (ErrorCode.leader_not_available, -1)
            assert (await produce(client, "alone", 0, batch(b"x"))).error_code == ErrorCode.not_leader_or_follower
        await cluster.start_broker(1)
        lead = cluster.leadership("alone", 0)
        assert (lead.leader, lead.isr) == (1, (1, 2))
        assert replica_records(cluster, 2, "alone") == [(0, b"only-on-1")]


async def test_find_coordinator_names_the_owner_and_others_answer_not_coordinator(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        owner = cluster.coordinator(GROUP_KEY, "g")
        other = next(n for n in (1, 2, 3) if n != owner)
        for node_id in (1, 2, 3):
            async with connected(cluster, node_id) as client:
                found = await find_coordinator(client, "g")
                assert (found.error_code, found.node_id, found.host) == (ErrorCode.none, owner, f"broker-{owner}")
        heartbeat = request(12, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
        async with connected(cluster, other) as client:
            assert (await client.request(heartbeat)).error_code == ErrorCode.not_coordinator
        async with connected(cluster, owner) as client:
            assert (await client.request(heartbeat)).error_code == ErrorCode.unknown_member_id
        cluster.move_coordinator("g", other, key_type="group")
        async with connected(cluster, owner) as client:
            assert (await client.request(heartbeat)).error_code == ErrorCode.not_coordinator
            assert (await find_coordinator(client, "g")).node_id == other
        async with connected(cluster, other) as client:
            assert (await client.request(heartbeat)).error_code == ErrorCode.unknown_member_id


async def test_file_logs_replicate_to_each_brokers_directory_and_recover_on_restart(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, transport="memory", log_dirs=str(tmp_path)) as cluster:
        async with connected(cluster, 1) as client:
            await create_topic(client, "durable")
            await produce(client, "durable", 0, batch(b"kept"))
        for node_id in (1, 2, 3):
            assert (tmp_path / f"broker-{node_id}" / "durable-0" / "00000000000000000000.log").stat().st_size > 0
        await cluster.stop_broker(3)
        async with connected(cluster, 1) as client:
            await produce(client, "durable", 0, batch(b"while-3-was-down"))
        await cluster.start_broker(3)  # reopens its files, then copies what it missed
        assert replica_records(cluster, 3, "durable") == [(0, b"kept"), (1, b"while-3-was-down")]


async def test_a_stale_leader_epoch_is_fenced_and_a_future_one_unknown(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            await create_topic(client, "e")
        cluster.move_leader("e", 0, 2)
        cluster.move_leader("e", 0, 1)  # epoch 2, back on broker 1
        async with connected(cluster, 1) as client:
            for epoch, code in (
                (1, ErrorCode.fenced_leader_epoch),
                (3, ErrorCode.unknown_leader_epoch),
                (2, ErrorCode.none),
                (-1, ErrorCode.none),
            ):
                assert (await fetch(client, "e", 0, current_leader_epoch=epoch)).error_code == code
                listed = await client.request(
                    request(
                        2,
                        7,
                        replica_id=-1,
                        isolation_level=0,
                        topics=[
                            {
                                "name": "e",
                                "partitions": [{"partition_index": 0, "current_leader_epoch": epoch, "timestamp": -1}],
                            }
                        ],
                    )
                )
                assert listed.topics[0].partitions[0].error_code == code


async def test_group_requests_to_a_broker_that_does_not_coordinate_answer_in_their_own_shape(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        owner = cluster.coordinator(GROUP_KEY, "g")
        other = next(n for n in (1, 2, 3) if n != owner)
        elsewhere = next(f"h{i}" for i in range(100) if cluster.coordinator(GROUP_KEY, f"h{i}") != owner)
        async with connected(cluster, 1) as client:
            await create_topic(client, "t", partitions=2)
        commit = request(
            8,
            8,
            group_id="g",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 5,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        },
                        {
                            "partition_index": 1,
                            "committed_offset": 7,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        },
                    ],
                }
            ],
        )
        async with connected(cluster, other) as client:
            refused = await client.request(commit)
            assert [p.error_code for p in refused.topics[0].partitions] == [ErrorCode.not_coordinator] * 2
            described = await client.request(request(15, 5, groups=["g"], include_authorized_operations=False))
            assert described.groups[0].error_code == ErrorCode.not_coordinator
            deleted = await client.request(request(42, 2, groups_names=["g"]))
            assert deleted.results[0].error_code == ErrorCode.not_coordinator
            fetched = await client.request(
                request(9, 8, groups=[{"group_id": "g", "topics": None}], require_stable=False)
            )
            assert fetched.groups[0].error_code == ErrorCode.not_coordinator
        async with connected(cluster, owner) as client:
            accepted = await client.request(commit)
            assert [p.error_code for p in accepted.topics[0].partitions] == [ErrorCode.none] * 2
            listed = await client.request(request(16, 4, states_filter=[]))
            assert [g.group_id for g in listed.groups] == ["g"]
            fetched = await client.request(
                request(
                    9,
                    8,
                    groups=[{"group_id": "g", "topics": None}, {"group_id": elsewhere, "topics": None}],
                    require_stable=False,
                )
            )
            assert [(g.group_id, g.error_code) for g in fetched.groups] == [
                ("g", ErrorCode.none),
                (elsewhere, ErrorCode.not_coordinator),
            ]
            assert sorted(p.committed_offset for p in fetched.groups[0].topics[0].partitions) == [5, 7]
            deleted = await client.request(request(42, 2, groups_names=["g", elsewhere]))
            assert [(r.group_id, r.error_code) for r in deleted.results] == [
                ("g", ErrorCode.none),
                (elsewhere, ErrorCode.not_coordinator),
            ]
        async with connected(cluster, other) as client:
            assert (await client.request(request(16, 4, states_filter=[]))).groups == ()


async def test_transaction_requests_reach_only_the_transaction_coordinator(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        owner = cluster.coordinator(TRANSACTION_KEY, "tx")
        other = next(n for n in (1, 2, 3) if n != owner)
        init = request(22, 4, transactional_id="tx", transaction_timeout=60000, producer_id=-1, producer_epoch=-1)
        async with connected(cluster, other) as client:
            assert (await client.request(init)).error_code == ErrorCode.not_coordinator
            found = await find_coordinator(client, "tx", key_type=TRANSACTION_KEY)
            assert found.node_id == owner
            idempotent = await client.request(
                request(22, 4, transactional_id=None, transaction_timeout=60000, producer_id=-1, producer_epoch=-1)
            )
            assert idempotent.error_code == ErrorCode.none  # no transactional id: any broker
            add = await client.request(
                request(
                    24,
                    3,
                    v3_and_below_transactional_id="tx",
                    v3_and_below_producer_id=1,
                    v3_and_below_producer_epoch=0,
                    v3_and_below_topics=[{"name": "t", "partitions": [0, 1]}],
                )
            )
            assert [r.partition_error_code for r in add.results_by_topic_v3_and_below[0].results_by_partition] == [
                ErrorCode.not_coordinator
            ] * 2
        async with connected(cluster, owner) as client:
            granted = await client.request(init)
            assert granted.error_code == ErrorCode.none
            described = await client.request(request(65, 0, transactional_ids=["tx"]))
            assert described.transaction_states[0].error_code == ErrorCode.none
        async with connected(cluster, other) as client:
            described = await client.request(request(65, 0, transactional_ids=["tx"]))
            assert described.transaction_states[0].error_code == ErrorCode.not_coordinator
            listed = await client.request(request(66, 0, state_filters=[], producer_id_filters=[]))
            assert listed.transaction_states == ()


async def test_controls_refuse_what_cannot_be_done_and_change_nothing(autojump_clock):
    async with open_cluster(brokers=2, transport="memory") as cluster:
        with pytest.raises(ValueError, match="already running"):
            await cluster.start_broker(1)
        async with connected(cluster, 1) as client:  # broker 1 still serves, on its own replicas
            assert (await create_topic(client, "still", replication_factor=2)).error_code == ErrorCode.none
            assert (await produce(client, "still", 0, batch(b"x"))).base_offset == 0
        await cluster.stop_broker(2)
        with pytest.raises(ValueError, match="is not running"):
            await cluster.stop_broker(2)
        with pytest.raises(ValueError, match="stopped: it cannot join an ISR"):
            cluster.expand_isr("still", 0, [2])
        assert cluster.leadership("still", 0).isr == (1,)


async def test_a_file_backed_cluster_restarts_with_its_data_and_no_replica_left_behind(autojump_clock, tmp_path):
    async with open_cluster(brokers=3, transport="memory", log_dirs=str(tmp_path)) as cluster:
        async with connected(cluster, 1) as client:
            await create_topic(client, "kept")
            await produce(client, "kept", 0, batch(b"all-three"))
        await cluster.stop_broker(1)  # the preferred leader falls behind
        async with connected(cluster, 2) as client:
            assert (await produce(client, "kept", 0, batch(b"two-and-three"))).base_offset == 1
    async with open_cluster(brokers=3, transport="memory", log_dirs=str(tmp_path)) as cluster:
        assert cluster.leader("kept", 0) == 2  # the replica holding the most leads
        for node_id in (1, 2, 3):
            assert replica_records(cluster, node_id, "kept") == [(0, b"all-three"), (1, b"two-and-three")]
        async with connected(cluster, 2) as client:
            assert (await produce(client, "kept", 0, batch(b"after"))).base_offset == 2


async def test_stopping_a_broker_drops_its_connections_at_once(autojump_clock):
    async with open_cluster(brokers=2, transport="memory") as cluster:
        stream = await cluster.connect(2)
        start = trio.current_time()
        await cluster.stop_broker(2)
        assert await stream.receive_some(1) == b""  # closed by the broker, no grace period
        assert trio.current_time() == start
        with pytest.raises(trio.ClosedResourceError):
            await cluster.connect(2)
        await cluster.start_broker(2)
        async with connected(cluster, 2) as client:
            assert [b.node_id for b in (await metadata(client, None)).brokers] == [1, 2]


async def test_new_partitions_keep_the_factor_and_deleted_topics_leave_every_broker(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 2) as client:
            await create_topic(client, "grow", partitions=1, replication_factor=2)
            grown = await client.request(
                request(
                    37, 3, topics=[{"name": "grow", "count": 3, "assignments": None}], timeout=1000, validate_only=False
                )
            )
            assert grown.results[0].error_code == ErrorCode.none
            partitions = sorted(
                (await metadata(client, ["grow"])).topics[0].partitions, key=lambda p: p.partition_index
            )
            assert [p.replica_nodes for p in partitions] == [(1, 2), (2, 3), (3, 1)]
            assert cluster.replica_log(3, "grow", 1) is not None and cluster.replica_log(1, "grow", 1) is None
            deleted = await client.request(request(20, 6, topics=[{"name": "grow", "topic_id": None}], timeout=1000))
            assert deleted.responses[0].error_code == ErrorCode.none
            assert all(cluster.replica_log(n, "grow", p) is None for n in (1, 2, 3) for p in range(3))
            assert (await create_topic(client, "grow", partitions=1, replication_factor=3)).error_code == ErrorCode.none
            assert (await metadata(client, ["grow"])).topics[0].partitions[0].replica_nodes == (1, 2, 3)


async def test_a_long_poll_on_a_leader_that_loses_the_partition_ends_at_once(autojump_clock):
    async with open_cluster(brokers=2, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            await create_topic(client, "poll", replication_factor=2)
            # v10: leader only (from v11 an in-sync follower serves a consumer, KIP-392).
            long_poll = with_max_wait(fetch_request("poll", 0, version=10), 10_000)
            answers = []
            start = trio.current_time()

            async def poll() -> None:
                answers.append((await client.request(long_poll), trio.current_time()))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll)
                await trio.sleep(1)
                # One waiter, watching the partition's end and the cluster's changes alike.
                end = cluster.replica_log(1, "poll", 0).high_watermark
                assert len(end.watchers) == 1 and cluster.changes.watchers == end.watchers
                cluster.move_leader("poll", 0, 2)
            response, when = answers[0]
            assert response.responses[0].partitions[0].error_code == ErrorCode.not_leader_or_follower
            assert when - start == 1  # when the leader moved, not at max_wait (10 s)
            assert not cluster.changes.watchers and not end.watchers


async def test_a_fetch_without_wait_answers_for_the_leadership_after_its_second_read(autojump_clock):
    """A fetch with max_wait 0 that finds nothing lets ready work run before it reads again;
    when the leader moved meanwhile, its answer says so instead of reading the old log."""
    async with open_cluster(brokers=2, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            await create_topic(client, "moving", replication_factor=2)
            log = cluster.replica_log(1, "moving", 0)
            read_once = trio.Event()
            read = log.read

            def read_and_tell(*args, **kwargs):
                read_once.set()
                return read(*args, **kwargs)

            async def move_once_read() -> None:
                await read_once.wait()  # ready from the fetch's first read on
                cluster.move_leader("moving", 0, 2)

            log.read = read_and_tell
            async with trio.open_nursery() as nursery:
                nursery.start_soon(move_once_read)
                response = await client.request(with_max_wait(fetch_request("moving", 0, version=10), 0))
            assert response.responses[0].partitions[0].error_code == ErrorCode.not_leader_or_follower


def with_max_wait(body, ms: int):
    import dataclasses
    import datetime

    return dataclasses.replace(body, max_wait=datetime.timedelta(milliseconds=ms))


async def test_a_coordinator_moves_to_a_broker_that_held_no_replica_of_its_partition(autojump_clock):
    async with open_cluster(brokers=5, transport="memory") as cluster:
        topic, partition = cluster.state.coordinator_partition(GROUP_KEY, "g")
        outsider = next(n for n in range(1, 6) if n not in cluster.leadership(topic, partition).replicas)
        async with connected(cluster, cluster.coordinator(GROUP_KEY, "g")) as client:
            commit = request(
                8,
                8,
                group_id="g",
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=[
                    {
                        "name": "t",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 3,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            )
            await create_topic(client, "t")
            answer = await client.request(commit)  # the first commit creates __consumer_offsets
            assert answer.topics[0].partitions[0].error_code == ErrorCode.none
        cluster.move_coordinator("g", outsider, key_type="group")
        lead = cluster.leadership(topic, partition)
        assert lead.leader == outsider and outsider in lead.isr and lead.leader_epoch == 1
        assert cluster.replica_log(outsider, topic, partition).log_end_offset == (
            cluster.replica_log(lead.replicas[0], topic, partition).log_end_offset
        )
        async with connected(cluster, outsider) as client:
            assert (await find_coordinator(client, "g")).node_id == outsider
            fetched = await client.request(
                request(9, 8, groups=[{"group_id": "g", "topics": None}], require_stable=False)
            )
            assert fetched.groups[0].topics[0].partitions[0].committed_offset == 3


def _create_assigned(name: str, assignment: dict[int, list[int]]):
    return request(19, 7, timeout=1000, validate_only=False, topics=[{
        "name": name, "num_partitions": -1, "replication_factor": -1, "configs": [],
        "assignments": [{"partition_index": p, "broker_ids": b} for p, b in assignment.items()]}])


async def test_manual_replica_assignments_are_honoured_or_refused_as_kafka_does(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            created = (await client.request(_create_assigned("manual", {0: [3, 1], 1: [2, 3]}))).topics[0]
            assert (created.error_code, created.num_partitions, created.replication_factor) == (ErrorCode.none, 2, 2)
            partitions = sorted(
                (await metadata(client, ["manual"])).topics[0].partitions, key=lambda p: p.partition_index
            )
            assert [(p.leader_id, p.replica_nodes) for p in partitions] == [(3, (3, 1)), (2, (2, 3))]
            assert cluster.replica_log(2, "manual", 0) is None and cluster.replica_log(1, "manual", 0) is not None
            for bad, message in (
                ({0: [9]}, "includes broker 9, but no such broker is registered"),
                ({0: [1, 1]}, "includes the broker 1 more than once"),
                ({0: [1, 2], 1: [3]}, "must have 2 replicas"),
                ({1: [1]}, "consecutive 0-based"),
            ):
                refused = (await client.request(_create_assigned("bad", bad))).topics[0]
                assert refused.error_code == ErrorCode.invalid_replica_assignment
                assert message in refused.error_message
            grow = await client.request(request(37, 3, timeout=1000, validate_only=False, topics=[
                {"name": "manual", "count": 3, "assignments": [{"broker_ids": [1, 2]}]}]))
            assert grow.results[0].error_code == ErrorCode.none
            assert cluster.leadership("manual", 2).replicas == (1, 2)
            wrong = await client.request(request(37, 3, timeout=1000, validate_only=False, topics=[
                {"name": "manual", "count": 5, "assignments": [{"broker_ids": [1, 2]}]}]))
            assert wrong.results[0].error_code == ErrorCode.invalid_replica_assignment
            assert "by 2 but 1 assignments provided" in wrong.results[0].error_message


async def test_a_single_broker_takes_an_assignment_naming_itself_only(autojump_clock):
    from trikafka.testing import open_test_broker

    async with open_test_broker() as tb, tb.client() as client:
        assert (await client.request(_create_assigned("mine", {0: [1]}))).topics[0].error_code == ErrorCode.none
        refused = (await client.request(_create_assigned("theirs", {0: [1, 2]}))).topics[0]
        assert refused.error_code == ErrorCode.invalid_replica_assignment


async def test_offset_for_leader_epoch_follows_the_leader_and_its_epochs(autojump_clock):
    async with open_cluster(brokers=2, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            await create_topic(client, "ep", replication_factor=2)
            await produce(client, "ep", 0, batch(b"a", b"b"))  # epoch 0: offsets 0-1
        cluster.move_leader("ep", 0, 2)
        async with connected(cluster, 2) as client:
            await produce(client, "ep", 0, batch(b"c"))  # epoch 1: offset 2

            def ask(current: int, epoch: int):
                return request(23, 4, replica_id=-1, topics=[{"topic": "ep", "partitions": [
                    {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}])

            answer = (await client.request(ask(1, 0))).topics[0].partitions[0]
            assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (ErrorCode.none, 0, 2)
            answer = (await client.request(ask(1, 1))).topics[0].partitions[0]
            assert (answer.leader_epoch, answer.end_offset) == (1, 3)
            assert (await client.request(ask(0, 0))).topics[0].partitions[0].error_code == ErrorCode.fenced_leader_epoch
        async with connected(cluster, 1) as client:
            assert (await client.request(ask(1, 0))).topics[0].partitions[
                0
            ].error_code == ErrorCode.not_leader_or_follower
