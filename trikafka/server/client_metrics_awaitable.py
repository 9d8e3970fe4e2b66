"""Awaitable client telemetry for tests: what clients pushed (KIP-714), and a wait for a metric.

Level-triggered like the rest of ``awaitable.py``: the wait checks at once and again at every
``StateChanges`` bump, and every PushTelemetry is followed by its response, which bumps it.
"""

from __future__ import annotations

from typing import Any

from trikafka.server.client_metrics import ClientMetricsSnapshot

__all__ = ["ClientMetricsAwaitableState", "find_client_metric"]


def _named(snapshot: ClientMetricsSnapshot, name: str) -> list[float]:
    """The values of metric ``name``, or of every metric under the prefix ``name``."""
    return [value for metric, _, _, value in snapshot.points if metric == name or metric.startswith(name)]


def find_client_metric(
    snapshots: list[ClientMetricsSnapshot], name: str, client_id: str | None, at_least: float | None
) -> ClientMetricsSnapshot | None:
    for snapshot in snapshots:
        if client_id is not None and snapshot.client_id != client_id:
            continue
        values = _named(snapshot, name)
        if values and (at_least is None or max(values) >= at_least):
            return snapshot
    return None


class ClientMetricsAwaitableState:
    """``client_metrics()`` and ``wait_for_client_metric`` of a broker or a cluster (``core``)."""

    core: Any
    state_changes: Any

    def client_metrics(self) -> list[ClientMetricsSnapshot]:
        """Every client instance the broker knows (KIP-714): who it is, its subscription and
        the latest value of each metric it pushed (``.metrics``: name → value). Raises
        ``ConfigError`` naming ``client.telemetry.enable`` when the broker has telemetry off."""
        self.core.client_metrics.check_enabled("client_metrics()")
        snapshots: list[ClientMetricsSnapshot] = self.core.client_metrics.snapshot()
        return snapshots

    async def wait_for_client_metric(
        self, name: str, *, client_id: str | None = None, at_least: float | None = None
    ) -> ClientMetricsSnapshot:
        """Wait until a client (``client_id``'s, if given) pushed metric ``name`` — a full name,
        or a prefix such as ``org.apache.kafka.producer.`` — with a value ≥ ``at_least`` (any
        value if None); returns that client instance's snapshot. Raises ``ConfigError`` naming
        ``client.telemetry.enable`` at once when the broker has telemetry off."""
        self.core.client_metrics.check_enabled("wait_for_client_metric")
        found: list[ClientMetricsSnapshot] = []

        def ready() -> bool:
            hit = find_client_metric(self.client_metrics(), name, client_id, at_least)
            if hit is not None:
                found.append(hit)
            return hit is not None

        await self.state_changes.wait_until(ready)
        return found[-1]
