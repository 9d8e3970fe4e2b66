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
    "ShareGroupFetchMetrics",
    "SharePartitionFetchMetrics",
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


def _snapshot(count: int, total: float, largest: float, buckets: list[int]) -> HistogramSnapshot:
    """A snapshot of a log-bucketed histogram of milliseconds over ``_BOUNDS`` (constant
    memory, percentiles within 25 %)."""

    def percentile(q: float) -> float:
        rank = q * count
        seen = 0
        for index, n in enumerate(buckets):
            seen += n
            if seen >= rank:
                return min(_BOUNDS[index] if index < len(_BOUNDS) else largest, largest)
        return largest

    quantiles = {label: percentile(q) if count else 0.0 for label, q in QUANTILES}
    mean = total / count if count else 0.0
    return HistogramSnapshot(count, mean, largest, quantiles["0.50"], quantiles["0.99"], total, quantiles)


# The same bounds in seconds: request times are recorded as trio clock differences.
_BOUNDS_S = [bound / 1000 for bound in _BOUNDS]


class RequestMetrics:
    """Per-API RequestsPerSec counter and the TotalTimeMs split (``TIME_PARTS``).

    The six histograms are flat lists recorded in one pass from the request's timestamps,
    in seconds, and turned into milliseconds only in ``snapshot()``: this runs once per
    request, and six histogram objects recorded one by one were ~2 µs of a ~23 µs tiny request.
    """

    __slots__ = ("requests", "errors", "_totals", "_maxes", "_buckets")

    def __init__(self) -> None:
        self.requests = 0
        self.errors: dict[str, int] = defaultdict(int)
        self._totals = [0.0] * len(TIME_PARTS)
        self._maxes = [0.0] * len(TIME_PARTS)
        self._buckets = [[0] * (len(_BOUNDS) + 1) for _ in TIME_PARTS]

    def record(
        self, start: float, dequeued: float, local: float, remote: float, picked_up: float, done: float
    ) -> None:
        """One request's life on trio's clock (seconds): received, taken by a handler, handled,
        completed (purgatory), picked up by its connection, written."""
        self.requests += 1
        totals, maxes, buckets = self._totals, self._maxes, self._buckets
        bucket = bisect.bisect_left
        bounds = _BOUNDS_S
        for index, value in enumerate(
            (dequeued - start, local - dequeued, remote - local, picked_up - remote, done - picked_up, done - start)
        ):
            totals[index] += value
            if value > maxes[index]:
                maxes[index] = value
            buckets[index][bucket(bounds, value)] += 1

    @property
    def times(self) -> dict[str, HistogramSnapshot]:
        """``TIME_PARTS`` → a snapshot in milliseconds."""
        count = self.requests
        return {
            part: _snapshot(count, self._totals[index] * 1000, self._maxes[index] * 1000, self._buckets[index])
            for index, part in enumerate(TIME_PARTS)
        }

    def snapshot(self) -> dict[str, Any]:
        return {"Requests": self.requests, **self.times}


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
    total_share_fetch_requests: int = 0  # TotalShareFetchRequestsPerSec (per partition fetched)
    failed_share_fetch_requests: int = 0  # FailedShareFetchRequestsPerSec
    total_share_ack_requests: int = 0  # TotalShareAcknowledgementRequestsPerSec (per partition)
    failed_share_ack_requests: int = 0  # FailedShareAcknowledgementRequestsPerSec


class Histogram:
    """One of Kafka's Yammer histograms of values (ms, or a percentage) on ``_BOUNDS``."""

    __slots__ = ("count", "total", "largest", "buckets")

    def __init__(self) -> None:
        self.count, self.total, self.largest = 0, 0.0, 0.0
        self.buckets = [0] * (len(_BOUNDS) + 1)

    def record(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.largest = max(self.largest, value)
        self.buckets[bisect.bisect_left(_BOUNDS, value)] += 1

    def snapshot(self) -> HistogramSnapshot:
        return _snapshot(self.count, self.total, self.largest, self.buckets)


@attrs.define
class ShareGroupFetchMetrics:
    """Kafka's ShareGroupMetrics histograms tagged with one group, as this broker saw them."""

    #: RequestTopicPartitionsFetchRatio: % of a ShareFetch's partitions that returned records
    fetch_ratio: Histogram = attrs.Factory(Histogram)
    #: TopicPartitionsAcquireTimeMs: from a ShareFetch's arrival to its records acquired
    acquire_time_ms: Histogram = attrs.Factory(Histogram)


@attrs.define
class SharePartitionFetchMetrics:
    """Kafka's SharePartitionMetrics histograms of one share partition (group, topic, partition)."""

    #: FetchLockTimeMs: how long a ShareFetch held the partition (read and acquire)
    fetch_lock_time_ms: Histogram = attrs.Factory(Histogram)
    #: FetchLockRatio: that time as a percentage of the time since the previous fetch took it
    fetch_lock_ratio: Histogram = attrs.Factory(Histogram)
    #: InFlightBatchMessageCount: records in each batch a ShareFetch acquired
    in_flight_batch_messages: Histogram = attrs.Factory(Histogram)
    last_lock_at: float | None = None


class BrokerMetrics:
    """Everything the broker counts, by Kafka's metric names."""

    def __init__(self) -> None:
        self.requests: dict[str, RequestMetrics] = defaultdict(RequestMetrics)
        self._by_api_key: dict[int, RequestMetrics] = {}  # the same objects, for request_done
        self.connections: dict[str, ListenerConnectionMetrics] = defaultdict(
            ListenerConnectionMetrics
        )
        self.topics: dict[str, BrokerTopicMetrics] = defaultdict(BrokerTopicMetrics)
        self.share_groups: dict[str, ShareGroupFetchMetrics] = defaultdict(ShareGroupFetchMetrics)
        self.share_partitions: dict[tuple[str, str, int], SharePartitionFetchMetrics] = defaultdict(
            SharePartitionFetchMetrics
        )
        #: ShareGroupMetrics PartitionLoadTimeMs: loading a share partition's state at the leader
        self.share_partition_load_ms = Histogram()
        self.closed_by_error: int = 0  # connections closed for bad frames or versions
        self.injected_faults: dict[tuple[str, str], int] = defaultdict(int)  # (api, kind), tests

    def request_done(self, request: Any, done: float) -> None:
        """A request's answer was written at ``done``: record its life (the connections'
        ``request_done`` hook). Its API's metrics are found by api key, not by name."""
        metrics = self._by_api_key.get(request.header.request_api_key)
        if metrics is None:
            spec = request.spec
            metrics = self.requests[spec.name if spec is not None else "ApiVersions"]
            self._by_api_key[request.header.request_api_key] = metrics
        metrics.record(
            request.start_time,
            request.dequeue_time,
            request.api_local_complete_time,
            request.api_remote_complete_time,
            request.response_dequeue_time,
            done,
        )

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

    def record_share_fetch(self, topic: str, failed: bool) -> None:
        """A partition named by a ShareFetch (Kafka marks each, and the failed ones again)."""
        m = self.topics[topic]
        m.total_share_fetch_requests += 1
        m.failed_share_fetch_requests += failed

    def record_share_ack(self, topic: str, failed: bool) -> None:
        """A partition's acknowledgements (in a ShareFetch or a ShareAcknowledge)."""
        m = self.topics[topic]
        m.total_share_ack_requests += 1
        m.failed_share_ack_requests += failed

    def record_share_fetch_done(self, group: str, requested: int, with_records: int, acquire_ms: float) -> None:
        """A ShareFetch answered with what it acquired: the group's ratio, and (when it
        acquired records) how long that took."""
        m = self.share_groups[group]
        if requested:
            m.fetch_ratio.record(100.0 * with_records / requested)
        if with_records:
            m.acquire_time_ms.record(acquire_ms)

    def record_share_partition_fetch(
        self, key: tuple[str, str, int], started: float, ended: float, batches: list[int]
    ) -> None:
        """A ShareFetch read share partition ``key`` (group, topic, partition) from ``started``
        to ``ended`` (seconds, trio time) and acquired ``batches`` (records in each)."""
        m = self.share_partitions[key]
        held_ms = (ended - started) * 1000
        m.fetch_lock_time_ms.record(held_ms)
        if m.last_lock_at is not None and started > m.last_lock_at:
            m.fetch_lock_ratio.record(100.0 * held_ms / ((ended - m.last_lock_at) * 1000))
        m.last_lock_at = started
        for count in batches:
            m.in_flight_batch_messages.record(count)

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
