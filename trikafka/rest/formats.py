"""The embedded formats: how a record's JSON key or value becomes bytes, and back.

``binary`` (base64 text), ``json`` (any JSON value, stored as its UTF-8 text) and the three
schema formats — ``avro``, ``jsonschema``, ``protobuf`` — which write Confluent's wire format
(magic byte 0, the schema id as 4 bytes big-endian, for Protobuf the message indexes, then
the encoded value), so confluent-kafka's deserializers read what the proxy wrote and the
proxy reads what they wrote. Schemas come from the built-in registry (in-process, as the
registry's HTTP routes reach it): a request names one by ``value_schema`` (its text,
registered under ``<topic>-value`` like Confluent's TopicNameStrategy) or by
``value_schema_id``; ``key_schema``/``key_schema_id`` likewise.

Avro values are read and written in Avro's JSON encoding (a union's branch is named:
``{"string": "x"}``), as Confluent's proxy does.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import struct
from collections.abc import Sequence
from typing import Any

from trikafka.rest import errors

__all__ = ["FORMATS", "SCHEMA_FORMATS", "Codec"]

FORMATS = ("binary", "json", "avro", "jsonschema", "protobuf")
#: embedded format → the registry's schemaType.
SCHEMA_FORMATS = {"avro": "AVRO", "jsonschema": "JSON", "protobuf": "PROTOBUF"}

_MAGIC = 0


def _registry_error(exc: Exception) -> errors.RestError:
    status = getattr(exc, "status", 422)
    code = getattr(exc, "error_code", errors.INVALID_SCHEMA)
    message = getattr(exc, "message", str(exc))
    if status >= 500:
        return errors.RestError(500, 50001, f"Schema registry error: {message}")
    if status == 422:  # the registry's 42201 invalid schema is the proxy's 42205
        return errors.invalid_schema(message)
    return errors.RestError(status, code, message)


class Codec:
    """Encodes and decodes one embedded format against the registry (None: no registry)."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    # --- schemas ---------------------------------------------------------------------

    def _need_registry(self) -> Any:
        if self.registry is None:
            raise errors.RestError(
                422, errors.INVALID_SCHEMA, "the schema formats need the broker's schema registry"
            )
        return self.registry

    def schema_id(self, fmt: str, topic: str, is_key: bool, schema: Any, schema_id: Any) -> int | None:
        """The id of the schema a request names (registering ``schema`` text when given)."""
        if schema is None and schema_id is None:
            return None
        registry = self._need_registry()
        from trikafka.registry import RegistryError

        try:
            if schema is not None:
                if not isinstance(schema, str):
                    raise errors.invalid_schema("the schema is given as a JSON string holding the schema's text")
                subject = f"{topic}-{'key' if is_key else 'value'}"
                body: dict[str, Any] = {"schema": schema}
                if SCHEMA_FORMATS[fmt] != "AVRO":
                    body["schemaType"] = SCHEMA_FORMATS[fmt]
                return int(registry.register(subject, body)["id"])
            if isinstance(schema_id, bool) or not isinstance(schema_id, int):
                raise errors.unprocessable(f"{'key' if is_key else 'value'}_schema_id: an integer is required")
            stored = self._stored(schema_id)
            if stored.spec.schema_type != SCHEMA_FORMATS[fmt]:
                raise errors.invalid_schema(
                    f"schema {schema_id} is {stored.spec.schema_type}, not {SCHEMA_FORMATS[fmt]}"
                )
            return int(stored.id)
        except RegistryError as exc:
            raise _registry_error(exc) from None

    def _stored(self, schema_id: int) -> Any:
        found = [s for s in self._need_registry().state.by_id(schema_id) if not s.deleted]
        if not found:
            raise errors.invalid_schema(f"schema id {schema_id} is not registered")
        return found[0]

    def schema_type(self, schema_id: int) -> str:
        """The registry's schemaType of ``schema_id`` (AVRO, JSON, PROTOBUF); 42205 if unknown."""
        return str(self._stored(schema_id).spec.schema_type)

    def _parsed(self, schema_id: int) -> tuple[str, Any]:
        registry = self._need_registry()
        from trikafka.registry import RegistryError

        try:
            stored = self._stored(schema_id)
            return stored.spec.schema_type, registry.parsed(stored.spec, registry.state)
        except RegistryError as exc:
            raise _registry_error(exc) from None

    # --- encoding --------------------------------------------------------------------

    def encode(self, fmt: str, value: Any, schema_id: int | None, what: str) -> bytes | None:
        """``value`` (JSON, as the request held it) as the record's bytes; None stays None."""
        if value is None:
            return None
        if fmt == "binary":
            if not isinstance(value, str):
                raise errors.invalid_value(f"{what}: binary data is a base64 string, not {type(value).__name__}")
            try:
                return base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise errors.invalid_value(f"{what}: not base64: {exc}") from None
        if fmt == "json":
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        if schema_id is None:
            raise errors.key_schema_missing() if what.endswith("key") else errors.value_schema_missing()
        schema_type, parsed = self._parsed(schema_id)
        header = struct.pack(">bI", _MAGIC, schema_id)
        try:
            if schema_type == "AVRO":
                return header + _avro_encode(parsed[0], value)
            if schema_type == "JSON":
                _json_validate(parsed[0], value)
                return header + json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
            return header + _protobuf_encode(parsed, value)
        except errors.RestError:
            raise
        except Exception as exc:  # each encoder raises its own kinds: all are the value's fault
            raise errors.invalid_value(f"{what}: {type(exc).__name__}: {exc}") from None

    def decode(self, fmt: str, data: bytes | None, what: str) -> Any:
        """The record's bytes as JSON for a consumer of format ``fmt``."""
        if data is None:
            return None
        if fmt == "binary":
            return base64.b64encode(data).decode("ascii")
        if fmt == "json":
            try:
                return json.loads(data)
            except (ValueError, RecursionError) as exc:
                raise errors.RestError(
                    500, errors.KAFKA_ERROR, f"{what}: the record's bytes are not JSON: {exc}"
                ) from None
        if len(data) < 5 or data[0] != _MAGIC:
            raise errors.RestError(
                500, errors.KAFKA_ERROR, f"{what}: the record's bytes are not in the schema registry's format"
            )
        schema_id = struct.unpack(">I", data[1:5])[0]
        try:
            schema_type, parsed = self._parsed(schema_id)
        except errors.RestError as exc:  # the record's schema, not the request, is at fault
            raise errors.RestError(500, errors.KAFKA_ERROR, f"{what}: {exc.message}") from None
        try:
            if schema_type == "AVRO":
                return _avro_decode(parsed[0], data[5:])
            if schema_type == "JSON":
                return json.loads(data[5:])
            return _protobuf_decode(parsed, data[5:])
        except Exception as exc:  # the bytes do not match their schema
            raise errors.RestError(
                500, errors.KAFKA_ERROR, f"{what}: cannot decode with schema {schema_id}: {exc}"
            ) from None


# --- Avro (fastavro), in Avro's JSON encoding ---------------------------------------------


def _avro_encode(schema: Any, value: Any) -> bytes:
    import fastavro

    records = list(fastavro.json_reader(io.StringIO(json.dumps(value)), schema))
    if len(records) != 1:
        raise ValueError("one Avro value is expected")
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, records[0])
    return out.getvalue()


def _avro_decode(schema: Any, data: bytes) -> Any:
    import fastavro

    datum = fastavro.schemaless_reader(io.BytesIO(data), schema, None)
    text = io.StringIO()
    fastavro.json_writer(text, schema, [datum])
    return json.loads(text.getvalue().splitlines()[0])


# --- JSON Schema --------------------------------------------------------------------------


def _json_validate(document: Any, value: Any) -> None:
    import jsonschema

    validator = jsonschema.validators.validator_for(document)(document)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise errors.invalid_value(f"{where or 'the value'}: {error.message}")


# --- Protobuf: the schema's first message; message indexes [0] ------------------------------


def _message_class(parsed: Any, indexes: Sequence[int] = (0,)) -> Any:
    from google.protobuf import message_factory

    proto, _referenced, pool = parsed
    message = proto.message_type[indexes[0]]
    name = f"{proto.package}.{message.name}" if proto.package else message.name
    descriptor = pool.FindMessageTypeByName(name)
    for index in indexes[1:]:
        descriptor = descriptor.nested_types[index]
    return message_factory.GetMessageClass(descriptor)


def _protobuf_encode(parsed: Any, value: Any) -> bytes:
    from google.protobuf import json_format

    if not isinstance(value, dict):
        raise errors.invalid_value(f"a Protobuf value is a JSON object, not {type(value).__name__}")
    message = json_format.ParseDict(value, _message_class(parsed)())
    return b"\x00" + message.SerializeToString()  # message indexes [0]: one zero byte


def _varint(data: bytes, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if at >= len(data):
            raise ValueError("truncated message indexes")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at  # zigzag
        shift += 7


def _protobuf_decode(parsed: Any, data: bytes) -> Any:
    from google.protobuf import json_format

    count, at = _varint(data, 0)
    indexes = [0]
    if count:
        indexes = []
        for _ in range(count):
            index, at = _varint(data, at)
            indexes.append(index)
    message = _message_class(parsed, indexes)()
    message.ParseFromString(data[at:])
    return json_format.MessageToDict(message, preserving_proto_field_name=True)
