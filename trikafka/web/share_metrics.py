"""Share groups (KIP-932) in ``/metrics``, under the names Kafka's brokers give them.

Kafka reports share groups in three places, and the JMX exporter's usual rules name them so:

- the group coordinator's KafkaMetrics (``kafka.server:type=group-coordinator-metrics``):
  ``share-group-count`` tagged ``state`` →
  ``kafka_server_group_coordinator_metrics_share_group_count{state}`` (its ``group-count``
  tagged ``protocol=share`` is served with the other protocols' by :mod:`trikafka.web.lag`);
- ``kafka.server:type=ShareGroupMetrics,name=RecordAcknowledgementsPerSec,ackType=T`` (a meter)
  → ``kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType}``, T one of Accept,
  Release, Reject, Renew;
- ``kafka.server:type=SharePartitionMetrics`` tagged group, topic, partition:
  ``InFlightMessageCount`` → ``kafka_server_sharepartitionmetrics_inflightmessagecount`` and
  ``AcquisitionLockTimeoutPerSec`` → ``kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total``.

And beside them:

- ``kafka.server:type=BrokerTopicMetrics`` ``TotalShareFetchRequestsPerSec``,
  ``FailedShareFetchRequestsPerSec``, ``TotalShareAcknowledgementRequestsPerSec`` and
  ``FailedShareAcknowledgementRequestsPerSec`` (per partition named, as Kafka marks them) are
  served with the other BrokerTopicMetrics by :mod:`trikafka.web.metrics`
  (``kafka_server_brokertopicmetrics_totalsharefetchrequests_total{topic}`` ...);
- ``ShareGroupMetrics`` histograms tagged ``group``: ``RequestTopicPartitionsFetchRatio`` (the
  percentage of a ShareFetch's partitions that returned records) →
  ``kafka_server_sharegroupmetrics_requesttopicpartitionsfetchratio{group,quantile}`` and
  ``TopicPartitionsAcquireTimeMs`` (from a ShareFetch's arrival to its records acquired, long
  poll included) → ``kafka_server_sharegroupmetrics_topicpartitionsacquiretimems{group,quantile}``,
  summaries with Yammer's percentiles as the exporter gives them;
- ``group-coordinator-metrics`` ``share-group-rebalance-count`` (target assignments computed)
  → ``kafka_server_group_coordinator_metrics_share_group_rebalance_count``;
- ``share-coordinator-metrics`` ``write-total`` (records written to ``__share_group_state``; 0
  without a data directory, where nothing is written) →
  ``kafka_server_share_coordinator_metrics_write_total``.

Kafka has no metric for a share partition's start or end offset; ``groups describe`` and the
console show those (DescribeShareGroupOffsets). The counts are read from the share coordinator
at scrape time; counters start at 0 when the broker starts, as Kafka's meters do.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily

__all__ = ["ACK_TYPES", "SHARE_GROUP_STATES", "share_families"]

#: Kafka's ShareGroupState values (the ``state`` tag of share-group-count).
SHARE_GROUP_STATES = ("Empty", "Stable", "Dead")
#: Kafka's AcknowledgeType names, capitalized as ShareGroupMetrics tags them.
ACK_TYPES = ("Accept", "Release", "Reject", "Renew")
_COORDINATOR = "kafka_server_group_coordinator_metrics"


def share_families(shares: Any, metrics: Any = None) -> Iterator[Metric]:
    """The share-group series of one broker's share coordinator (none without one) and of
    its request path's ``BrokerMetrics`` (``metrics``)."""
    if shares is None:
        return
    groups = list(shares.groups.values())
    by_state = GaugeMetricFamily(
        f"{_COORDINATOR}_share_group_count", "Share groups in each state (share-group-count).", labels=["state"]
    )
    for state in SHARE_GROUP_STATES:
        by_state.add_metric([state], sum(g.state == state for g in groups))
    yield by_state
    yield GaugeMetricFamily(f"{_COORDINATOR}_share_group_rebalance_count",
                            "Share-group target assignments computed (share-group-rebalance-count).",
                            value=shares.rebalances)
    yield GaugeMetricFamily("kafka_server_share_coordinator_metrics_write_total",
                            "Records written to __share_group_state (share-coordinator-metrics write-total).",
                            value=getattr(shares.store, "writes", 0))
    if metrics is not None:
        yield from _group_histograms(metrics.share_groups)
    partitions = sorted(shares.partitions.values(), key=lambda sp: (sp.group_id, sp.topic, sp.partition))
    acks = CounterMetricFamily(
        "kafka_server_sharegroupmetrics_recordacknowledgements",
        "Records acknowledged, by acknowledgement type (RecordAcknowledgementsPerSec).",
        labels=["ackType"],
    )
    for kind in ACK_TYPES:
        acks.add_metric([kind], sum(sp.acknowledgements.get(kind, 0) for sp in partitions))
    yield acks
    labels = ["group", "topic", "partition"]
    in_flight = GaugeMetricFamily(
        "kafka_server_sharepartitionmetrics_inflightmessagecount",
        "Records a share partition tracks between its start and end offsets (InFlightMessageCount).",
        labels=labels,
    )
    timeouts = CounterMetricFamily(
        "kafka_server_sharepartitionmetrics_acquisitionlocktimeout",
        "Acquisition locks that expired before the record was acknowledged (AcquisitionLockTimeoutPerSec).",
        labels=labels,
    )
    for sp in partitions:
        key = [sp.group_id, sp.topic, str(sp.partition)]
        in_flight.add_metric(key, len(sp.in_flight))
        timeouts.add_metric(key, sp.lock_timeouts)
    yield from (in_flight, timeouts)


def _group_histograms(by_group: Any) -> Iterator[Metric]:
    for stem, field, doc in (
        ("requesttopicpartitionsfetchratio", "fetch_ratio",
         "Percentage of a ShareFetch's partitions that returned records (RequestTopicPartitionsFetchRatio)."),
        ("topicpartitionsacquiretimems", "acquire_time_ms",
         "Milliseconds from a ShareFetch's arrival to its records acquired (TopicPartitionsAcquireTimeMs)."),
    ):
        name = f"kafka_server_sharegroupmetrics_{stem}"
        family = SummaryMetricFamily(name, doc, labels=["group"])
        for group, m in sorted(dict(by_group).items()):
            snap = getattr(m, field).snapshot()
            family.add_metric([group], snap.count, snap.total)
            for label, value in snap.quantiles.items():
                family.add_sample(name, {"group": group, "quantile": label}, value)
        yield family
