"""Serializers and deserializers: Python objects in, bytes on the wire, objects out.

``open_producer(..., key_serializer=f, value_serializer=g)`` and
``open_consumer(..., key_deserializer=f, value_deserializer=g)`` take plain callables, in the
two conventions Python users bring:

* aiokafka's — one argument: ``value_serializer=lambda v: json.dumps(v).encode()``;
* confluent-kafka's — ``(value, ctx)``, where ``ctx`` has ``topic``, ``field`` (``"key"`` or
  ``"value"``, the strings of confluent's ``MessageField``) and ``headers``: the shape of its
  schema-registry serializers (``AvroSerializer``, ``JSONSerializer``, ``ProtobufSerializer``),
  which read the topic from ``ctx`` to name the subject.

A callable gets ``ctx`` when its second positional parameter is required or named ``ctx`` /
``context`` (so ``str.encode``, whose second is an optional ``encoding``, gets one argument).
As in both libraries, the callable is applied to every key and value, ``None`` included (a
JSON serializer makes ``null`` of it; write ``lambda v: None if v is None else …`` to keep
tombstones). What a serializer returns must be ``bytes``, ``str`` or ``None``.

A deserializer that raises stops the consumer at that record, as Java's
``RecordDeserializationException``: the records before it are returned first, then the next
poll raises :class:`RecordDeserializationError` naming partition and offset, its ``__cause__``
the deserializer's exception; the position stays on the record until the application seeks
past it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import attrs

from trikafka.client.errors import KafkaError
from trikafka.errors import ErrorCode

__all__ = ["Codec", "RecordDeserializationError", "SerializationContext", "codec", "record_decoder"]

#: ``(value, topic, field, headers) -> converted`` — a user's callable in one shape.
Codec = Callable[[Any, str, str, Any], Any]


@attrs.frozen
class SerializationContext:
    """What confluent-kafka's two-argument (de)serializers are given besides the value."""

    topic: str
    field: str  # "key" or "value"
    headers: object = None


class RecordDeserializationError(KafkaError):
    """A key or value deserializer raised; the consumer's position stays at this record."""

    def __init__(self, topic: str, partition: int, offset: int, field: str, cause: BaseException) -> None:
        super().__init__(
            ErrorCode.corrupt_message,
            f"the {field} deserializer failed on {topic}-{partition} at offset {offset}: {cause!r}; "
            "seek past the record to go on",
            retriable=False,
        )
        self.topic, self.partition, self.offset, self.field = topic, partition, offset, field


def _takes_context(function: Callable[..., Any]) -> bool:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: one argument
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 2 and not any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return False
    if len(positional) < 2:
        return True  # (value, *args): confluent's serializers are called with ctx
    second = positional[1]
    return second.default is second.empty or second.name in ("ctx", "context")


def codec(function: Any, name: str) -> Codec | None:
    """``function`` (either convention) as a :data:`Codec`; None stays None."""
    if function is None:
        return None
    if not callable(function):
        raise TypeError(f"{name} must be a callable (value) or (value, ctx), not {type(function).__name__}")
    if _takes_context(function):
        return lambda value, topic, field, headers: function(value, SerializationContext(topic, field, headers))
    return lambda value, topic, field, headers: function(value)


def record_decoder(key_deserializer: Any, value_deserializer: Any) -> Callable[[Any], Any] | None:
    """A function record → record with key and value deserialized, or None when neither is set."""
    key_codec = codec(key_deserializer, "key_deserializer")
    value_codec = codec(value_deserializer, "value_deserializer")
    if key_codec is None and value_codec is None:
        return None

    def decode(record: Any) -> Any:
        key, value = record.key, record.value
        field = "key"
        try:
            if key_codec is not None:
                key = key_codec(key, record.topic, "key", record.headers)
            field = "value"
            if value_codec is not None:
                value = value_codec(value, record.topic, "value", record.headers)
        except Exception as exc:
            raise RecordDeserializationError(record.topic, record.partition, record.offset, field, exc) from exc
        return attrs.evolve(record, key=key, value=value)

    return decode
