"""Build kio entities of any version from one version-independent description.

Kafka APIs grow fields version by version; a handler describes its answer once, as keyword
arguments and nested dicts, and :func:`build` keeps only what the target version's class has.
Nested entity types come from the class's type hints, so ``brokers=[{"node_id": 1, ...}]``
becomes a tuple of that version's broker class. ``timedelta`` fields accept milliseconds.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

from trikafka.errors import ErrorCode

__all__ = ["build", "entity_fields", "error_response"]


@functools.cache
def entity_fields(cls: type) -> dict[str, tuple[dataclasses.Field[Any], Any, type | None, bool]]:
    """name → (field, type hint, nested entity class or None, is a tuple)."""
    hints = typing.get_type_hints(cls)
    out: dict[str, tuple[dataclasses.Field[Any], Any, type | None, bool]] = {}
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        nested, is_tuple = _nested_class(hint)
        out[field.name] = (field, hint, nested, is_tuple)
    return out


def _nested_class(hint: Any) -> tuple[type | None, bool]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            if arg is not type(None):
                return _nested_class(arg)
    if origin is tuple:
        inner, _ = _nested_class(typing.get_args(hint)[0])
        return inner, True
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint, False
    return None, False


def _convert(field: dataclasses.Field[Any], nested: type | None, is_tuple: bool, value: Any, hint: Any = None) -> Any:
    if value is None:
        if hint is not None and type(None) not in typing.get_args(hint):
            # Older versions have non-nullable strings where newer ones allow null.
            kafka_type = field.metadata.get("kafka_type")
            if kafka_type == "string":
                return ""
            if kafka_type in ("bytes", "records"):
                return b""
        return None
    if nested is not None:
        if is_tuple:
            return tuple(
                build(nested, **item) if isinstance(item, Mapping) else item for item in value
            )
        return build(nested, **value) if isinstance(value, Mapping) else value
    kafka_type = field.metadata.get("kafka_type")
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(value)
    if is_tuple:
        return tuple(value)
    return value


def build(cls: type, **values: Any) -> Any:
    """An instance of ``cls`` from the values it has fields for; the rest are ignored."""
    kwargs = {}
    for name, (field, hint, nested, is_tuple) in entity_fields(cls).items():
        if name in values:
            kwargs[name] = _convert(field, nested, is_tuple, values[name], hint)
        elif field.metadata.get("kafka_type") == "error_code" and field.default is dataclasses.MISSING:
            kwargs[name] = ErrorCode.none  # an error field left out means no error
    return cls(**kwargs)


def _zero(field: dataclasses.Field[Any], hint: Any, nested: type | None, is_tuple: bool, code: ErrorCode) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if is_tuple:
        return ()
    kafka_type = field.metadata.get("kafka_type")
    if kafka_type == "error_code":
        return code
    if nested is not None:
        return None if type(None) in typing.get_args(hint) else error_response(nested, code)
    if type(None) in typing.get_args(hint):
        return None
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type == "string":
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        import uuid

        return uuid.UUID(int=0)
    return -1 if kafka_type and kafka_type.startswith("int") else 0


def error_response(cls: type, code: ErrorCode, **values: Any) -> Any:
    """A response carrying ``code`` in every top-level error field, the rest empty.

    Kafka's generic ``getErrorResponse``: what KafkaApis answers when a handler fails.
    """
    kwargs = {}
    for name, (field, hint, nested, is_tuple) in entity_fields(cls).items():
        if name in values:
            kwargs[name] = _convert(field, nested, is_tuple, values[name])
        else:
            kwargs[name] = _zero(field, hint, nested, is_tuple, code)
    return cls(**kwargs)
