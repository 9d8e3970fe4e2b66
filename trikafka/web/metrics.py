"""``/metrics``: the broker's own counters in Prometheus text, under the JMX exporter's names.

Nothing is counted twice: :class:`KafkaCollector` is a ``prometheus_client`` custom collector
that reads, at scrape time, what the broker already keeps — :class:`~trikafka.metrics.
BrokerMetrics` (requests, their time split, connections, per-topic traffic), the broker's
``statistics()`` snapshot (queue sizes, idle percentages), the logs (size, offsets,
segments), the cluster view (leaders, ISR), the group coordinator (committed offsets) and
the share coordinator (share groups, :mod:`trikafka.web.share_metrics`), and what clients pushed
(KIP-714 client telemetry, :mod:`trikafka.web.client_metrics`).

Names are the ones the Prometheus JMX exporter gives Kafka's MBeans under the widely used
rule sets (``lowercaseOutputName``; ``kafka.<domain><type=T, name=NPerSec, k=v><>Count`` →
``kafka_<domain>_<t>_<n>_total{k=v}``, ``<>Value`` → ``kafka_<domain>_<t>_<n>``,
``<>99thPercentile`` → ``{quantile="0.99"}``), so stock Kafka dashboards chart trikafka.
Consumer-group series follow kafka-lag-exporter (:mod:`trikafka.web.lag`). Where two rule
sets spell a series differently (``socketservermetrics`` vs Strimzi's
``socket_server_metrics``) both spellings are served.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from trikafka.metrics import TIME_PARTS
from trikafka.server.kafka_apis import ApiContext
from trikafka.server.replica.cluster_view import cluster_view
from trikafka.web.client_metrics import client_metric_families
from trikafka.web.lag import lag_families
from trikafka.web.share_metrics import share_families

__all__ = ["KafkaCollector", "metrics_app", "metrics_registry"]

#: BrokerTopicMetrics: the MBean's name stem (JMX exporter spelling) → BrokerTopicMetrics field.
TOPIC_COUNTERS = {
    "messagesin": ("messages_in", "Records appended as leader (MessagesInPerSec)."),
    "bytesin": ("bytes_in", "Record batch bytes appended as leader (BytesInPerSec)."),
    "bytesout": ("bytes_out", "Record bytes sent to consumers in Fetch responses (BytesOutPerSec)."),
    "totalproducerequests": ("total_produce_requests", "Produce requests per partition (TotalProduceRequestsPerSec)."),
    "failedproducerequests": (
        "failed_produce_requests",
        "Produce requests refused per partition (FailedProduceRequestsPerSec).",
    ),
    "totalfetchrequests": ("total_fetch_requests", "Fetch requests per partition (TotalFetchRequestsPerSec)."),
    "totalsharefetchrequests": (
        "total_share_fetch_requests", "ShareFetch requests per partition (TotalShareFetchRequestsPerSec)."),
    "failedsharefetchrequests": (
        "failed_share_fetch_requests",
        "ShareFetch partitions answered with an error (FailedShareFetchRequestsPerSec)."),
    "totalshareacknowledgementrequests": (
        "total_share_ack_requests",
        "Partitions acknowledged by ShareFetch or ShareAcknowledge (TotalShareAcknowledgementRequestsPerSec)."),
    "failedshareacknowledgementrequests": (
        "failed_share_ack_requests",
        "Partitions whose acknowledgements failed (FailedShareAcknowledgementRequestsPerSec)."),
}


class KafkaCollector:
    """Reads one broker's state at each scrape (``prometheus_client``'s Collector protocol).

    ``context`` is the broker's :class:`ApiContext` (a cluster node has one too);
    ``statistics`` returns the broker's ``BrokerStatistics`` (queue size, idle percents,
    purgatory) when it has one.
    """

    def __init__(self, context: ApiContext, statistics: Callable[[], Any] | None = None) -> None:
        self.context = context
        self.statistics = statistics

    def describe(self) -> Iterable[Metric]:
        return ()  # families depend on what exists at scrape time

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_traffic()
        yield from self._requests()
        yield from self._connections()
        yield from self._broker_state()
        yield from self._partitions()
        groups = self.context.groups
        yield from lag_families(
            groups.list_groups(), self._latest_offset, self.context.metadata_cache.cluster_id,
            groups.consumer.groups, len(shares.groups) if (shares := self.context.shares) else 0,
        )
        yield from share_families(shares, self.context.metrics)
        yield from client_metric_families(self.context.client_metrics)

    # --- BrokerTopicMetrics ------------------------------------------------------------

    def _topic_traffic(self) -> Iterator[Metric]:
        topics = dict(self.context.metrics.topics)
        for stem, (field, doc) in TOPIC_COUNTERS.items():
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{stem}", doc, labels=None)
            family.add_metric([], sum(getattr(m, field) for m in topics.values()))
            for topic, m in sorted(topics.items()):
                family.add_sample(
                    f"kafka_server_brokertopicmetrics_{stem}_total", {"topic": topic}, getattr(m, field)
                )
            yield family

    # --- RequestMetrics ------------------------------------------------------------------

    def _requests(self) -> Iterator[Metric]:
        snapshots = {api: m.snapshot() for api, m in self.context.metrics.requests.items()}
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests answered (RequestsPerSec).", labels=["request"]
        )
        for api, snap in sorted(snapshots.items()):
            requests.add_metric([api], snap["Requests"])
        yield requests
        for part in TIME_PARTS:
            name = f"kafka_network_requestmetrics_{part.lower()}"
            family = SummaryMetricFamily(
                name, f"{part} per request, in milliseconds (Kafka's RequestMetrics).", labels=["request"]
            )
            for api, snap in sorted(snapshots.items()):
                hist = snap[part]
                family.add_metric([api], hist.count, hist.total)
                for label, value in hist.quantiles.items():
                    family.add_sample(name, {"request": api, "quantile": label}, value)
            yield family

    # --- socket-server-metrics -----------------------------------------------------------

    def _connections(self) -> Iterator[Metric]:
        listeners = {name: (m.count, m.created, m.closed) for name, m in self.context.metrics.connections.items()}
        for listener in self.context.config.listeners:
            listeners.setdefault(listener.name, (0, 0, 0))
        for spelling in ("socketservermetrics", "socket_server_metrics"):
            count = GaugeMetricFamily(
                f"kafka_server_{spelling}_connection_count", "Connections open now.", labels=["listener"]
            )
            created = CounterMetricFamily(
                f"kafka_server_{spelling}_connection_creation", "Connections accepted.", labels=["listener"]
            )
            closed = CounterMetricFamily(
                f"kafka_server_{spelling}_connection_close", "Connections closed.", labels=["listener"]
            )
            for name, (open_now, made, gone) in sorted(listeners.items()):
                count.add_metric([name], open_now)
                created.add_metric([name], made)
                closed.add_metric([name], gone)
            yield from (count, created, closed)

    def _broker_state(self) -> Iterator[Metric]:
        if self.statistics is None:
            return
        stats = self.statistics()
        yield _gauge(
            "kafka_network_requestchannel_requestqueuesize", "Requests waiting for a handler.", stats.request_queue_size
        )
        yield _gauge(
            "kafka_network_socketserver_networkprocessoravgidle_percent",
            "Share of time the network processors were idle (0..1).",
            stats.network_processor_avg_idle_percent,
        )
        yield _gauge(
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
            "Share of time the request handlers were idle (0..1).",
            stats.request_handler_avg_idle_percent,
        )
        if stats.memory_pool_available is not None:  # queued.max.request.bytes set
            yield _gauge(
                "kafka_network_socketserver_memorypoolavailable",
                "Bytes left in the request memory pool (queued.max.request.bytes).",
                stats.memory_pool_available,
            )
            yield _gauge(
                "kafka_network_socketserver_memorypoolused",
                "Bytes of requests being read or waiting to be handled (queued.max.request.bytes).",
                stats.memory_pool_used,
            )
        yield _gauge(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Delayed operations waiting (long-poll Fetch, JoinGroup, ...).",
            stats.purgatory_size,
        )

    # --- ReplicaManager, KafkaController, Log --------------------------------------------

    def _latest_offset(self, topic: str, partition: int) -> int | None:
        """The high watermark (ListOffsets' latest), or None if the partition has no log here."""
        try:
            return self.context.replicas.get_log(topic, partition).high_watermark.value
        except Exception:  # deleted between listing and reading, or not hosted here
            return None

    def _partitions(self) -> Iterator[Metric]:
        replicas = self.context.replicas
        view = cluster_view(self.context)
        me = self.context.config.node_id
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's log.", labels=["topic", "partition"])
        end = GaugeMetricFamily(
            "kafka_log_log_logendoffset", "A partition's log end offset.", labels=["topic", "partition"]
        )
        start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset", "A partition's log start offset.", labels=["topic", "partition"]
        )
        segments = GaugeMetricFamily(
            "kafka_log_log_numlogsegments", "Segments of a partition's log.", labels=["topic", "partition"]
        )
        earliest = GaugeMetricFamily(
            "kafka_partition_earliest_offset",
            "Earliest offset (kafka-lag-exporter).",
            labels=["cluster_name", "topic", "partition"],
        )
        latest = GaugeMetricFamily(
            "kafka_partition_latest_offset", "Latest offset: the high watermark (kafka-lag-exporter).",
            labels=["cluster_name", "topic", "partition"],
        )
        cluster = self.context.metadata_cache.cluster_id
        hosted = leaders = under_replicated = under_min_isr = offline = partitions_total = 0
        topics = list(replicas.topics)
        for info in sorted(topics, key=lambda t: t.name):
            min_isr = info.configs.get("min.insync.replicas", replicas.config.min_insync_replicas)
            for p in range(info.partitions):
                partitions_total += 1
                lead = view.leadership(info.name, p)
                if lead.leader < 0:
                    offline += 1
                if me in lead.replicas or not lead.replicas:
                    hosted += 1
                if lead.leader != me:
                    continue
                leaders += 1
                under_replicated += len(lead.isr) < len(lead.replicas)
                under_min_isr += len(lead.isr) < min_isr
                try:
                    log = replicas.get_log(info.name, p)
                except Exception:
                    continue
                labels = [info.name, str(p)]
                size.add_metric(labels, log.size_in_bytes)
                end.add_metric(labels, log.log_end_offset)
                start.add_metric(labels, log.log_start_offset)
                segments.add_metric(labels, len(log.segments))
                earliest.add_metric([cluster, *labels], log.log_start_offset)
                latest.add_metric([cluster, *labels], log.high_watermark.value)
        yield from (size, end, start, segments, earliest, latest)
        yield _gauge("kafka_server_replicamanager_partitioncount", "Partitions with a replica on this broker.", hosted)
        yield _gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads.", leaders)
        yield _gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Led partitions whose ISR is smaller than their replicas.",
            under_replicated,
        )
        yield _gauge(
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Led partitions whose ISR is below min.insync.replicas.",
            under_min_isr,
        )
        controller = self.context.metadata_cache.controller_id == me
        yield _gauge("kafka_controller_kafkacontroller_activecontrollercount", "1 on the controller.", int(controller))
        yield _gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a live leader (controller only).",
            offline if controller else 0,
        )
        yield _gauge(
            "kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster (controller only).",
            len(topics) if controller else 0,
        )
        yield _gauge(
            "kafka_controller_kafkacontroller_globalpartitioncount", "Partitions in the cluster (controller only).",
            partitions_total if controller else 0,
        )


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def metrics_registry(context: ApiContext, statistics: Callable[[], Any] | None = None) -> CollectorRegistry:
    """A registry of its own (not prometheus_client's global one): several brokers in one
    process each serve their own numbers."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(KafkaCollector(context, statistics))
    return registry


def metrics_app(broker: Any) -> Any:
    """The ASGI app serving ``broker``'s metrics (anything with ``context`` and, optionally,
    ``statistics()``): Prometheus text, or OpenMetrics when the scraper asks for it."""
    from prometheus_client import make_asgi_app

    return make_asgi_app(metrics_registry(broker.path.context, getattr(broker, "statistics", None)))
