"""Protobuf: parse ``.proto`` text (``proto-schema-parser``) and Confluent's rules.

Confluent diffs the original (writer's) schema against the update (reader's) and refuses the
differences outside its compatible set (``protobuf/diff/SchemaDiff.COMPATIBLE_CHANGES``).
Covered here, message by message (matched by full name), field by field (matched by number):

* ``PACKAGE_CHANGED``; ``MESSAGE_REMOVED`` (a message of the original missing);
* ``FIELD_KIND_CHANGED`` (scalar ↔ message/enum, map ↔ not), ``FIELD_SCALAR_KIND_CHANGED``
  (outside the wire-compatible groups int32/uint32/int64/uint64/bool, sint32/sint64,
  fixed32/sfixed32, fixed64/sfixed64, string/bytes), ``FIELD_NAMED_TYPE_CHANGED``;
* ``FIELD_NUMERIC_LABEL_CHANGED`` (a numeric field turning repeated or back);
* ``REQUIRED_FIELD_ADDED`` / ``REQUIRED_FIELD_REMOVED`` (proto2);
* ``ONEOF_FIELD_REMOVED``, ``MULTIPLE_FIELDS_MOVED_TO_ONEOF``, ``FIELD_MOVED_TO_EXISTING_ONEOF``.

Compatible, as in Confluent: fields, messages, enums and enum constants added or removed,
field names changed. Imports must each be a reference or a well-known type
(``google/protobuf/*``); the schema is built in a descriptor pool, so every type resolves.
A schema arrives as ``.proto`` text or a base64 ``FileDescriptorProto`` (see proto_text.py).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from trikafka.registry.errors import RegistryError, invalid_schema
from trikafka.registry.proto_text import proto_text_descriptor

__all__ = ["check_protobuf", "descriptor_of", "parse_protobuf", "proto_messages"]

_NAMES = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
    8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64",
    17: "sint32", 18: "sint64",
}
_GROUPS = (
    {"int32", "uint32", "int64", "uint64", "bool"},
    {"sint32", "sint64"},
    {"fixed32", "sfixed32"},
    {"fixed64", "sfixed64"},
    {"string", "bytes"},
)
_NUMERIC = set(_NAMES.values()) - {"string", "bytes"}
_BUILTIN = ("google/protobuf/", "google/type/", "confluent/")


def descriptor_of(text: str, name: str) -> Any:
    """The ``FileDescriptorProto`` of ``text``: a base64 serialized one, or ``.proto`` text."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    stripped = text.strip()
    if stripped and not any(c.isspace() for c in stripped) and ";" not in stripped:
        try:
            raw = base64.b64decode(stripped, validate=True)
            proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
        except (binascii.Error, ValueError, DecodeError):
            proto = None
        if proto is not None and (proto.message_type or proto.enum_type or proto.name):
            return proto
    return proto_text_descriptor(text, name)


def parse_protobuf(text: str, references: Mapping[str, str]) -> tuple[Any, dict[str, Any], Any]:
    """(descriptor, referenced descriptors by import name, the descriptor pool they were
    built in): every import and every type name resolves, or 42201."""
    referenced = {name: descriptor_of(ref, name) for name, ref in references.items()}
    proto = descriptor_of(text, "schema.proto")
    for dependency in proto.dependency:
        if dependency not in referenced and not dependency.startswith(_BUILTIN):
            raise invalid_schema(f"import {dependency!r} is not among the schema's references")
    if not (proto.message_type or proto.enum_type):
        raise invalid_schema("a Protobuf schema defines at least one message")
    try:
        pool = _build_pool(proto, referenced)
    except RegistryError:
        raise
    except Exception as exc:  # the pool's TypeError/KeyError for what does not resolve
        raise invalid_schema(f"{type(exc).__name__}: {exc}") from None
    return proto, referenced, pool


def _build_pool(proto: Any, referenced: Mapping[str, Any]) -> Any:
    from google.protobuf import (  # noqa: F401 - the well-known types, into the default pool
        any_pb2,
        descriptor_pb2,
        descriptor_pool,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: Any) -> None:
        if file.name in added:
            return
        added.add(file.name)
        for dependency in file.dependency:
            if dependency in referenced:
                add(referenced[dependency])
            else:
                try:
                    found = descriptor_pool.Default().FindFileByName(dependency)
                except KeyError:
                    raise invalid_schema(f"import {dependency!r} is not known") from None
                builtin = descriptor_pb2.FileDescriptorProto()
                found.CopyToProto(builtin)
                add(builtin)
        pool.Add(file)

    add(proto)
    pool.FindFileByName(proto.name)
    return pool


def proto_messages(proto: Any) -> dict[str, Any]:
    """Every message of the descriptor by full name (``package.Outer.Inner``), in order."""
    found: dict[str, Any] = {}

    def walk(messages: Any, prefix: str) -> None:
        for message in messages:
            name = f"{prefix}{message.name}"
            found[name] = message
            walk(message.nested_type, f"{name}.")

    walk(proto.message_type, f"{proto.package}." if proto.package else "")
    return found


def _fields(message: Any) -> dict[int, tuple[str, str, str, str | None]]:
    """number → (kind, type, label, oneof name); kind is scalar, named or map."""
    entries = {m.name for m in message.nested_type if m.options.map_entry}
    found: dict[int, tuple[str, str, str, str | None]] = {}
    for field in message.field:
        short = field.type_name.rpartition(".")[2]
        if short in entries:
            entry = next(m for m in message.nested_type if m.name == short)
            kind, type_ = "map", ",".join(f.type_name.rpartition(".")[2] or _NAMES.get(f.type, "") for f in entry.field)
        elif field.type_name:
            kind, type_ = "named", short
        else:
            kind, type_ = "scalar", _NAMES.get(field.type, str(field.type))
        label = {1: "OPTIONAL", 2: "REQUIRED", 3: "REPEATED"}.get(field.label, "")
        oneof = (
            message.oneof_decl[field.oneof_index].name
            if field.HasField("oneof_index") and not field.proto3_optional
            else None
        )
        found[field.number] = (kind, type_, label, oneof)
    return found


def check_protobuf(reader: tuple[Any, ...], writer: tuple[Any, ...]) -> list[str]:
    """Incompatible differences from ``writer`` (original) to ``reader`` (update)."""
    original, update = writer[0], reader[0]
    found: list[tuple[str, str]] = []
    if original.package != update.package:
        found.append(("PACKAGE_CHANGED", "#/"))
    before, after = proto_messages(original), proto_messages(update)
    for name, message in before.items():
        if name not in after:
            found.append(("MESSAGE_REMOVED", f"#/{name}"))
            continue
        _message(_fields(message), _fields(after[name]), f"#/{name}", found)
    return [f"{{errorType:'{kind}', description:'at path {path}'}}" for kind, path in found]


def _message(before: dict[int, Any], after: dict[int, Any], path: str, found: list[tuple[str, str]]) -> None:
    moved_to_oneof: dict[str, int] = {}
    for number, (kind, type_, label, oneof) in before.items():
        where = f"{path}/{number}"
        if number not in after:
            if oneof is not None:
                found.append(("ONEOF_FIELD_REMOVED", where))
            if label == "REQUIRED":
                found.append(("REQUIRED_FIELD_REMOVED", where))
            continue
        new_kind, new_type, new_label, new_oneof = after[number]
        if kind != new_kind:
            found.append(("FIELD_KIND_CHANGED", where))
        elif kind == "scalar" and type_ != new_type:
            if not any(type_ in g and new_type in g for g in _GROUPS):
                found.append(("FIELD_SCALAR_KIND_CHANGED", where))
        elif kind != "scalar" and type_ != new_type:
            found.append(("FIELD_NAMED_TYPE_CHANGED", where))
        if kind == new_kind == "scalar" and type_ in _NUMERIC and (label == "REPEATED") != (new_label == "REPEATED"):
            found.append(("FIELD_NUMERIC_LABEL_CHANGED", where))
        if label != "REQUIRED" and new_label == "REQUIRED":
            found.append(("REQUIRED_FIELD_ADDED", where))
        if oneof is None and new_oneof is not None:
            moved_to_oneof[new_oneof] = moved_to_oneof.get(new_oneof, 0) + 1
            if any(o[3] == new_oneof for n, o in before.items() if n != number):
                found.append(("FIELD_MOVED_TO_EXISTING_ONEOF", where))
    for oneof, count in moved_to_oneof.items():
        if count > 1:
            found.append(("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{path}/{oneof}"))
    for number, (_, _, label, _) in after.items():
        if number not in before and label == "REQUIRED":
            found.append(("REQUIRED_FIELD_ADDED", f"{path}/{number}"))
