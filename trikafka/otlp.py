"""A PushTelemetry payload (KIP-714) decoded: OpenTelemetry's ``MetricsData`` protobuf,
compressed with one of Kafka's record codecs or not, into flat :class:`MetricPoint` values —
and, for the Trio client, :func:`encode_metrics` the other way.

Pure (bytes in, values out), and imported only when a push with metrics arrives: it loads
``opentelemetry-proto`` and protobuf, which a broker whose clients never push never needs.
A payload that is not what its compression type says, or not ``MetricsData``, raises
:class:`TelemetryDecodeError` (answered INVALID_RECORD, as Kafka answers a payload its
exporter cannot take). The decompressed size is bounded too: a small payload that expands
past the limit raises :class:`TelemetryTooLargeError`.

Sums and gauges give one point each; a histogram gives its sum, count, min and max as points
under the histogram's own name (the part in ``kind``: ``histogram.sum``...), so a metric is
always found by the name the client gave it.
"""

from __future__ import annotations

from typing import Any

import attrs
from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1 import metrics_pb2

from trikafka.protocol.compression import compress, decompress

__all__ = ["MetricPoint", "TelemetryDecodeError", "TelemetryTooLargeError", "decode_metrics", "encode_metrics"]

#: OTLP's AGGREGATION_TEMPORALITY_DELTA: what Kafka's brokers ask for (delta_temporality).
DELTA = 1


class TelemetryDecodeError(ValueError):
    """The payload is not (compressed) OTLP ``MetricsData``."""


class TelemetryTooLargeError(ValueError):
    """The payload decompresses to more than the broker accepts."""


@attrs.frozen
class MetricPoint:
    """One data point: the metric's name, its kind (``sum``, ``gauge``, ``histogram.sum``...),
    its value, its attributes and the time it was taken (ns since the epoch)."""

    name: str
    kind: str
    value: float
    attributes: tuple[tuple[str, str], ...] = ()
    time_unix_nano: int = 0
    resource: tuple[tuple[str, str], ...] = ()


def _any_value(value: Any) -> str:
    which = value.WhichOneof("value")
    return "" if which is None else str(getattr(value, which))


def _attributes(pairs: Any) -> tuple[tuple[str, str], ...]:
    return tuple((kv.key, _any_value(kv.value)) for kv in pairs)


def _number(point: Any) -> float:
    return float(point.as_double if point.WhichOneof("value") == "as_double" else point.as_int)


def _points(metric: Any, resource: tuple[tuple[str, str], ...]) -> list[MetricPoint]:
    kind = metric.WhichOneof("data")
    out: list[MetricPoint] = []
    if kind in ("sum", "gauge"):
        for p in getattr(metric, kind).data_points:
            attributes = _attributes(p.attributes)
            out.append(MetricPoint(metric.name, kind, _number(p), attributes, p.time_unix_nano, resource))
    elif kind in ("histogram", "exponential_histogram"):
        for p in getattr(metric, kind).data_points:
            attributes = _attributes(p.attributes)
            parts = [("sum", p.sum), ("count", p.count)]
            parts += [(part, getattr(p, part)) for part in ("min", "max") if p.HasField(part)]
            out.extend(MetricPoint(metric.name, f"{kind}.{part}", float(value), attributes, p.time_unix_nano, resource)
                       for part, value in parts)
    return out


def decode_metrics(payload: bytes, compression_type: int, max_bytes: int) -> list[MetricPoint]:
    """The data points of one push; ``compression_type`` is Kafka's codec id (0: none)."""
    data = payload
    if compression_type:
        try:
            data = decompress(compression_type, payload)
        except Exception as exc:  # every codec's own error type: the payload is at fault
            raise TelemetryDecodeError(f"cannot decompress the metrics (codec {compression_type}): {exc}") from None
        if len(data) > max_bytes:
            raise TelemetryTooLargeError(
                f"the metrics decompress to {len(data)} bytes, more than telemetry.max.bytes ({max_bytes})"
            )
    message = metrics_pb2.MetricsData()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise TelemetryDecodeError(f"the metrics are not OTLP MetricsData: {exc}") from None
    points: list[MetricPoint] = []
    for resource_metrics in message.resource_metrics:
        resource = _attributes(resource_metrics.resource.attributes)
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                points.extend(_points(metric, resource))
    return points


def encode_metrics(
    points: list[MetricPoint], compression_type: int = 0, *, scope: str = "trikafka", start_unix_nano: int = 0
) -> bytes:
    """``points`` as OTLP ``MetricsData`` (a ``sum`` as a monotonic delta sum since
    ``start_unix_nano``, anything else a gauge), compressed with Kafka codec ``compression_type``."""
    data = metrics_pb2.MetricsData()
    scope_metrics = data.resource_metrics.add().scope_metrics.add()
    scope_metrics.scope.name = scope
    for point in points:
        metric = scope_metrics.metrics.add(name=point.name)
        if point.kind == "sum":
            metric.sum.aggregation_temporality = DELTA
            metric.sum.is_monotonic = True
            data_point = metric.sum.data_points.add(start_time_unix_nano=start_unix_nano)
        else:
            data_point = metric.gauge.data_points.add()
        data_point.as_double = point.value
        data_point.time_unix_nano = point.time_unix_nano
        for key, value in point.attributes:
            attribute = data_point.attributes.add(key=key)
            attribute.value.string_value = value
    return compress(compression_type, data.SerializeToString())
