"""What clients pushed (KIP-714) in ``/metrics``: one series per client instance and metric.

A pushed metric's OTLP name becomes a Prometheus name as OpenTelemetry's Prometheus exporter
makes it: every character other than a letter, digit or ``_`` becomes ``_``
(``org.apache.kafka.producer.record.queue.time.avg`` →
``org_apache_kafka_producer_record_queue_time_avg``). Its labels are the client's —
``client_instance_id``, ``client_id``, ``client_software_name`` — and the data point's own
attributes (``node_id``, ``topic``...). The value is the latest pushed: a gauge's reading, or
a sum as the client sent it (the broker asks for delta temporality, as Kafka's does, so a sum
is the change over the last push interval). A histogram's parts are ``_sum``, ``_count``,
``_min`` and ``_max`` series. Read from the ClientMetricsManager at scrape time; a client
instance the broker expired (unheard of for 3 push intervals, at least 60 s) is gone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

__all__ = ["CLIENT_LABELS", "client_metric_families", "prometheus_name"]

CLIENT_LABELS = ("client_instance_id", "client_id", "client_software_name")
_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(name: str) -> str:
    cleaned = _INVALID.sub("_", name)
    return f"_{cleaned}" if cleaned[:1].isdigit() else cleaned


def client_metric_families(manager: Any) -> Iterator[Metric]:
    """One gauge family per pushed metric name (and histogram part), every client instance's."""
    series: dict[str, list[tuple[dict[str, str], float]]] = {}
    for client in manager.snapshot():
        own = {"client_instance_id": client.client_instance_id, "client_id": client.client_id,
               "client_software_name": client.client_software_name}
        for name, attributes, kind, value in client.points:
            part = kind.partition(".")[2]
            family = prometheus_name(name) + (f"_{part}" if part else "")
            labels = {prometheus_name(k): v for k, v in attributes if prometheus_name(k) not in own}
            series.setdefault(family, []).append(({**own, **labels}, value))
    for family, samples in sorted(series.items()):
        extra = sorted({k for labels, _ in samples for k in labels} - set(CLIENT_LABELS))
        names = [*CLIENT_LABELS, *extra]
        gauge = GaugeMetricFamily(family, "Pushed by clients (KIP-714 client telemetry).", labels=names)
        for labels, value in samples:
            gauge.add_metric([labels.get(k, "") for k in names], value)
        yield gauge
