"""The broker's field definitions and validators: what ``config.py``'s ``BrokerConfig`` is built from.

Each field carries its Kafka key, a parser for the string form found in ``server.properties``
and a validator that names the key, the value and what is allowed. The fields that need more
than a key, a default and bounds (listeners, log dirs, per-host connection limits) are built
here too, so ``BrokerConfig`` stays a table of one line per key.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from trikafka.config.topics import INT64_MAX, TOPIC_CONFIGS
from trikafka.errors import ConfigError

__all__ = [
    "ListenerSpec",
    "parse_listeners",
    "advertised_listeners_field",
    "bool_field",
    "check_host",
    "check_queued_max_request_bytes",
    "cluster_id_field",
    "connection_overrides_field",
    "field",
    "int_bounds",
    "int_field",
    "listeners_field",
    "log_dirs_field",
    "topic_default",
]


@attrs.frozen
class ListenerSpec:
    """One ``NAME://host:port`` entry of ``listeners`` / ``advertised.listeners``."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_listeners(value: str, key: str = "listeners") -> tuple[ListenerSpec, ...]:
    specs: list[ListenerSpec] = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        if not sep or not name or not name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(key, value, "entries must look like NAME://host:port")
        if rest.startswith("["):
            host, _, port_text = rest[1:].partition("]:")
        else:
            host, _, port_text = rest.rpartition(":")
        try:
            port = int(port_text)
        except ValueError:
            raise ConfigError(key, value, f"{item!r} has no integer port") from None
        if not 0 <= port <= 65535:
            raise ConfigError(key, value, f"port {port} is outside 0..65535")
        specs.append(ListenerSpec(name.upper(), host, port))
    if not specs:
        raise ConfigError(key, value, "at least one NAME://host:port listener is required")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigError(key, value, "each listener name may appear once")
    return tuple(specs)


def _parse_overrides(value: str, key: str) -> dict[str, int]:
    result: dict[str, int] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        host, sep, limit = item.partition(":") if item.count(":") == 1 else item.rpartition(":")
        try:
            if not sep or not host:
                raise ValueError
            result[host] = int(limit)
        except ValueError:
            raise ConfigError(key, value, "entries must look like host:count") from None
        if result[host] < 0:
            raise ConfigError(key, value, f"{host} has a negative limit")
    return result


def _bool(value: str, key: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ConfigError(key, value, "allowed values are true and false")


def int_bounds(lo: int, hi: int = INT64_MAX) -> tuple[Callable[[str, str], int], Callable]:
    def parse(value: str, key: str) -> int:
        try:
            return int(str(value).strip())
        except ValueError:
            raise ConfigError(key, value, f"an integer in [{lo}, {hi}] is required") from None

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        key = attribute.metadata["key"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(key, value, f"an integer in [{lo}, {hi}] is required")
        if not lo <= value <= hi:
            raise ConfigError(key, value, f"an integer in [{lo}, {hi}] is required")

    return parse, check


def field(key: str, default: Any, parse: Callable, check: Callable | None, doc: str) -> Any:
    validators = [check] if check else []
    return attrs.field(
        default=default,
        validator=validators,
        metadata={"key": key, "parse": parse, "doc": doc},
    )


def int_field(key: str, default: int, doc: str, lo: int = 0, hi: int = INT64_MAX) -> Any:
    parse, check = int_bounds(lo, hi)
    return field(key, default, parse, check, doc)


def bool_field(key: str, default: bool, doc: str) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if not isinstance(value, bool):
            raise ConfigError(attribute.metadata["key"], value, "allowed values are true and false")

    return field(key, default, _bool, check, doc)


def topic_default(topic_key: str) -> Any:
    """The broker-level default of a topic config, from its row of the one table."""
    definition = TOPIC_CONFIGS[topic_key]

    def parse(value: str, key: str) -> Any:
        try:
            return definition.parse(value)
        except ConfigError as exc:
            raise ConfigError(key, value, exc.allowed) from None

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        problem = definition.check(value)
        if problem:
            raise ConfigError(attribute.metadata["key"], value, problem)

    doc = f"{definition.doc} (topic: {topic_key})"
    return field(definition.broker_key, definition.default, parse, check, doc)  # type: ignore[arg-type]  # topic-level keys all have a broker key


def _check_listeners(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is None and attribute.name == "advertised_listeners":
        return
    if not isinstance(value, tuple) or not all(isinstance(v, ListenerSpec) for v in value):
        raise ConfigError(attribute.metadata["key"], value, "a tuple of ListenerSpec")


def _listeners_converter(value: Any) -> Any:
    return parse_listeners(value) if isinstance(value, str) else value


def _adv_converter(value: Any) -> Any:
    if value is None or value == "":
        return None
    return parse_listeners(value, "advertised.listeners") if isinstance(value, str) else value


def _log_dirs_converter(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str | os.PathLike):
        value = [p.strip() for p in str(value).split(",") if p.strip()]
    if isinstance(value, list | tuple) and all(isinstance(p, str | os.PathLike) for p in value):
        paths = tuple(str(Path(p).expanduser()) for p in value if str(p).strip())
        return paths or None
    return value  # the validator names what is wrong


def _check_log_dirs(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and not (
        isinstance(value, tuple) and all(isinstance(p, str) for p in value)
    ):
        raise ConfigError(
            attribute.metadata["key"], value, "comma-separated paths, a sequence of paths, or unset"
        )


def _check_overrides(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in value.items()
    ):
        raise ConfigError(attribute.metadata["key"], value, "a mapping of host to count >= 0")


def _check_cluster_id(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(attribute.metadata["key"], value, "a non-empty string or unset")


def check_queued_max_request_bytes(config: Any, attribute: attrs.Attribute, value: Any) -> None:
    """Kafka's rule: a bounded request memory pool must fit the largest request."""
    int_bounds(-(2**63))[1](config, attribute, value)
    if 0 < value < config.socket_request_max_bytes:
        raise ConfigError(
            "queued.max.request.bytes",
            value,
            f"-1 (unbounded) or at least socket.request.max.bytes ({config.socket_request_max_bytes})",
        )


def check_host(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, str) or not value.strip() or any(c in value for c in "/ []"):
        raise ConfigError(attribute.metadata["key"], value, "a host name or IP address, e.g. 127.0.0.1")



def listeners_field() -> Any:
    return attrs.field(
        default="PLAINTEXT://127.0.0.1:9092",
        converter=_listeners_converter,
        validator=_check_listeners,
        metadata={
            "key": "listeners",
            "parse": lambda v, k: parse_listeners(v, k),
            "doc": "Comma-separated NAME://host:port endpoints; port 0 picks a free port.",
        },
    )


def advertised_listeners_field() -> Any:
    return attrs.field(
        default=None,
        converter=_adv_converter,
        validator=_check_listeners,
        metadata={
            "key": "advertised.listeners",
            "parse": lambda v, k: parse_listeners(v, k) if v else None,
            "doc": "What Metadata tells clients; defaults to the bound listeners.",
        },
    )


def cluster_id_field() -> Any:
    return attrs.field(
        default=None,
        validator=_check_cluster_id,
        metadata={
            "key": "cluster.id",
            "parse": lambda v, k: v or None,
            "doc": "Fixed cluster id; by default generated once and kept in meta.properties.",
        },
    )


def log_dirs_field() -> Any:
    return attrs.field(
        default=None,
        converter=_log_dirs_converter,
        validator=_check_log_dirs,
        metadata={
            "key": "log.dirs",
            "parse": lambda v, k: v,
            "doc": "Data directories; unset keeps everything in memory.",
        },
    )


def connection_overrides_field() -> Any:
    return attrs.field(
        factory=dict,
        converter=lambda v: _parse_overrides(v, "max.connections.per.ip.overrides")
        if isinstance(v, str)
        else dict(v),
        validator=_check_overrides,
        metadata={
            "key": "max.connections.per.ip.overrides",
            "parse": _parse_overrides,
            "doc": "Per-host limits, host:count,host:count.",
        },
    )
