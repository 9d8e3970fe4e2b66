"""Client-metrics subscriptions (KIP-714): the CLIENT_METRICS config resource's keys, their
validation with Kafka's errors.

A subscription is a named config resource (type 16) holding three keys, as Kafka's
``ClientMetricsConfigs``: ``metrics`` (a list of metric-name prefixes; ``*`` for every metric),
``interval.ms`` (how often a matching client pushes, 100 ms to 1 hour, default 5 minutes) and
``match`` (``selector=regex`` pairs over the client's instance id, client id, software name and
version, source address and port; none: every client). The regexes match the whole value,
as Java's ``Pattern.matches``. Errors carry the Kafka error Kafka answers with: an unknown
key or an interval out of range INVALID_REQUEST, a bad match pattern INVALID_CONFIG.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from trikafka.config.resources import ConfigResourceType

__all__ = [
    "TELEMETRY_OFF",
    "ALL_METRICS",
    "CLIENT_METRICS_KEYS",
    "CLIENT_METRICS_RESOURCE",
    "INTERVAL_MS_DEFAULT",
    "MATCH_SELECTORS",
    "Subscription",
    "SubscriptionError",
    "parse_subscription",
]

#: What to say where client telemetry is asked for and the broker has it off.
TELEMETRY_OFF = (
    "client telemetry is off on this broker (client.telemetry.enable=false, the default): it does not "
    "advertise GetTelemetrySubscriptions and PushTelemetry, so no client pushes metrics. Turn it on with "
    "client.telemetry.enable=true: `python -m trikafka --client-telemetry`, open_broker(client_telemetry=True) "
    "or open_cluster(client_telemetry=True), @pytest.mark.trikafka(client_telemetry=True)"
)

CLIENT_METRICS_RESOURCE = ConfigResourceType.CLIENT_METRICS
ALL_METRICS = "*"
INTERVAL_MS_DEFAULT = 5 * 60 * 1000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
#: What a ``match`` entry may select on (Kafka's ALLOWED_MATCH_PARAMS).
MATCH_SELECTORS = (
    "client_instance_id", "client_id", "client_software_name", "client_software_version",
    "client_source_address", "client_source_port",
)  # fmt: skip
#: key → (kind, default as DescribeConfigs shows it, documentation).
CLIENT_METRICS_KEYS = {
    "metrics": ("list", "", "Telemetry metric name prefix list ('*' for every metric)."),
    "interval.ms": ("int", str(INTERVAL_MS_DEFAULT), "Metrics push interval in milliseconds (100 to 3600000)."),
    "match": ("list", "", "Client match criteria: selector=regex pairs, comma-separated."),
}


class SubscriptionError(Exception):
    """A subscription the client got wrong: ``error`` is the Kafka error name to answer with."""

    def __init__(self, message: str, error: str = "invalid_request") -> None:
        super().__init__(message)
        self.error = error


@attrs.frozen
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, client: Mapping[str, str]) -> bool:
        """Every selector's regex matches the client's whole value (a missing one: no match)."""
        return all(
            (value := client.get(selector)) is not None and pattern.fullmatch(value) is not None
            for selector, pattern in self.match
        )


def _split(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _match_patterns(entries: list[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    found: dict[str, re.Pattern[str]] = {}
    for entry in entries:
        parts = entry.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            raise SubscriptionError(
                f"Illegal client matching pattern: {entry} (allowed: selector=regex with a selector of "
                f"{', '.join(MATCH_SELECTORS)})", "invalid_config",
            )
        try:
            found[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error as exc:
            raise SubscriptionError(
                f"Illegal client matching pattern: {entry} ({exc})", "invalid_config"
            ) from None
    return tuple(sorted(found.items()))


def parse_subscription(name: str, props: Mapping[str, str | None]) -> Subscription:
    """Validate one subscription's configs as Kafka's ``ClientMetricsConfigs.validate`` does."""
    if not name:
        raise SubscriptionError("Subscription name can't be empty")
    for key in props:
        if key not in CLIENT_METRICS_KEYS:
            raise SubscriptionError(
                f"Unknown client metrics configuration: {key} (allowed: {', '.join(CLIENT_METRICS_KEYS)})"
            )
    interval_text = props.get("interval.ms")
    interval = INTERVAL_MS_DEFAULT
    if interval_text is not None:
        try:
            interval = int(interval_text.strip())
        except ValueError:
            raise SubscriptionError(
                f"Invalid value {interval_text} for configuration interval.ms: Not a number of type INT",
                "invalid_config",
            ) from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise SubscriptionError(
                f"Invalid value {interval} for interval.ms, interval must be between 100 and 3600000 (1 hour)"
            )
    return Subscription(
        name=name,
        metrics=tuple(_split(props.get("metrics"))),
        interval_ms=interval,
        match=_match_patterns(_split(props.get("match"))),
    )

