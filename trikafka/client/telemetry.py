"""Client telemetry (KIP-714) in the Trio producer and consumer: ``enable.metrics.push``.

Theory of operation. One task per producer or consumer, in its nursery, as Java's
``ClientTelemetryReporter`` and librdkafka's telemetry state machine:

1. **Subscribe.** GetTelemetrySubscriptions to the least-loaded broker, with the zero UUID the
   first time (the broker assigns the client instance id). A broker without the API ends the
   task quietly (nothing to push to); an answer with no requested metrics is asked again after
   its push interval, since an operator may add a subscription later.
2. **Push.** The first push waits a jittered 0.5–1.5 × the push interval (so a fleet started
   together does not push together), the next ones exactly one interval apart, all on trio's
   clock — a ``MockClock`` drives the cadence. Each push carries the metrics whose names start
   with a requested prefix (``*`` or an empty string: all), OTLP-encoded (``trikafka/otlp.py``,
   imported at the first push) and compressed with the first codec the broker accepts.
3. **React** as Java does: UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE → subscribe
   again now; THROTTLING_QUOTA_EXCEEDED or TELEMETRY_TOO_LARGE → try at the next interval; any
   other error (INVALID_REQUEST, INVALID_RECORD...) → telemetry stops for this client, logged.
4. **Close.** ``close()`` cancels the task and sends one terminating push (bounded by
   ``request.timeout.ms``) with the last values, which the broker accepts whatever the interval.

What is measured (Java's names, under ``org.apache.kafka.producer.`` or ``.consumer.``):
``connection.creation.rate/total``, ``node.request.latency.avg/max`` (tag ``node.id``) for both;
the producer's ``record.queue.time.avg/max`` and ``produce.throttle.time.avg/max``; the
consumer's ``fetch.manager.fetch.latency.avg/max``, ``coordinator.commit.latency.avg/max``,
``coordinator.assigned.partitions``, ``poll.idle.ratio.avg`` (and ``.max``) and
``fetch.manager.records.consumed.rate/total`` (the last two of ``getmany``: the record
iterator, which polls one record at a time, is not counted). Nothing is measured while no
subscription asks for metrics (the client's request path then pays one ``is None`` test). An
avg/max is over the last push interval and is left out of a push when nothing was measured in
it; a ``.total`` is the delta since the last push (the broker asks for delta temporality); a
``.rate`` is per second over the interval. KIP-714's other required consumer metrics
(``coordinator.rebalance.*``, ``fetch.manager.bytes.consumed.*``) are not measured.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable
from typing import Any

import trio

from trikafka.client.errors import KafkaError, UnsupportedVersionError
from trikafka.clock import now_ms
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["ClientTelemetry", "start_telemetry"]

log = logging.getLogger("trikafka.client")

ZERO_UUID = uuid.UUID(int=0)
#: What the client compresses with (every Kafka codec, through cramjam), by codec id.
SUPPORTED_CODECS = (4, 3, 1, 2)
_RESUBSCRIBE = (ErrorCode.unknown_subscription_id, ErrorCode.unsupported_compression_type)
_NEXT_INTERVAL = (ErrorCode.throttling_quota_exceeded, ErrorCode.telemetry_too_large)
#: Request latencies that are also their API's own metric, by api key.
_API_LATENCY: dict[int, str] = {
    ApiKey.FETCH: "fetch.manager.fetch.latency",
    ApiKey.OFFSET_COMMIT: "coordinator.commit.latency",
}


class _Window:
    """Values since the last push: their sum, count and max."""

    __slots__ = ("count", "max", "total")

    def __init__(self) -> None:
        self.total, self.count, self.max = 0.0, 0, 0.0

    def add(self, value: float) -> None:
        self.total += value
        self.max = value if self.count == 0 else max(self.max, value)
        self.count += 1


class ClientTelemetry:
    """The sensors a producer or consumer records into, and the push task (module docstring)."""

    def __init__(self, client: Any, role: str, *, rng: random.Random | None = None) -> None:
        self.client = client
        self.prefix = f"org.apache.kafka.{role}."
        self.rng = rng or random.Random()
        self._windows: dict[tuple[str, tuple[tuple[str, str], ...]], _Window] = {}
        self._counts: dict[str, int] = {}
        self._connections_before = 0  # client.connections_created at the last push
        self._gauges: dict[str, Callable[[], float]] = {}
        self.instance_id: uuid.UUID = ZERO_UUID
        self._subscription: Any = None
        self._last_push_ms = 0.0
        self._window_start = trio.current_time()
        self.stopped = False  # an error that ends telemetry for this client
        self.pushes = 0
        self._scope: trio.CancelScope | None = None

    # --- sensors ---------------------------------------------------------------------------

    def record(self, name: str, value: float, **tags: str) -> None:
        """A value of an avg/max metric (``name.avg``, ``name.max``)."""
        key = (name, tuple(sorted(tags.items())))
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = _Window()
        window.add(value)

    def count(self, name: str, n: int = 1) -> None:
        """Occurrences of a total/rate metric (``name.total``, ``name.rate``)."""
        self._counts[name] = self._counts.get(name, 0) + n

    def gauge(self, name: str, read: Callable[[], float]) -> None:
        self._gauges[name] = read

    def request_done(self, node_id: int, api_key: int, seconds: float, answer: Any) -> None:
        """Called by the client after each answered request."""
        millis = seconds * 1000
        self.record("node.request.latency", millis, **{"node.id": str(node_id)})
        own = _API_LATENCY.get(api_key)
        if own is not None:
            self.record(own, millis)
        if api_key == ApiKey.PRODUCE:
            self.record("produce.throttle.time", _millis(getattr(answer, "throttle_time", 0)))

    # --- pushing ---------------------------------------------------------------------------

    def _points(self, requested: tuple[str, ...]) -> list[Any]:
        from trikafka.otlp import MetricPoint

        now_nanos = int(now_ms() * 1_000_000)
        elapsed = max(trio.current_time() - self._window_start, 1e-9)
        points = []
        for (name, tags), window in sorted(self._windows.items()):
            if window.count:
                points.append(MetricPoint(f"{self.prefix}{name}.avg", "gauge", window.total / window.count, tags,
                                          now_nanos))
                points.append(MetricPoint(f"{self.prefix}{name}.max", "gauge", window.max, tags, now_nanos))
        counts = {**self._counts, "connection.creation": self.client.connections_created - self._connections_before}
        for name, n in sorted(counts.items()):
            points.append(MetricPoint(f"{self.prefix}{name}.total", "sum", float(n), (), now_nanos))
            points.append(MetricPoint(f"{self.prefix}{name}.rate", "gauge", n / elapsed, (), now_nanos))
        for name, read in sorted(self._gauges.items()):
            points.append(MetricPoint(f"{self.prefix}{name}", "gauge", float(read()), (), now_nanos))
        everything = any(prefix in ("*", "") for prefix in requested)
        return [p for p in points if everything or any(p.name.startswith(prefix) for prefix in requested)]

    def _reset(self) -> None:
        self._windows.clear()
        self._counts = dict.fromkeys(self._counts, 0)
        self._connections_before = self.client.connections_created
        self._window_start = trio.current_time()

    async def _subscribe(self) -> Any:
        answer = await self.client.send(
            self.client.least_loaded_node(), ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, client_instance_id=self.instance_id
        )
        if answer.error_code == ErrorCode.none:
            if answer.client_instance_id not in (None, ZERO_UUID):
                self.instance_id = answer.client_instance_id
            self._subscription = answer
            self._measure(bool(answer.requested_metrics))
        return answer

    def _measure(self, on: bool) -> None:
        """Measure only while subscribed to some metrics: without a subscription (the usual
        case) the client's request path pays one ``is None`` test, nothing more."""
        if on and self.client.telemetry is not self:  # values from an earlier subscription are stale
            self._windows.clear()
            self._window_start = trio.current_time()
        self.client.telemetry = self if on else None

    async def _push(self, terminating: bool) -> ErrorCode:
        from trikafka.otlp import encode_metrics

        sub = self._subscription
        codec = next((c for c in sub.accepted_compression_types if c in SUPPORTED_CODECS), 0)
        start = int(self._last_push_ms * 1_000_000)
        payload = encode_metrics(self._points(tuple(sub.requested_metrics)), codec, start_unix_nano=start)
        answer = await self.client.send(
            self.client.least_loaded_node(), ApiKey.PUSH_TELEMETRY, client_instance_id=self.instance_id,
            subscription_id=sub.subscription_id, terminating=terminating, compression_type=codec, metrics=payload,
        )
        code = ErrorCode(answer.error_code)
        if code == ErrorCode.none:
            self.pushes += 1
            self._last_push_ms = now_ms()
            self._reset()
        return code

    async def run(self) -> None:
        """The push task: subscribe, push every interval, react to errors (module docstring)."""
        with trio.CancelScope() as self._scope:
            try:
                await self._run()
            except UnsupportedVersionError:
                log.debug("the broker offers no client telemetry (KIP-714): nothing to push")
                self.stopped = True

    async def _run(self) -> None:
        backoff = self.client.config["retry.backoff.ms"] / 1000
        while True:
            try:
                sub = await self._subscribe()
            except UnsupportedVersionError:
                raise
            except KafkaError as exc:
                log.debug("GetTelemetrySubscriptions failed (%s); retrying", exc)
                await trio.sleep(backoff)
                continue
            interval = _millis(sub.push_interval) / 1000
            if sub.error_code != ErrorCode.none:
                if ErrorCode(sub.error_code) in _NEXT_INTERVAL:
                    await trio.sleep(max(interval, backoff))
                    continue
                self._stop(f"GetTelemetrySubscriptions answered {ErrorCode(sub.error_code).name}")
                return
            if not sub.requested_metrics:
                await trio.sleep(interval)  # nothing subscribed: ask again at the interval
                continue
            delay = interval * self.rng.uniform(0.5, 1.5)
            while True:
                await trio.sleep(delay)
                delay = interval
                try:
                    code = await self._push(terminating=False)
                except KafkaError as exc:
                    log.debug("PushTelemetry failed (%s); pushing at the next interval", exc)
                    continue
                if code in _RESUBSCRIBE:
                    break
                if code not in (ErrorCode.none, *_NEXT_INTERVAL):
                    self._stop(f"PushTelemetry answered {code.name}")
                    return

    def _stop(self, why: str) -> None:
        log.warning("client telemetry stopped: %s", why)
        self.stopped = True
        self._measure(False)

    async def close(self) -> None:
        """Stop the task; one terminating push when subscribed to metrics (best effort)."""
        if self._scope is not None:
            self._scope.cancel()
        sub = self._subscription
        if self.stopped or sub is None or not sub.requested_metrics or self.client.closed:
            return
        with trio.move_on_after(self.client.request_timeout):
            try:
                code = await self._push(terminating=True)
                if code != ErrorCode.none:
                    log.debug("the terminating PushTelemetry answered %s", code.name)
            except KafkaError as exc:
                log.debug("the terminating PushTelemetry failed: %s", exc)


def start_telemetry(client: Any, config: Any, nursery: trio.Nursery) -> ClientTelemetry | None:
    """With ``enable.metrics.push`` (the default): the client's telemetry, its task started."""
    if not config["enable.metrics.push"]:
        return None
    telemetry = ClientTelemetry(client, config.role)
    nursery.start_soon(telemetry.run, name=f"{config.role}-telemetry")
    return telemetry


def _millis(value: Any) -> float:
    """A kio duration (timedelta) or a number of ms, as ms."""
    seconds = getattr(value, "total_seconds", None)
    return float(seconds() * 1000 if seconds is not None else (value or 0))
