"""Client quotas (KIP-13, KIP-55, KIP-124): Kafka's ClientQuotaManager, sans I/O.

Theory of operation. Three managers — produce (``producer_byte_rate``, bytes of Produce
requests), fetch (``consumer_byte_rate``, bytes of Fetch responses) and request
(``request_percentage``, handler time as a percentage of one thread) — each record what a
client used into a :class:`~trikafka.security.quota_rate.SampledRate` and, when the rate is
over the client's quota, answer the throttle time Kafka's formula gives.

Whose rate: a quota is set for an *entity* — a user, a client id, or both, each possibly the
``<default>`` one (a name of None). The most specific entity matching the connection wins,
in Kafka's order::

  /config/users/<user>/clients/<client-id>     /config/users/<default>/clients/<client-id>
  /config/users/<user>/clients/<default>       /config/users/<default>/clients/<default>
  /config/users/<user>                         /config/users/<default>
                                               /config/clients/<client-id>
                                               /config/clients/<default>

and the rate is shared by everyone the winning entity covers: a user-level quota is one
rate for all of that user's client ids (Kafka's metric tags ``user``, ``client-id``, with
the side the quota does not name left empty).

Nothing is recorded until some quota of that kind has been set (Kafka's ``quotasEnabled``,
which stays on until a restart even if every quota is removed). Time is integer
milliseconds from the caller — trio's clock in the broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from trikafka.security.quota_rate import SampledRate, throttle_time_ms

__all__ = [
    "CLIENT_ID",
    "CONSUMER_BYTE_RATE",
    "PRODUCER_BYTE_RATE",
    "REQUEST_PERCENTAGE",
    "USER",
    "ClientQuotaManager",
    "ClientQuotaManagers",
    "QuotaEntity",
    "QuotaManagerStatistics",
    "user_of",
]

USER = "user"
CLIENT_ID = "client-id"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"

#: A quota entity: (entity type, name) pairs sorted by type; a name of None is ``<default>``.
QuotaEntity = tuple[tuple[str, str | None], ...]

#: Kafka's QuotaTypes bits: which levels have ever had a quota (picks the metric tags).
_CLIENT_ID_QUOTAS, _USER_QUOTAS, _USER_CLIENT_ID_QUOTAS = 1, 2, 4
#: Kafka's InactiveSensorExpirationTimeSeconds: a client's rate is forgotten after an idle hour.
_SENSOR_EXPIRY_MS = 3_600_000
_SWEEP_EVERY_MS = 30_000
_UNLIMITED = float(2**63 - 1)  # Long.MaxValue: no quota


def user_of(principal: str) -> str:
    """The user name quotas know a principal by (``User:alice`` → ``alice``)."""
    return principal.partition(":")[2] if ":" in principal else principal


@attrs.frozen
class QuotaManagerStatistics:
    quota_key: str
    enabled: bool
    clients: int  # rates kept (one per metric-tag pair)
    throttled: int  # answers that carried a throttle time


class ClientQuotaManager:
    """One kind of quota (``quota_key``) for every client: rates, limits, throttle times."""

    def __init__(
        self, quota_key: str, samples: int = 11, window_seconds: int = 1, *, max_throttle_ms: int | None = None
    ) -> None:
        self.quota_key = quota_key
        self.samples = samples
        self.window_ms = window_seconds * 1000
        #: The request quota caps a throttle at one window (ClientRequestQuotaManager).
        self.max_throttle_ms = max_throttle_ms
        self._overrides: dict[QuotaEntity, float] = {}
        self._types = 0
        self._rates: dict[tuple[str, str], tuple[SampledRate, list[int]]] = {}
        self._next_sweep = 0
        self.throttled = 0

    @property
    def enabled(self) -> bool:
        return self._types != 0

    def update_quota(self, entity: QuotaEntity, bound: float | None) -> None:
        """Set (or with None remove) the quota of ``entity``; enables this kind for good."""
        types = dict(entity)
        if USER in types:
            self._types |= _USER_CLIENT_ID_QUOTAS if CLIENT_ID in types else _USER_QUOTAS
        elif CLIENT_ID in types:
            self._types |= _CLIENT_ID_QUOTAS
        if bound is None:
            self._overrides.pop(entity, None)
        else:
            self._overrides[entity] = bound

    def replace_quotas(self, quotas: Mapping[QuotaEntity, float]) -> None:
        """Make ``quotas`` the whole set (after a store change); removed ones are dropped."""
        for entity in list(self._overrides):
            if entity not in quotas:
                self.update_quota(entity, None)
        for entity, bound in quotas.items():
            self.update_quota(entity, bound)

    # -- recording ------------------------------------------------------------------------

    def record_and_get_throttle_time_ms(self, user: str, client_id: str | None, value: float, now_ms: int) -> int:
        """Record ``value`` for this client at ``now_ms``; the throttle time if now over quota."""
        if not self._types:
            return 0
        tags = self.metric_tags(user, client_id or "")
        rate = self._rate(tags, now_ms)
        rate.record(value, now_ms)
        bound = self.quota_limit(tags)
        if bound >= _UNLIMITED:
            return 0
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        throttle = throttle_time_ms(observed, bound, rate.window_size(now_ms))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        if throttle > 0:
            self.throttled += 1
        return throttle

    def record_no_throttle(self, user: str, client_id: str | None, value: float, now_ms: int) -> None:
        """Record without checking the quota (Kafka's ``recordNoThrottle``, and — with a
        negative value — ``unrecordQuotaSensor`` for a throttled fetch answered empty)."""
        if self._types:
            self._rate(self.metric_tags(user, client_id or ""), now_ms).record(value, now_ms)

    def max_value_in_quota_window(self, user: str, client_id: str | None) -> float:
        """The most one request may use without being throttled for sure (Fetch bounds its
        response by it): the quota times the span of ``samples - 1`` windows."""
        if not self._types:
            return _UNLIMITED
        bound = self.quota_limit(self.metric_tags(user, client_id or ""))
        if bound >= _UNLIMITED:
            return _UNLIMITED
        return bound * (self.samples - 1) * self.window_ms / 1000

    def quota(self, user: str, client_id: str | None) -> float | None:
        """The quota this client is held to, or None (for tests and DescribeClientQuotas)."""
        bound = self.quota_limit(self.metric_tags(user, client_id or ""))
        return None if bound >= _UNLIMITED else bound

    # -- Kafka's DefaultQuotaCallback -----------------------------------------------------

    def metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """Whose rate this client's usage goes into: (user tag, client-id tag)."""
        types = self._types
        if types in (0, _CLIENT_ID_QUOTAS):
            return ("", client_id)
        if types == _USER_QUOTAS:
            return (user, "")
        if types == _USER_CLIENT_ID_QUOTAS:
            return (user, client_id)
        has = self._overrides.__contains__
        if has(((CLIENT_ID, client_id), (USER, user))) or has(((CLIENT_ID, None), (USER, user))):
            return (user, client_id)
        if has(((USER, user),)):
            return (user, "")
        if has(((CLIENT_ID, client_id), (USER, None))) or has(((CLIENT_ID, None), (USER, None))):
            return (user, client_id)
        if has(((USER, None),)):
            return (user, "")
        return ("", client_id)

    def quota_limit(self, tags: tuple[str, str]) -> float:
        """The quota for a metric-tag pair, most specific entity first; unlimited if none."""
        user, client_id = tags
        get = self._overrides.get
        if user and client_id:
            candidates: Iterable[QuotaEntity] = (
                ((CLIENT_ID, client_id), (USER, user)),
                ((CLIENT_ID, None), (USER, user)),
                ((CLIENT_ID, client_id), (USER, None)),
                ((CLIENT_ID, None), (USER, None)),
            )
        elif user:
            candidates = (((USER, user),), ((USER, None),))
        elif client_id:
            candidates = (((CLIENT_ID, client_id),), ((CLIENT_ID, None),))
        else:
            candidates = ()
        for entity in candidates:
            bound = get(entity)
            if bound is not None:
                return bound
        return _UNLIMITED

    def _rate(self, tags: tuple[str, str], now_ms: int) -> SampledRate:
        if now_ms >= self._next_sweep:
            self._next_sweep = now_ms + _SWEEP_EVERY_MS
            for key in [k for k, (_, seen) in self._rates.items() if now_ms - seen[0] >= _SENSOR_EXPIRY_MS]:
                del self._rates[key]
        entry = self._rates.get(tags)
        if entry is None:
            entry = self._rates[tags] = (SampledRate(self.samples, self.window_ms), [now_ms])
        else:
            entry[1][0] = now_ms
        return entry[0]

    def statistics(self) -> QuotaManagerStatistics:
        return QuotaManagerStatistics(self.quota_key, self.enabled, len(self._rates), self.throttled)


class ClientQuotaManagers:
    """One broker's three managers (produce, fetch, request): its rates and throttle times.

    Why apart from the quotas themselves: Kafka's quota *settings* are cluster-wide (one
    AlterClientQuotas reaches every broker), but each broker measures the traffic *it*
    serves — a client at its quota may send that much to every broker. So the store of
    settings (:class:`~trikafka.security.quota_store.ClientQuotas`) is shared, and each
    broker of a cluster has its own managers, given the settings at each change."""

    def __init__(self, samples: int = 11, window_seconds: int = 1) -> None:
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_seconds)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_seconds)
        #: The request quota caps a throttle at one window (ClientRequestQuotaManager).
        self.request = ClientQuotaManager(
            REQUEST_PERCENTAGE, samples, window_seconds, max_throttle_ms=window_seconds * 1000
        )

    @property
    def enabled(self) -> bool:
        """Some quota was ever set (Kafka's quotasEnabled): until then no answer pays for quotas."""
        return self.produce.enabled or self.fetch.enabled or self.request.enabled

    def replace_quotas(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Make ``quotas`` (entity → {quota key: value}) the whole set of every manager."""
        for manager in (self.produce, self.fetch, self.request):
            manager.replace_quotas({
                entity: values[manager.quota_key] for entity, values in quotas.items() if manager.quota_key in values
            })
