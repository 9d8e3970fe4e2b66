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
  ``AcquisitionLockTimeoutPerSec`` → ``kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total``,
  ``InFlightBatchCount`` (runs of consecutive in-flight records in one state, holder and lock: the
  batches Kafka's cached state keeps) → ``kafka_server_sharepartitionmetrics_inflightbatchcount``,
  and the histograms ``FetchLockTimeMs`` (a ShareFetch's read and acquire of the partition),
  ``FetchLockRatio`` (that time as a percentage of the time since the previous fetch took it) and
  ``InFlightBatchMessageCount`` (records per acquired batch) →
  ``kafka_server_sharepartitionmetrics_fetchlocktimems{group,topic,partition,quantile}`` etc.;
- ``ShareGroupMetrics`` ``PartitionLoadTimeMs`` (loading a share partition's state at its leader,
  at the first ShareFetch that names it) → ``kafka_server_sharegroupmetrics_partitionloadtimems``.

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
        yield _summary(
            "kafka_server_sharegroupmetrics_partitionloadtimems",
            "Milliseconds to load a share partition's state at its leader (PartitionLoadTimeMs).",
            [((), metrics.share_partition_load_ms)], [],
        )
        by_partition = sorted(dict(metrics.share_partitions).items())
        for stem, field, doc in _PARTITION_HISTOGRAMS:
            yield _summary(
                f"kafka_server_sharepartitionmetrics_{stem}", doc,
                [((g, t, str(p)), getattr(m, field)) for (g, t, p), m in by_partition], ["group", "topic", "partition"],
            )
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
    batches = GaugeMetricFamily(
        "kafka_server_sharepartitionmetrics_inflightbatchcount",
        "Batches of in-flight records a share partition tracks (InFlightBatchCount).",
        labels=labels,
    )
    for sp in partitions:
        key = [sp.group_id, sp.topic, str(sp.partition)]
        in_flight.add_metric(key, len(sp.in_flight))
        timeouts.add_metric(key, sp.lock_timeouts)
        batches.add_metric(key, sp.in_flight_batches())
    yield from (in_flight, timeouts, batches)


_PARTITION_HISTOGRAMS = (
    ("fetchlocktimems", "fetch_lock_time_ms",
     "Milliseconds a ShareFetch held a share partition to read and acquire its records (FetchLockTimeMs)."),
    ("fetchlockratio", "fetch_lock_ratio",
     "A share partition's fetch lock time as a percentage of the time since the previous fetch took it "
     "(FetchLockRatio)."),
    ("inflightbatchmessagecount", "in_flight_batch_messages",
     "Records in each batch a ShareFetch acquired (InFlightBatchMessageCount)."),
)


def _summary(name: str, doc: str, series: list[tuple[tuple[str, ...], Any]], labels: list[str]) -> Metric:
    """A Yammer histogram as the JMX exporter serves it: a summary with its percentiles."""
    family = SummaryMetricFamily(name, doc, labels=labels)
    for values, histogram in series:
        snap = histogram.snapshot()
        family.add_metric(list(values), snap.count, snap.total)
        for label, value in snap.quantiles.items():
            family.add_sample(name, {**dict(zip(labels, values, strict=True)), "quantile": label}, value)
    return family


def _group_histograms(by_group: Any) -> Iterator[Metric]:
    groups = sorted(dict(by_group).items())
    for stem, field, doc in (
        ("requesttopicpartitionsfetchratio", "fetch_ratio",
         "Percentage of a ShareFetch's partitions that returned records (RequestTopicPartitionsFetchRatio)."),
        ("topicpartitionsacquiretimems", "acquire_time_ms",
         "Milliseconds from a ShareFetch's arrival to its records acquired (TopicPartitionsAcquireTimeMs)."),
    ):
        yield _summary(f"kafka_server_sharegroupmetrics_{stem}", doc,
                       [((group,), getattr(m, field)) for group, m in groups], ["group"])
