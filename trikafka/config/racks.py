"""``broker.rack`` and ``replica.selector.class``: where a broker stands, and whom a consumer
may fetch from (KIP-36 racks, KIP-392 fetching from the closest replica).

``broker.rack`` is one rack id in Kafka. trikafka's ``--brokers N`` runs N brokers from one
configuration, so the value may also be a comma-separated list: broker *i* of the cluster (in
node-id order, from 0) takes entry ``i mod len`` — ``r1,r2,r3`` gives three brokers three
racks, ``r1,r2`` alternates. A lone broker takes the first entry. A rack id therefore cannot
contain a comma here.

``replica.selector.class`` is Kafka's plug-in class name; trikafka has the two selectors Kafka
ships — none set or ``LeaderSelector`` (fetch from the leader) and ``RackAwareReplicaSelector``
(a consumer sending ``rack_id`` is told to fetch from an in-sync replica in its rack). Any
other class is refused by name.
"""

from __future__ import annotations

from typing import Any

import attrs

from trikafka.errors import ConfigError

__all__ = ["LEADER_SELECTOR", "RACK_AWARE_SELECTOR", "rack_field", "rack_of", "racks", "selector_field"]

_PACKAGE = "org.apache.kafka.common.replica."
LEADER_SELECTOR = _PACKAGE + "LeaderSelector"
RACK_AWARE_SELECTOR = _PACKAGE + "RackAwareReplicaSelector"
_SELECTORS = (LEADER_SELECTOR, RACK_AWARE_SELECTOR)


def racks(value: str | None) -> tuple[str, ...]:
    """The rack ids of a ``broker.rack`` value (empty: no rack)."""
    return tuple(part.strip() for part in value.split(",")) if value else ()


def rack_of(value: str | None, index: int) -> str | None:
    """Broker ``index``'s rack (0 for a lone broker): the list's entries round-robin."""
    entries = racks(value)
    return entries[index % len(entries)] if entries else None


def _parse_rack(value: Any, key: str = "broker.rack") -> str | None:
    text = str(value).strip() if value is not None else ""
    if not text:
        return None
    if any(not part for part in racks(text)):
        raise ConfigError(key, value, "a rack id, or comma-separated rack ids (one per broker), none empty")
    return ",".join(racks(text))


def rack_field(doc: str) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value is not None and (not isinstance(value, str) or _parse_rack(value) != value):
            raise ConfigError(
                "broker.rack", value, "a rack id, or comma-separated rack ids (one per broker), none empty"
            )

    return attrs.field(default=None, converter=lambda v: _parse_rack(v) if isinstance(v, str) else v,
                       validator=[check], metadata={"key": "broker.rack", "parse": _parse_rack, "doc": doc})


def _parse_selector(value: Any, key: str = "replica.selector.class") -> str | None:
    text = str(value).strip() if value is not None else ""
    if not text:
        return None
    if text not in _SELECTORS:
        raise ConfigError(key, value, f"allowed values are {', '.join(_SELECTORS)} (or none: the leader)")
    return text


def selector_field(doc: str) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value is not None and _parse_selector(value) != value:
            raise ConfigError("replica.selector.class", value, f"allowed values are {', '.join(_SELECTORS)}")

    return attrs.field(default=None, converter=lambda v: _parse_selector(v) if isinstance(v, str) else v,
                       validator=[check], metadata={"key": "replica.selector.class", "parse": _parse_selector,
                                                    "doc": doc})
