"""CLIENT_METRICS config resources (KIP-714): DescribeConfigs and (Incremental)AlterConfigs of
a client-metrics subscription — ``metrics``, ``interval.ms``, ``match`` — kept by the
ClientMetricsManager (``server/client_metrics.py``). As in Kafka, both need the cluster's
DESCRIBE_CONFIGS / ALTER_CONFIGS, a subscription's configs are shown as stored (source
CLIENT_METRICS_CONFIG), an empty name is INVALID_REQUEST, and deleting every key deletes the
subscription.
"""

from __future__ import annotations

from typing import Any

from trikafka.config.client_metrics import CLIENT_METRICS_KEYS, SubscriptionError
from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["CLIENT_METRICS_SOURCE", "LIST_KEYS", "alter_subscription", "subscription_entries", "subscription_overrides"]

CLIENT_METRICS_SOURCE = 7  # ConfigSource CLIENT_METRICS_CONFIG
#: The list-valued keys, which IncrementalAlterConfigs may APPEND to and SUBTRACT from.
LIST_KEYS = frozenset(key for key, (kind, _, _) in CLIENT_METRICS_KEYS.items() if kind == "list")
_TYPES = {"list": 7, "int": 3}


def _name(name: str) -> str:
    if not name:
        raise KafkaProtocolError("Client metrics subscription name must not be empty", ErrorCode.invalid_request)
    return name


def subscription_entries(context: Any, name: str, keys: Any = None) -> list[dict[str, Any]]:
    stored = context.client_metrics.configs.get(_name(name), {})
    source = CLIENT_METRICS_SOURCE
    return [
        {
            "name": key, "value": value, "read_only": False, "config_source": source, "is_sensitive": False,
            "synonyms": [{"name": key, "value": value, "source": source}],
            "config_type": _TYPES[CLIENT_METRICS_KEYS[key][0]] if key in CLIENT_METRICS_KEYS else 0,
            "documentation": CLIENT_METRICS_KEYS.get(key, ("", "", None))[2], "is_default": False,
        }
        for key, value in sorted(stored.items())
        if keys is None or key in keys
    ]


def subscription_overrides(context: Any, name: str) -> dict[str, str]:
    return dict(context.client_metrics.configs.get(_name(name), {}))


def alter_subscription(context: Any, name: str, overrides: dict[str, str | None], validate_only: bool) -> None:
    try:
        context.client_metrics.alter(_name(name), overrides, validate_only)
    except SubscriptionError as exc:
        raise KafkaProtocolError(str(exc), ErrorCode[exc.error]) from None
