"""The broker keys of KIP-848's consumer groups (``group.consumer.*``) and of the group
coordinator's protocols, with Kafka's names, defaults and cross-key rules.

Kept out of ``config.py`` so that module stays a table of fields: here are the list-valued
parsers these keys need and the bounds Kafka's ``GroupCoordinatorConfig`` checks together
(a default must lie between its min and max; the heartbeat interval must be below the session
timeout). Assignors are named by Kafka's short names (``uniform``, ``range``) or by the Java
class names Kafka's own ``server.properties`` files use; both mean the same assignor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from trikafka.errors import ConfigError

__all__ = [
    "ACCEPTED_PROTOCOLS",
    "ASSIGNOR_CLASSES",
    "MIGRATION_POLICIES",
    "REBALANCE_PROTOCOLS",
    "check_consumer_group_keys",
    "choice_field",
    "list_field",
]

_ASSIGNOR_PACKAGE = "org.apache.kafka.coordinator.group.assignor."
#: Kafka's server-side assignors: short name → class name.
ASSIGNOR_CLASSES = {"uniform": _ASSIGNOR_PACKAGE + "UniformAssignor", "range": _ASSIGNOR_PACKAGE + "RangeAssignor"}
#: What ``group.coordinator.rebalance.protocols`` lists by default. ``share`` is accepted too
#: (Kafka 4.0's switch for share groups; trikafka serves them either way, as Kafka 4.1+ does);
#: Kafka's ``streams`` is not implemented: refused, never silently ignored.
REBALANCE_PROTOCOLS = ("classic", "consumer")
ACCEPTED_PROTOCOLS = (*REBALANCE_PROTOCOLS, "share")
#: ``group.consumer.migration.policy`` (Kafka's ConsumerGroupMigrationPolicy, case-insensitive):
#: which online conversions of a group *with members* between classic and consumer are allowed.
MIGRATION_POLICIES = ("disabled", "downgrade", "upgrade", "bidirectional")


def _parse_list(allowed: Mapping[str, str], required: tuple[str, ...]) -> Callable[[Any, str], tuple[str, ...]]:
    """A comma-separated list whose entries are keys of ``allowed`` (mapped to its values)."""

    def parse(value: Any, key: str) -> tuple[str, ...]:
        items = value.split(",") if isinstance(value, str) else list(value)
        names: list[str] = []
        for item in (str(i).strip() for i in items):
            if not item:
                continue
            if item not in allowed:
                raise ConfigError(key, value, f"entries must be among {', '.join(sorted(set(allowed)))}")
            if allowed[item] not in names:
                names.append(allowed[item])
        missing = [r for r in required if r not in names]
        if not names or missing:
            need = f"{', '.join(required)} is required" if required else "a non-empty list is required"
            raise ConfigError(key, value, need)
        return tuple(names)

    return parse


def list_field(
    key: str, default: tuple[str, ...], allowed: Mapping[str, str], doc: str, required: tuple[str, ...] = ()
) -> Any:
    """A BrokerConfig field holding a list of names (a tuple once parsed)."""
    parse = _parse_list(allowed, required)

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if not isinstance(value, tuple):
            raise ConfigError(key, value, "a comma-separated list is required")
        parse(value, key)

    return attrs.field(default=default, converter=lambda v: parse(v, key) if isinstance(v, (list, str)) else v,
                       validator=[check], metadata={"key": key, "parse": parse, "doc": doc})


def choice_field(key: str, default: str, allowed: tuple[str, ...], doc: str) -> Any:
    """A BrokerConfig field holding one of ``allowed`` (matched case-insensitively, as Kafka's
    ``CaseInsensitiveValidString``; kept lower-case)."""

    def parse(value: Any, key: str = key) -> str:
        name = str(value).strip().lower()
        if name not in allowed:
            raise ConfigError(key, value, f"allowed values are {', '.join(allowed)}")
        return name

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        parse(value)

    return attrs.field(default=default, converter=lambda v: parse(v) if isinstance(v, str) else v,
                       validator=[check], metadata={"key": key, "parse": parse, "doc": doc})


def check_consumer_group_keys(config: Any, attribute: attrs.Attribute, value: Any) -> None:
    """Kafka's GroupCoordinatorConfig rules across the ``group.consumer.*`` keys."""
    hb = (config.group_consumer_min_heartbeat_interval_ms, config.group_consumer_heartbeat_interval_ms,
          config.group_consumer_max_heartbeat_interval_ms)
    session = (config.group_consumer_min_session_timeout_ms, config.group_consumer_session_timeout_ms,
               config.group_consumer_max_session_timeout_ms)
    for name, (lo, default, hi) in (("heartbeat.interval.ms", hb), ("session.timeout.ms", session)):
        if not lo <= default <= hi:
            raise ConfigError(f"group.consumer.{name}", default,
                              f"a value between group.consumer.min.{name} ({lo}) and group.consumer.max.{name} ({hi})")
    if hb[1] >= session[1]:
        raise ConfigError("group.consumer.heartbeat.interval.ms", hb[1],
                          f"less than group.consumer.session.timeout.ms ({session[1]})")
