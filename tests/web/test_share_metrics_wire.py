"""Kafka's share metrics as a broker counts them, read from its collector after requests over
the in-memory transport in virtual time: the BrokerTopicMetrics share meters (failed ones
included), the ShareGroupMetrics histograms and the share coordinator's write-total.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.share.test_share_fetch_order import two_partitions
from tests.share.test_share_wire import share_ack, share_fetch
from trikafka.testing import open_test_broker
from trikafka.web.metrics import KafkaCollector


def samples(tb) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in KafkaCollector(tb.broker.path.context).collect() for s in family.samples}


async def test_share_meters_histograms_and_writes(tmp_path, autojump_clock):
    async with open_test_broker(log_dirs=str(tmp_path)) as tb, tb.client() as client:
        topic_id = await two_partitions(client)
        first = await client.request(share_fetch("g", topic_id, epoch=0, partitions=(0, 1)))  # one ready of two
        assert first.error_code == ErrorCode.none
        accept = [{"first_offset": 0, "last_offset": 4, "acknowledge_types": [1]}]
        await client.request(share_ack("g", topic_id, epoch=1, acks={0: accept}))
        again = await client.request(share_ack("g", topic_id, epoch=2, acks={0: accept}))  # done already
        assert again.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
        got = samples(tb)
    topic = (("topic", "t"),)
    assert got[("kafka_server_brokertopicmetrics_totalsharefetchrequests_total", topic)] == 2
    assert got[("kafka_server_brokertopicmetrics_failedsharefetchrequests_total", topic)] == 0
    assert got[("kafka_server_brokertopicmetrics_totalshareacknowledgementrequests_total", topic)] == 2
    assert got[("kafka_server_brokertopicmetrics_failedshareacknowledgementrequests_total", topic)] == 1
    ratio = "kafka_server_sharegroupmetrics_requesttopicpartitionsfetchratio"
    assert got[(ratio + "_count", (("group", "g"),))] == 1
    assert got[(ratio + "_sum", (("group", "g"),))] == 50.0  # one partition of the two returned records
    assert got[("kafka_server_sharegroupmetrics_topicpartitionsacquiretimems_count", (("group", "g"),))] == 1
    assert got[("kafka_server_group_coordinator_metrics_share_group_rebalance_count", ())] >= 1
    assert got[("kafka_server_share_coordinator_metrics_write_total", ())] >= 2  # the group, its partition


async def test_share_partition_metrics_load_fetch_lock_and_in_flight_batches(autojump_clock):
    """PartitionLoadTimeMs (one load per share partition the leader loads), FetchLockTimeMs and
    FetchLockRatio (per fetch of a partition), InFlightBatchMessageCount (records per acquired
    batch) and InFlightBatchCount (batches held now), under Kafka's names."""
    async with open_test_broker() as tb, tb.client() as client:
        topic_id = await two_partitions(client)  # 5 records in each partition
        await client.request(share_fetch("g", topic_id, epoch=0, partitions=(0, 1)))  # loads and reads 0
        autojump_clock.jump(1)  # the ratio is over the time since the previous fetch of a partition
        await client.request(share_fetch("g", topic_id, epoch=1, partitions=(0, 1)))  # loads and reads 1
        accept = [{"first_offset": 1, "last_offset": 1, "acknowledge_types": [1]}]
        await client.request(share_ack("g", topic_id, epoch=2, acks={0: accept}))  # splits 0-4 in three
        got = samples(tb)
    assert got[("kafka_server_sharegroupmetrics_partitionloadtimems_count", ())] == 2
    for partition, fetches in (("0", 2), ("1", 1)):
        labels = (("group", "g"), ("partition", partition), ("topic", "t"))
        assert got[("kafka_server_sharepartitionmetrics_fetchlocktimems_count", labels)] == fetches
        assert got[("kafka_server_sharepartitionmetrics_inflightbatchmessagecount_count", labels)] == 1
        assert got[("kafka_server_sharepartitionmetrics_inflightbatchmessagecount_sum", labels)] == 5
    labels0 = (("group", "g"), ("partition", "0"), ("topic", "t"))
    labels1 = (("group", "g"), ("partition", "1"), ("topic", "t"))
    assert got[("kafka_server_sharepartitionmetrics_fetchlockratio_count", labels0)] == 1  # the second fetch
    assert got[("kafka_server_sharepartitionmetrics_inflightbatchcount", labels0)] == 3  # 0, 1 done, 2-4
    assert got[("kafka_server_sharepartitionmetrics_inflightbatchcount", labels1)] == 1
