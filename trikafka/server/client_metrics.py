"""Client telemetry (KIP-714) on the broker: subscriptions, client instances, pushed metrics.

Follows Kafka's ``ClientMetricsManager``:

* **Subscriptions** are CLIENT_METRICS config resources (``client_metrics_configs.py``), set by
  IncrementalAlterConfigs, kept — like the client quotas — in ``<first data dir>/
  trikafka-client-metrics.json`` (rewritten atomically) when the broker has a data directory.
  Every change bumps ``version``: a client instance re-evaluated against older subscriptions
  is re-evaluated at its next request.
* **A client instance** is named by the UUID the broker assigns when a client asks
  GetTelemetrySubscriptions with the zero UUID. Its subscription is every matching
  subscription's metrics together (``*`` alone if one asks for everything), the lowest
  interval among them (5 minutes if none matches), and a subscription id: a CRC32C of those,
  XORed with the instance id's hash — it changes when its subscriptions change.
* **Pushes** are checked in Kafka's order: after a terminating push nothing is accepted
  (INVALID_REQUEST); one sooner than the interval is THROTTLING_QUOTA_EXCEEDED (the first
  push after a GetTelemetrySubscriptions is always on time: clients jitter the first
  interval); a stale subscription id UNKNOWN_SUBSCRIPTION_ID; an unknown codec
  UNSUPPORTED_COMPRESSION_TYPE; a payload over ``telemetry.max.bytes`` TELEMETRY_TOO_LARGE.
  A GetTelemetrySubscriptions sooner than the interval after the last request is throttled
  too, unless the last push failed on its subscription id or codec.
* **The metrics** a push carries are decoded (``trikafka/otlp.py``, imported at the first push
  with metrics) and kept, latest value per metric name and attributes, per instance: what
  ``broker.client_metrics()``, ``/metrics`` and the console show. An instance is dropped when
  the connection it last spoke on closes (Kafka's ConnectionDisconnectListener), and one unheard
  of for max(60 s, 3 × its interval) expires, as in Kafka's cache.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from trikafka.clock import Clock, now_ms
from trikafka.config.client_metrics import (
    ALL_METRICS,
    INTERVAL_MS_DEFAULT,
    TELEMETRY_OFF,
    Subscription,
    SubscriptionError,
    parse_subscription,
)
from trikafka.errors import ConfigError, ErrorCode
from trikafka.protocol.crc import crc32c
from trikafka.security.files import write_json_atomically

__all__ = [
    "ACCEPTED_COMPRESSION_TYPES", "CLIENT_METRICS_FILE", "ClientInstance", "ClientMetricsManager",
    "ClientMetricsSnapshot", "TelemetryRefused",
]

log = logging.getLogger("trikafka.server")

CLIENT_METRICS_FILE = "trikafka-client-metrics.json"
#: Kafka's SUPPORTED_COMPRESSION_TYPES, the broker's preference first: zstd, lz4, gzip, snappy.
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
CACHE_EXPIRY_MS = 60_000
CACHE_MAX_SIZE = 16384
ZERO_UUID = uuid.UUID(int=0)


class TelemetryRefused(Exception):
    """A telemetry request answered with ``error_code`` (and this message, logged)."""

    def __init__(self, message: str, error_code: ErrorCode) -> None:
        super().__init__(message)
        self.error_code = error_code


@attrs.define(eq=False)
class ClientInstance:
    """One client instance: who it is, its subscription, its request times, its metrics."""

    instance_id: uuid.UUID
    #: The match selectors' values (client_id, client_software_name, ...).
    client: dict[str, str]
    subscription_id: int = 0
    subscription_version: int = -1
    metrics: tuple[str, ...] = ()
    interval_ms: int = INTERVAL_MS_DEFAULT
    last_get_ms: float = 0.0
    last_push_ms: float = 0.0
    #: A GetTelemetrySubscriptions was answered since the last accepted push (Kafka compares
    #: the two times; a flag keeps the order when both fall in one millisecond of a MockClock).
    got_since_push: bool = False
    last_heard_ms: float = 0.0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.none
    pushes: int = 0
    #: (metric name, attributes) → (kind, value, time_unix_nano), the latest pushed.
    values: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[str, float, int]] = attrs.Factory(dict)

    @property
    def expiry_ms(self) -> float:
        return max(CACHE_EXPIRY_MS, 3 * self.interval_ms)


@attrs.frozen
class ClientMetricsSnapshot:
    """One client instance as ``broker.client_metrics()`` shows it: who it is, what it is
    subscribed to, how many pushes it made, and the latest value of each metric it pushed
    (``metrics``: by name; ``points``: every (name, attributes, kind, value))."""

    client_instance_id: str
    client_id: str
    client_software_name: str
    client_software_version: str
    client_source_address: str
    subscription_id: int
    requested_metrics: tuple[str, ...]
    push_interval_ms: int
    pushes: int
    terminating: bool
    metrics: dict[str, float]
    points: tuple[tuple[str, tuple[tuple[str, str], ...], str, float], ...]

    @classmethod
    def of(cls, instance: ClientInstance) -> ClientMetricsSnapshot:
        c = instance.client
        points = tuple((name, attributes, kind, value) for (name, attributes), (kind, value, _) in
                       sorted(instance.values.items()))
        return cls(
            str(instance.instance_id), c["client_id"], c["client_software_name"], c["client_software_version"],
            c["client_source_address"], instance.subscription_id, instance.metrics, instance.interval_ms,
            instance.pushes, instance.terminating, {name: value for name, _, _, value in points}, points,
        )


def _subscription_id(metrics: Sequence[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    text = "[" + ", ".join(metrics) + "]" + str(interval_ms)
    # Java's UUID.hashCode: the XOR of its four 32-bit words (as two longs folded).
    bits = instance_id.int
    high, low = bits >> 64, bits & ((1 << 64) - 1)
    folded = high ^ low
    hashed = (folded >> 32) ^ (folded & 0xFFFFFFFF)
    value = (crc32c(text.encode()) ^ hashed) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _elapsed(now: float, then: float) -> int:
    """Whole milliseconds between two epoch-ms readings, as Kafka's Time.milliseconds() counts:
    rounded, so that a push exactly one interval after the last (a MockClock's) is on time
    although the float epoch readings differ by 999.9997 ms."""
    return round(now - then)


class ClientMetricsManager:
    """Subscriptions and client instances of a broker (of a whole in-process cluster)."""

    def __init__(
        self, path: Path | None = None, clock: Clock = now_ms, max_bytes: int = 1_048_576, enabled: bool = True
    ) -> None:
        self.path = path
        #: ``client.telemetry.enable``: off, the telemetry APIs are not advertised and no client pushes.
        self.enabled = enabled
        self.now_ms = clock
        self.max_bytes = max_bytes
        #: name → the subscription's configs as set (what DescribeConfigs shows).
        self.configs: dict[str, dict[str, str]] = {}
        self._subscriptions: dict[str, Subscription] = {}
        self.version = 0
        self.instances: dict[uuid.UUID, ClientInstance] = {}
        #: connection id → (software name, software version), from ApiVersions v3+.
        self._software: dict[str, tuple[str, str]] = {}
        self._by_connection: dict[str, uuid.UUID] = {}  # connection id → the instance that spoke on it
        if path is not None and path.exists():
            self._load(path)

    @classmethod
    def in_data_dir(
        cls, log_dirs: Sequence[str] | None, clock: Clock = now_ms, max_bytes: int = 1_048_576, enabled: bool = True
    ) -> Any:
        return cls(Path(log_dirs[0]) / CLIENT_METRICS_FILE if log_dirs else None, clock, max_bytes, enabled)

    def check_enabled(self, what: str) -> None:
        """Raise, saying how to turn it on, when client telemetry is off."""
        if not self.enabled:
            raise ConfigError("client.telemetry.enable", False, f"{what} reads the metrics clients push, and "
                              f"{TELEMETRY_OFF}")

    def _load(self, path: Path) -> None:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            for name, props in document.items():
                self._subscriptions[name] = parse_subscription(name, props)
                self.configs[name] = {str(k): str(v) for k, v in props.items()}
        except (OSError, ValueError, AttributeError, SubscriptionError) as exc:
            raise ConfigError(str(path), "[file]", f"unreadable client-metrics subscriptions: {exc}") from None

    # -- subscriptions (CLIENT_METRICS config resources) ------------------------------------

    def names(self) -> list[str]:
        return sorted(self.configs)

    def alter(self, name: str, props: Mapping[str, str | None], validate_only: bool = False) -> None:
        """Replace subscription ``name``'s configs; none left removes it. Raises SubscriptionError."""
        cleaned = {k: v for k, v in props.items() if v is not None}
        subscription = parse_subscription(name, cleaned)
        if validate_only:
            return
        if cleaned:
            self.configs[name], self._subscriptions[name] = cleaned, subscription
            log.info("client-metrics subscription %s is now %s", name, cleaned)
        elif self.configs.pop(name, None) is not None:
            self._subscriptions.pop(name, None)
            log.info("client-metrics subscription %s removed", name)
        else:
            return
        self.version += 1
        if self.path is not None:
            write_json_atomically(self.path, self.configs)

    # -- client instances -------------------------------------------------------------------

    def note_software(self, connection_id: str, name: str | None, version: str | None) -> None:
        """ApiVersions v3+ named the client's software on this connection."""
        if len(self._software) >= CACHE_MAX_SIZE:
            self._software.clear()
        self._software[connection_id] = (name or "", version or "")

    def _client(self, request: Any, instance_id: uuid.UUID) -> dict[str, str]:
        name, version = self._software.get(request.connection_id, ("", ""))
        port = request.connection_id.split("-", 1)[-1].split("-")[0].rpartition(":")[2]
        return {
            "client_instance_id": str(instance_id), "client_id": request.client_id or "",
            "client_software_name": name, "client_software_version": version,
            "client_source_address": request.client_host, "client_source_port": port,
        }

    def _evaluate(self, instance: ClientInstance) -> None:
        metrics: set[str] = set()
        interval, everything = INTERVAL_MS_DEFAULT, False
        for subscription in self._subscriptions.values():
            if subscription.matches(instance.client):
                everything = everything or ALL_METRICS in subscription.metrics
                metrics.update(subscription.metrics)
                interval = min(interval, subscription.interval_ms)
        chosen = (ALL_METRICS,) if everything else tuple(sorted(metrics))
        instance.metrics, instance.interval_ms = chosen, interval
        instance.subscription_id = _subscription_id(chosen, interval, instance.instance_id)
        instance.subscription_version = self.version
        instance.last_get_ms = instance.last_push_ms = 0.0  # a new instance, as Kafka makes one
        instance.got_since_push = False

    def _instance(self, instance_id: uuid.UUID, request: Any, now: float) -> ClientInstance:
        self.expire(now)
        instance = self.instances.get(instance_id)
        if instance is None:
            if len(self.instances) >= CACHE_MAX_SIZE:
                self.instances.pop(next(iter(self.instances)))
            instance = self.instances[instance_id] = ClientInstance(instance_id, self._client(request, instance_id))
            self._evaluate(instance)
        elif instance.subscription_version < self.version:
            self._evaluate(instance)
        instance.last_heard_ms = now
        self._by_connection[request.connection_id] = instance_id
        return instance

    def connection_closed(self, connection_id: str) -> None:
        """The client's connection closed: its instance is dropped, as Kafka's
        ClientMetricsManager drops it (a ConnectionDisconnectListener), not left to expire."""
        self._software.pop(connection_id, None)
        instance_id = self._by_connection.pop(connection_id, None)
        if instance_id is not None:
            self.instances.pop(instance_id, None)

    def expire(self, now: float | None = None) -> None:
        now = self.now_ms() if now is None else now
        for instance_id in [i for i, c in self.instances.items() if now - c.last_heard_ms >= c.expiry_ms]:
            del self.instances[instance_id]

    def get_subscriptions(self, request: Any) -> dict[str, Any]:
        """GetTelemetrySubscriptions: the response's fields (raises TelemetryRefused)."""
        now = self.now_ms()
        asked = request.body.client_instance_id
        instance_id = asked if asked not in (None, ZERO_UUID) else self._new_id()
        instance = self._instance(instance_id, request, now)
        last = max(instance.last_get_ms, instance.last_push_ms)
        if _elapsed(now, last) < instance.interval_ms and instance.last_error not in (
            ErrorCode.unknown_subscription_id, ErrorCode.unsupported_compression_type
        ):
            raise TelemetryRefused(
                f"Request from the client [{instance_id}] arrived before the next push interval time",
                ErrorCode.throttling_quota_exceeded,
            )
        instance.last_get_ms, instance.got_since_push = now, True
        instance.last_error = ErrorCode.none
        return {
            "client_instance_id": instance_id, "subscription_id": instance.subscription_id,
            "accepted_compression_types": list(ACCEPTED_COMPRESSION_TYPES), "push_interval": instance.interval_ms,
            "telemetry_max_bytes": self.max_bytes, "delta_temporality": True,
            "requested_metrics": list(instance.metrics),
        }

    def _new_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.uuid4()
            if candidate not in self.instances:
                return candidate

    def push(self, request: Any) -> None:
        """PushTelemetry: checked, decoded and kept (raises TelemetryRefused)."""
        body = request.body
        instance_id = body.client_instance_id
        if instance_id in (None, ZERO_UUID):
            raise TelemetryRefused(
                f"Invalid request from the client [{instance_id}], invalid client instance id",
                ErrorCode.invalid_request,
            )
        now = self.now_ms()
        instance = self._instance(instance_id, request, now)
        try:
            self._check_push(instance, body, now)
            if body.metrics:
                self._keep(instance, body)
        except TelemetryRefused as exc:
            instance.last_error = exc.error_code
            raise
        finally:
            instance.terminating = instance.terminating or body.terminating
        instance.last_error = ErrorCode.none

    def _check_push(self, instance: ClientInstance, body: Any, now: float) -> None:
        who = body.client_instance_id
        if instance.terminating:
            raise TelemetryRefused(
                f"Client [{who}] sent the previous request with state terminating to TRUE, can not accept "
                "any requests after that", ErrorCode.invalid_request,
            )
        on_time = instance.got_since_push or _elapsed(now, instance.last_push_ms) >= instance.interval_ms
        if on_time:
            instance.last_push_ms, instance.got_since_push = now, False
        elif not body.terminating:
            raise TelemetryRefused(
                f"Request from the client [{who}] arrived before the next push interval time",
                ErrorCode.throttling_quota_exceeded,
            )
        if body.subscription_id != instance.subscription_id:
            raise TelemetryRefused(
                f"Unknown client subscription id for the client [{who}]", ErrorCode.unknown_subscription_id
            )
        if body.compression_type not in (0, *ACCEPTED_COMPRESSION_TYPES):
            raise TelemetryRefused(
                f"Unknown compression type [{body.compression_type}] is received in telemetry request from [{who}]",
                ErrorCode.unsupported_compression_type,
            )
        if len(body.metrics) > self.max_bytes:
            raise TelemetryRefused(
                f"Telemetry request from [{who}] is larger than the maximum allowed size [{self.max_bytes}]",
                ErrorCode.telemetry_too_large,
            )

    def _keep(self, instance: ClientInstance, body: Any) -> None:
        from trikafka.otlp import TelemetryDecodeError, TelemetryTooLargeError, decode_metrics

        try:
            points = decode_metrics(bytes(body.metrics), body.compression_type, self.max_bytes)
        except TelemetryTooLargeError as exc:
            raise TelemetryRefused(str(exc), ErrorCode.telemetry_too_large) from None
        except TelemetryDecodeError as exc:
            raise TelemetryRefused(str(exc), ErrorCode.invalid_record) from None
        for point in points:
            instance.values[point.name, point.attributes] = (point.kind, point.value, point.time_unix_nano)
        instance.pushes += 1

    def snapshot(self) -> list[ClientMetricsSnapshot]:
        """Every live client instance, oldest first."""
        self.expire()
        return [ClientMetricsSnapshot.of(instance) for instance in self.instances.values()]
