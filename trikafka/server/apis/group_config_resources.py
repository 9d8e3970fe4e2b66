"""GROUP config resources (KIP-848/KIP-932): DescribeConfigs and (Incremental)AlterConfigs of a
group's configs. The keys, their defaults from the broker's ``group.share.*`` keys and their
bounds are in ``trikafka/config/share.py``; the overrides of every kind of group (consumer
and share keys alike) live with the share coordinator (and in ``__share_group_state`` with a
data directory). A set key is ``GROUP_CONFIG`` (8) with its broker synonym after it; an unset
one shows the broker's value with that key's source (DEFAULT_CONFIG, or STATIC/DYNAMIC_BROKER_CONFIG
when the broker key was set), as Kafka's DescribeConfigs does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trikafka.config.resources import ConfigResourceType
from trikafka.config.share import GROUP_CONFIG_KEYS, effective_group_configs
from trikafka.errors import ConfigError, ErrorCode, KafkaProtocolError

__all__ = ["GROUP_RESOURCE", "GROUP_SOURCE", "alter_group_configs", "group_config_entries", "group_overrides"]

GROUP_RESOURCE = ConfigResourceType.GROUP
GROUP_SOURCE = 8  # ConfigSource GROUP_CONFIG
DEFAULT_SOURCE = 5
_TYPES = {"boolean": 1, "string": 2, "int": 3}


def _shares(context: Any) -> Any:
    if context.shares is None:
        raise KafkaProtocolError("group configs are not served", ErrorCode.invalid_request)
    return context.shares


def group_config_entries(
    context: Any, group_id: str, keys: Any = None, broker_source: Callable[[str], int] = lambda key: DEFAULT_SOURCE
) -> list[dict[str, Any]]:
    """``broker_source(key)``: the ConfigSource of a broker key (set at start, dynamically, or not)."""
    shares = _shares(context)
    overrides = shares.group_configs.get(group_id, {})
    effective = effective_group_configs(overrides, context.config)
    entries = []
    for key, spec in GROUP_CONFIG_KEYS.items():
        if keys is not None and key not in keys:
            continue
        value = str(effective[key])
        synonyms = [{"name": key, "value": value, "source": GROUP_SOURCE}] if key in overrides else []
        source = GROUP_SOURCE if key in overrides else DEFAULT_SOURCE
        if spec.broker_key is not None:
            from_broker = broker_source(spec.broker_key)
            source = source if key in overrides else from_broker
            broker_value = str(spec.default(context.config))
            synonyms.append({"name": spec.broker_key, "value": broker_value, "source": from_broker})
        elif not synonyms:
            synonyms = [{"name": key, "value": value, "source": source}]
        entries.append({
            "name": key, "value": value, "read_only": False, "config_source": source,
            "is_sensitive": False, "synonyms": synonyms,
            "config_type": _TYPES.get(spec.kind, 0), "documentation": spec.doc,
            "is_default": source == DEFAULT_SOURCE,
        })
    return entries


def group_overrides(context: Any, group_id: str) -> dict[str, str]:
    return dict(_shares(context).group_configs.get(group_id, {}))


def alter_group_configs(context: Any, group_id: str, overrides: dict[str, str | None], validate_only: bool) -> None:
    if not group_id:
        raise KafkaProtocolError("A group name is required.", ErrorCode.invalid_request)
    try:
        _shares(context).alter_configs(group_id, overrides, validate_only)
    except ConfigError as exc:
        raise KafkaProtocolError(str(exc), ErrorCode.invalid_config) from None
