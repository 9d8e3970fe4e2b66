"""Request entities of any version from one description (sans-IO).

:func:`trikafka.protocol.entities.build` keeps the fields a version has and drops the rest; a
client also needs the opposite: a field a *newer* version requires that the caller did not
name (``include_topic_authorized_operations``, a ``topic_id`` next to a topic name) gets
Kafka's zero — false, null, empty, 0, the zero UUID — as Kafka's generated Java messages do.
"""

from __future__ import annotations

import dataclasses
import typing
import uuid
from collections.abc import Mapping
from typing import Any

from trikafka.protocol.entities import build, entity_fields

__all__ = ["make"]


def _zero(field: dataclasses.Field[Any], hint: Any, nested: type | None, is_tuple: bool) -> Any:
    if is_tuple:
        return ()
    if type(None) in typing.get_args(hint):
        return None
    if nested is not None:
        return _filled(nested, {})
    kafka_type = field.metadata.get("kafka_type", "")
    if kafka_type == "bool":
        return False
    if kafka_type == "string":
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    return 0


def _filled(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (field, hint, nested, is_tuple) in entity_fields(cls).items():
        if name in values:
            value = values[name]
            if nested is not None and value is not None:
                if is_tuple:
                    value = [_filled(nested, v) if isinstance(v, Mapping) else v for v in value]
                elif isinstance(value, Mapping):
                    value = _filled(nested, value)
            out[name] = value
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            if field.metadata.get("kafka_type") != "error_code":
                out[name] = _zero(field, hint, nested, is_tuple)
    return out


def make(cls: type, **values: Any) -> Any:
    """An instance of ``cls``: named fields it has, Kafka's zero for required ones not named."""
    return build(cls, **_filled(cls, values))
