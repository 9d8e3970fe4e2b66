"""Connection quotas: max.connections and max.connections.per.ip (with overrides), and
max.connection.creation.rate (KIP-612).

Checked by the Acceptor before a connection reaches a Processor; released when the
connection closes. Over a count quota, the new connection is closed at once and counted.
Over the creation rate the acceptor *waits* (Kafka's ``waitForConnectionSlot``): every new
connection is recorded into a sampled rate (``quota.window.num`` windows of
``quota.window.size.seconds``), and one that brings it over the limit is handed on only after
the throttle time Kafka's formula gives, capped at one window.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import attrs

from trikafka.errors import TooManyConnectionsError
from trikafka.security.quota_rate import SampledRate, throttle_time_ms

__all__ = ["ConnectionQuotas", "ConnectionQuotaStatistics"]


@attrs.frozen
class ConnectionQuotaStatistics:
    total: int
    per_ip: Mapping[str, int]


class ConnectionQuotas:
    def __init__(
        self, max_connections: int, max_per_ip: int, overrides: Mapping[str, int],
        max_creation_rate: int = 2**31 - 1, samples: int = 11, window_seconds: int = 1,
    ) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = dict(overrides)
        self.max_creation_rate = max_creation_rate
        self._creation_rate = SampledRate(samples, window_seconds * 1000)
        self._per_ip: Counter[str] = Counter()
        self._total = 0

    def reconfigure(
        self, max_connections: int, max_per_ip: int, overrides: Mapping[str, int], max_creation_rate: int
    ) -> None:
        """New limits, at run time (dynamic ``max.connections`` and friends): they hold for the
        next connection; connections already open stay."""
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = dict(overrides)
        self.max_creation_rate = max_creation_rate

    def record_connection(self, now_ms: int) -> int:
        """Count a new connection against max.connection.creation.rate; the milliseconds
        the acceptor must wait before handing it on (0: none)."""
        rate = self._creation_rate
        rate.record(1.0, now_ms)
        if self.max_creation_rate >= 2**31 - 1:
            return 0
        observed = rate.measure(now_ms)
        if observed <= self.max_creation_rate:
            return 0
        return min(throttle_time_ms(observed, self.max_creation_rate, rate.window_size(now_ms)), rate.window_ms)

    def limit_for(self, host: str) -> int:
        return self.overrides.get(host, self.max_per_ip)

    def inc(self, host: str) -> None:
        """Count a new connection from ``host``, or raise TooManyConnectionsError."""
        limit = self.limit_for(host)
        if self._per_ip[host] >= limit:
            raise TooManyConnectionsError(host, limit)
        if self._total >= self.max_connections:
            raise TooManyConnectionsError(host, self.max_connections)
        self._per_ip[host] += 1
        self._total += 1

    def dec(self, host: str) -> None:
        self._per_ip[host] -= 1
        if self._per_ip[host] <= 0:
            del self._per_ip[host]
        self._total -= 1

    def get(self, host: str) -> int:
        return self._per_ip[host]

    def statistics(self) -> ConnectionQuotaStatistics:
        return ConnectionQuotaStatistics(self._total, dict(self._per_ip))
