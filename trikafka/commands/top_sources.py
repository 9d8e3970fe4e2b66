"""Where ``top``'s numbers come from.

* The protocol, from any Kafka: Metadata (brokers, controller, topics), ListOffsets (end
  offsets), DescribeLogDirs (sizes, when the cluster has it), ListGroups / DescribeGroups /
  OffsetFetch (state, members, lag) — :func:`protocol_snapshot`.
* Request metrics, which the Kafka protocol does not carry: from the broker object itself when
  ``top --live`` runs it in the same process (:class:`InProcessMetrics`, its ``statistics()``),
  or from a Prometheus endpoint (:class:`PrometheusMetrics`) with the names the Prometheus JMX
  exporter gives Kafka's MBeans (``kafka_network_requestmetrics_totaltimems{request=...,
  quantile=...}`` …). Without either the panel says that the broker does not expose them.
"""

from __future__ import annotations

import collections
from typing import Any

import trio

from trikafka.client import Admin, KafkaError, OffsetSpec, TopicPartition
from trikafka.commands.groups import group_lag
from trikafka.commands.top_model import TIME_SPLIT, ApiTimes, GroupRow, Snapshot, TopicRow

__all__ = ["InProcessMetrics", "PrometheusMetrics", "parse_prometheus", "protocol_snapshot"]


async def protocol_snapshot(admin: Admin) -> Snapshot:
    """What any Kafka tells a client about its topics and groups."""
    await admin.list_topics()
    cluster = admin.client.cluster
    topics = {name: info for name, info in cluster.topics.items() if not info.is_internal and info.partitions}
    tps = [TopicPartition(name, p) for name, info in topics.items() for p in info.partitions]
    ends = await admin.list_offsets({tp: OffsetSpec.LATEST for tp in tps}) if tps else {}
    found: dict[TopicPartition, int] = {}
    sizes: dict[TopicPartition, int] | None = found
    try:
        for node, by_tp in (await admin.describe_log_dirs()).items():
            found.update({tp: size for tp, size in by_tp.items() if cluster.leader_for(tp) == node})
    except KafkaError:  # no DescribeLogDirs (librdkafka's mock cluster): sizes unknown
        sizes = None
    rows = []
    for name in sorted(topics):
        parts = [TopicPartition(name, p) for p in topics[name].partitions]
        rows.append(TopicRow(
            name, len(parts),
            None if sizes is None else sum(sizes.get(tp, 0) for tp in parts),
            sum(ends[tp].offset for tp in parts),
        ))
    groups = []
    try:
        listings = await admin.list_groups()
    except KafkaError:
        listings = []
    for listing in listings:
        try:
            description, offsets = await group_lag(admin, listing.group_id)
        except KafkaError:
            groups.append(GroupRow(listing.group_id, listing.state or "?", 0, None))
            continue
        lags = [r["lag"] for r in offsets if r["lag"] is not None]
        groups.append(
            GroupRow(listing.group_id, description.state, len(description.members), sum(lags) if lags else None)
        )
    return Snapshot(
        at=trio.current_time(), cluster_id=cluster.cluster_id, controller=cluster.controller_id,
        brokers=len(cluster.brokers), topics=tuple(rows), groups=tuple(groups),
    )


class InProcessMetrics:
    """``top --live``: the broker in this process, read through its ``statistics()``."""

    source = "in-process broker statistics()"

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    async def read(self) -> dict[str, Any]:
        stats = self.broker.statistics()
        requests = {}
        for api, snap in stats.requests.items():
            total = snap["TotalTimeMs"]
            requests[api] = ApiTimes(
                int(snap["Requests"]), total.p50, total.p99, {label: snap[name].mean for label, name in TIME_SPLIT}
            )
        connections = {name: int(m["count"]) for name, m in stats.connections.items()}
        return {"requests": requests, "connections": connections, "metrics_source": self.source}


_REQUEST_COUNTS = ("kafka_network_requestmetrics_requests_total", "kafka_network_requestmetrics_requestspersec_total")
_PART_NAMES = {label: "kafka_network_requestmetrics_" + name.lower() for label, name in TIME_SPLIT}


def parse_prometheus(text: str) -> dict[str, Any]:
    """Prometheus text → ``{"requests", "connections", "bytes_in", "bytes_out"}`` (each None
    when the exposition has no such series), read with prometheus_client's own parser."""
    from prometheus_client.parser import text_string_to_metric_families

    counts: dict[str, float] = {}
    quantiles: dict[tuple[str, str], float] = {}
    sums: dict[tuple[str, str], float] = collections.defaultdict(float)
    connections: dict[str, int] = {}
    bytes_in = bytes_out = None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, sample.value
            request = labels.get("request")
            if name in _REQUEST_COUNTS and request:
                counts[request] = value
            elif name == "kafka_network_requestmetrics_totaltimems" and request and "quantile" in labels:
                quantiles[request, str(float(labels["quantile"]))] = value
            elif name.endswith(("_sum", "_count")) and request and name.rsplit("_", 1)[0] in _PART_NAMES.values():
                sums[name, request] += value
                if name == "kafka_network_requestmetrics_totaltimems_count":
                    counts.setdefault(request, value)
            elif name == "kafka_server_socketservermetrics_connection_count" and "listener" in labels:
                connections[labels["listener"]] = connections.get(labels["listener"], 0) + int(value)
            elif name == "kafka_server_brokertopicmetrics_bytesin_total" and "topic" not in labels:
                bytes_in = (bytes_in or 0) + int(value)
            elif name == "kafka_server_brokertopicmetrics_bytesout_total" and "topic" not in labels:
                bytes_out = (bytes_out or 0) + int(value)
    requests = {}
    for request, count in counts.items():
        parts = {}
        for label, base in _PART_NAMES.items():
            n = sums.get((base + "_count", request), 0.0)
            parts[label] = sums.get((base + "_sum", request), 0.0) / n if n else 0.0
        requests[request] = ApiTimes(
            int(count), quantiles.get((request, "0.5"), 0.0), quantiles.get((request, "0.99"), 0.0), parts
        )
    return {
        "requests": requests or None, "connections": connections or None,
        "bytes_in": bytes_in, "bytes_out": bytes_out,
    }


class PrometheusMetrics:
    """``top --metrics URL``: scrape the broker's Prometheus endpoint each refresh (httpx,
    which runs on trio through anyio)."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.source = f"Prometheus {url}"

    async def read(self) -> dict[str, Any]:
        import httpx

        try:
            async with httpx.AsyncClient(timeout=self.timeout) as http:
                answer = await http.get(self.url)
                answer.raise_for_status()
        except httpx.HTTPError as exc:
            return {"metrics_source": f"{self.url}: {exc}"}
        return {**parse_prometheus(answer.text), "metrics_source": self.source}
