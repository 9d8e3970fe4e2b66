"""Broker-side schema validation: Confluent Server's ``confluent.value.schema.validation`` and
``confluent.key.schema.validation`` topic configs.

With validation on, every record's value (or key) must begin with Confluent's framing — the
magic byte 0 and a 4-byte big-endian schema id — and that id must be registered (not
deleted) under the record's subject, named by ``confluent.value.subject.name.strategy``:

* ``TopicNameStrategy`` (the default): ``<topic>-value`` (``<topic>-key``);
* ``RecordNameStrategy``: the schema's record name (Avro ``namespace.name``, a JSON
  Schema's ``title``, a Protobuf message's full name);
* ``TopicRecordNameStrategy``: ``<topic>-<record name>``.

A batch with any such record is refused whole (INVALID_RECORD), every bad record listed in
the partition's ``record_errors`` by its index in its batch, the message naming the batch
and the record; nothing of the request's batches for that partition is appended. The
payload after the id is not decoded: the id is checked, as Confluent Server checks it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from trikafka.errors import RecordErrorsError
from trikafka.protocol.batch_layout import Compression
from trikafka.protocol.batch_records import decode_records
from trikafka.protocol.record_reader import record_tuples
from trikafka.registry.service import SchemaRegistry
from trikafka.registry.state import RegistryState, StoredSchema

__all__ = ["RecordValidator", "record_validator"]

RecordValidator = Callable[[str, Mapping[str, Any], bytes | bytearray, Iterable[Any]], None]


def record_validator(registry: SchemaRegistry) -> RecordValidator:
    """``validate(topic, topic configs, batches, their headers)``; raises RecordErrorsError."""

    def validate(topic: str, configs: Mapping[str, Any], data: bytes | bytearray, headers: Iterable[Any]) -> None:
        checks = [
            (
                field,
                str(configs.get(f"confluent.{field}.subject.name.strategy", "TopicNameStrategy")).rpartition(".")[2],
            )
            for field in ("key", "value")
            if configs.get(f"confluent.{field}.schema.validation") is True
        ]
        if not checks:
            return
        state = registry.state
        errors: list[tuple[int, str]] = []
        verdicts: dict[tuple[str, bytes | None], str | None] = {}  # (field, first 5 bytes) → problem
        for batch, header in enumerate(headers):
            if header.is_control:
                continue
            for index, record in enumerate(_records(data, header)):
                for field, strategy in checks:
                    payload = record[2] if field == "key" else record[3]
                    prefix = None if payload is None else bytes(payload[:5])
                    if (field, prefix) not in verdicts:
                        verdicts[field, prefix] = _problem(state, topic, field, strategy, prefix)
                    problem = verdicts[field, prefix]
                    if problem:
                        errors.append((index, f"batch {batch} record {index}: the {field} {problem}"))
                        break
        if errors:
            raise RecordErrorsError(
                f"{len(errors)} record(s) refused by schema validation of {topic}, the first: {errors[0][1]}", errors
            )

    return validate


def _records(data: bytes | bytearray, header: Any) -> Any:
    """(offset, timestamp, key, value, headers) per record: the native decoder's tuples for
    an uncompressed batch, the inflated records of a compressed one."""
    if header.compression == Compression.NONE:
        return record_tuples(data, header)
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_records(data, header)]


def _problem(state: RegistryState, topic: str, field: str, strategy: str, payload: bytes | None) -> str | None:
    if payload is None or len(payload) < 5 or payload[0] != 0:
        return "does not begin with a schema id (magic byte 0 and a 4-byte id)"
    (schema_id,) = struct.unpack_from(">i", payload, 1)
    found = [s for s in state.by_id(schema_id) if not s.deleted]
    if not found:
        return f"has schema id {schema_id}, which is not registered"
    wanted = {f"{topic}-{field}"} if strategy == "TopicNameStrategy" else None
    for stored in found:
        if wanted is None:
            name = _record_name(stored)
            wanted_here = {name} if strategy == "RecordNameStrategy" else {f"{topic}-{name}"}
            if stored.subject in wanted_here:
                return None
        elif stored.subject in wanted:
            return None
    subjects = sorted({s.subject for s in found})
    return f"has schema id {schema_id}, registered under {subjects}, not under the subject {strategy} names"


def _record_name(stored: StoredSchema) -> str:
    """The record name of a schema (the record strategies' subject)."""
    spec = stored.spec
    try:
        if spec.schema_type == "PROTOBUF":
            from trikafka.registry.protobuf import descriptor_of, proto_messages

            return next(iter(proto_messages(descriptor_of(spec.schema, "schema.proto"))), "")
        document = json.loads(spec.schema)
    except Exception:  # a schema stored by another registry that we cannot read: no name
        return ""
    if not isinstance(document, dict):
        return ""
    if spec.schema_type == "JSON":
        return str(document.get("title", ""))
    name, namespace = str(document.get("name", "")), document.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"
