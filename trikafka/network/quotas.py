"""Connection quotas: max.connections and max.connections.per.ip (with overrides).

Checked by the Acceptor before a connection reaches a Processor; released when the
connection closes. Over quota, the new connection is closed at once and counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import attrs

from trikafka.errors import TooManyConnectionsError

__all__ = ["ConnectionQuotas", "ConnectionQuotaStatistics"]


@attrs.frozen
class ConnectionQuotaStatistics:
    total: int
    per_ip: Mapping[str, int]


class ConnectionQuotas:
    def __init__(
        self, max_connections: int, max_per_ip: int, overrides: Mapping[str, int]
    ) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = dict(overrides)
        self._per_ip: Counter[str] = Counter()
        self._total = 0

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
