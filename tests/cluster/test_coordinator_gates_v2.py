"""NOT_COORDINATOR for the KIP-848 and KIP-890 APIs in an in-process cluster: a
ConsumerGroupHeartbeat or ConsumerGroupDescribe reaches only the group's coordinator, and an
AddPartitionsToTxn v4 batch is answered per transaction (the ones another broker coordinates
are refused, the others served)."""

from __future__ import annotations

from trikafka import open_cluster
from trikafka.errors import ErrorCode
from trikafka.server.replica.cluster_view import GROUP_KEY, TRANSACTION_KEY

from .support import connected, create_topic, request


async def test_consumer_group_apis_reach_only_the_coordinator(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        owner = cluster.coordinator(GROUP_KEY, "g")
        other = next(n for n in (1, 2, 3) if n != owner)
        heartbeat = request(68, 1, group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
                            rebalance_timeout=60_000, subscribed_topic_names=["t"], subscribed_topic_regex=None,
                            server_assignor=None, topic_partitions=[])
        describe = request(69, 1, group_ids=["g"], include_authorized_operations=False)
        async with connected(cluster, other) as client:
            assert (await client.request(heartbeat)).error_code == ErrorCode.not_coordinator
            assert (await client.request(describe)).groups[0].error_code == ErrorCode.not_coordinator
        async with connected(cluster, owner) as client:
            joined = await client.request(heartbeat)
            assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 1)
            assert (await client.request(describe)).groups[0].group_state == "Stable"


async def test_add_partitions_v4_batches_are_answered_per_transaction(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        owner = cluster.coordinator(TRANSACTION_KEY, "tx-a")
        foreign = next(f"tx-{i}" for i in range(100) if cluster.coordinator(TRANSACTION_KEY, f"tx-{i}") != owner)
        async with connected(cluster, 1) as client:
            await create_topic(client, "t")
        async with connected(cluster, owner) as client:
            init = await client.request(request(22, 5, transactional_id="tx-a", transaction_timeout=60_000,
                                                producer_id=-1, producer_epoch=-1))
            assert init.error_code == ErrorCode.none
            batch = request(24, 4, transactions=[
                {"transactional_id": tid, "producer_id": init.producer_id, "producer_epoch": init.producer_epoch,
                 "verify_only": False, "topics": [{"name": "t", "partitions": [0]}]}
                for tid in ("tx-a", foreign)])
            response = await client.request(batch)
        codes = {r.transactional_id: r.topic_results[0].results_by_partition[0].partition_error_code
                 for r in response.results_by_transaction}
        assert codes == {"tx-a": ErrorCode.none, foreign: ErrorCode.not_coordinator}
