"""Broker metrics under Kafka's names.

Components record into these objects; readers (the CLI, tests, Prometheus text) take frozen
snapshots through ``snapshot()`` and never read private fields. All durations are on trio's
clock, so a MockClock run reports virtual milliseconds.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = [
    "BrokerMetrics",
    "BrokerTopicMetrics",
    "Histogram",
    "HistogramSnapshot",
    "ListenerConnectionMetrics",
    "QUANTILES",
    "RequestMetrics",
    "TIME_PARTS",
]

#: Kafka's split of a request's TotalTimeMs, in the order a request lives them.
TIME_PARTS = (
    "RequestQueueTimeMs",
    "LocalTimeMs",
    "RemoteTimeMs",
    "ResponseQueueTimeMs",
    "ResponseSendTimeMs",
    "TotalTimeMs",
)

#: The percentiles Kafka's Yammer histograms report (50thPercentile ... 999thPercentile), as
#: the JMX exporter labels them (``quantile="0.99"``).
QUANTILES = (("0.50", 0.5), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))

# Bucket bounds in ms: fine below a millisecond, coarse above a second.
_BOUNDS = [0.01 * 1.25**i for i in range(80)]


@attrs.frozen
class HistogramSnapshot:
    count: int
    mean: float
    max: float
    p50: float
    p99: float
    total: float = 0.0
    #: ``QUANTILES``' labels → value.
    quantiles: Mapping[str, float] = attrs.field(factory=dict)


class Histogram:
    """A log-bucketed histogram: constant memory, percentiles within 25 %."""

    __slots__ = ("count", "total", "max", "_buckets")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.max = 0.0
        self._buckets = [0] * (len(_BOUNDS) + 1)

    def record(self, value: float) -> None:
        self.count += 1
        self.total += value
        if value > self.max:
            self.max = value
        self._buckets[bisect.bisect_left(_BOUNDS, value)] += 1

    def _percentile(self, q: float) -> float:
        if not self.count:
            return 0.0
        rank = q * self.count
        seen = 0
        for index, n in enumerate(self._buckets):
            seen += n
            if seen >= rank:
                return min(_BOUNDS[index] if index < len(_BOUNDS) else self.max, self.max)
        return self.max

    def snapshot(self) -> HistogramSnapshot:
        mean = self.total / self.count if self.count else 0.0
        quantiles = {label: self._percentile(q) for label, q in QUANTILES}
        return HistogramSnapshot(
            self.count, mean, self.max, quantiles["0.50"], quantiles["0.99"], self.total, quantiles
        )


class RequestMetrics:
    """Per-API RequestsPerSec counter and the TotalTimeMs split."""

    def __init__(self) -> None:
        self.requests = 0
        self.errors: dict[str, int] = defaultdict(int)
        self.times = {part: Histogram() for part in TIME_PARTS}
        self.histograms = tuple(self.times[part] for part in TIME_PARTS)  # TIME_PARTS order

    def snapshot(self) -> dict[str, Any]:
        return {
            "Requests": self.requests,
            **{part: hist.snapshot() for part, hist in self.times.items()},
        }


@attrs.define
class ListenerConnectionMetrics:
    count: int = 0  # connections open now
    created: int = 0
    closed: int = 0
    rejected: int = 0  # refused at accept by a connection quota


@attrs.define
class BrokerTopicMetrics:
    """Kafka's BrokerTopicMetrics for one topic: what this broker appended and served."""

    messages_in: int = 0  # MessagesInPerSec
    bytes_in: int = 0  # BytesInPerSec: record batch bytes appended as leader
    bytes_out: int = 0  # BytesOutPerSec: record bytes in Fetch responses to consumers
    total_produce_requests: int = 0  # TotalProduceRequestsPerSec (per partition, as Kafka)
    failed_produce_requests: int = 0  # FailedProduceRequestsPerSec
    total_fetch_requests: int = 0  # TotalFetchRequestsPerSec


class BrokerMetrics:
    """Everything the broker counts, by Kafka's metric names."""

    def __init__(self) -> None:
        self.requests: dict[str, RequestMetrics] = defaultdict(RequestMetrics)
        self.connections: dict[str, ListenerConnectionMetrics] = defaultdict(
            ListenerConnectionMetrics
        )
        self.topics: dict[str, BrokerTopicMetrics] = defaultdict(BrokerTopicMetrics)
        self.closed_by_error: int = 0  # connections closed for bad frames or versions
        self.injected_faults: dict[tuple[str, str], int] = defaultdict(int)  # (api, kind), tests

    def record_request(self, api: str, *timings_ms: float) -> None:
        """One request's times in milliseconds, in ``TIME_PARTS`` order."""
        metrics = self.requests[api]
        metrics.requests += 1
        for histogram, value in zip(metrics.histograms, timings_ms, strict=True):
            histogram.record(value)

    def record_produce(self, topic: str, messages: int, size: int) -> None:
        """A partition's batches appended: ``messages`` records of ``size`` bytes."""
        m = self.topics[topic]
        m.total_produce_requests += 1
        m.messages_in += messages
        m.bytes_in += size

    def record_failed_produce(self, topic: str) -> None:
        m = self.topics[topic]
        m.total_produce_requests += 1
        m.failed_produce_requests += 1

    def record_fetch(self, topic: str, size: int) -> None:
        """A partition's answer in a Fetch response sent to a consumer: ``size`` record bytes."""
        m = self.topics[topic]
        m.total_fetch_requests += 1
        m.bytes_out += size

    def connection_opened(self, listener: str) -> None:
        m = self.connections[listener]
        m.count += 1
        m.created += 1

    def connection_closed(self, listener: str) -> None:
        m = self.connections[listener]
        m.count -= 1
        m.closed += 1

    def connection_rejected(self, listener: str) -> None:
        self.connections[listener].rejected += 1
