"""One schema as the registry handles it: its type, text, references; parsing, the kept
(canonical) text, the GUID, and the per-type compatibility check.

A schema's type is AVRO (the default, as in Confluent), JSON or PROTOBUF. Parsing takes the
texts of its references (resolved by the caller across subjects, transitively) and raises
:func:`~trikafka.registry.errors.invalid_schema` (42201) for anything unusable. The parsers
(fastavro, jsonschema, proto-schema-parser + protobuf) are imported on first use: the
``registry`` extra of trikafka brings them.

The GUID is Confluent's: the MD5 of the schema text, each reference's name, subject and
version (4 bytes, big-endian), then the metadata and rule set when present, read as a UUID.
"""

from __future__ import annotations

import hashlib
import json
import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from trikafka.registry.errors import bad_request, invalid_schema

__all__ = ["SCHEMA_TYPES", "Reference", "SchemaSpec", "canonical_text", "check_pair", "parse_spec", "schema_guid"]

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


@attrs.frozen
class Reference:
    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@attrs.frozen
class SchemaSpec:
    """What a registration carries (a request body, or a stored SCHEMA record)."""

    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    metadata: Any = None
    rule_set: Any = None

    @classmethod
    def from_json(cls, body: Any) -> SchemaSpec:
        """From a request body; anything malformed is a 422 naming what."""
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        schema = body.get("schema")
        if not isinstance(schema, str) or not schema.strip():
            raise invalid_schema("'schema' must be a non-empty string")
        schema_type = body.get("schemaType") or "AVRO"
        if schema_type not in SCHEMA_TYPES:
            raise invalid_schema(f"schemaType {schema_type!r}: allowed values are {', '.join(SCHEMA_TYPES)}")
        refs = body.get("references") or []
        if not isinstance(refs, list):
            raise bad_request("'references' must be a list")
        references = []
        for ref in refs:
            if not isinstance(ref, dict):
                raise bad_request("each reference is an object with name, subject and version")
            name, subject, version = ref.get("name"), ref.get("subject"), ref.get("version")
            if not isinstance(name, str) or not isinstance(subject, str) or not name or not subject:
                raise bad_request("a reference's name and subject must be non-empty strings")
            if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version < 2**31:
                raise bad_request(f"reference {name!r}: version must be an integer in [1, 2^31-1]")
            references.append(Reference(name, subject, version))
        for key in ("metadata", "ruleSet"):
            if body.get(key) is not None and not isinstance(body.get(key), dict):
                raise bad_request(f"'{key}' must be an object")
        return cls(schema, schema_type, tuple(references), body.get("metadata"), body.get("ruleSet"))

    def identity(self) -> tuple[Any, ...]:
        """What makes two registrations the same schema."""
        return (self.schema_type, self.schema, self.references, _dump(self.metadata), _dump(self.rule_set))


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def canonical_text(schema_type: str, text: str) -> str:
    """The text the registry keeps and answers with (compact JSON for AVRO and JSON)."""
    if schema_type == "PROTOBUF":
        return text.strip()
    try:
        return json.dumps(json.loads(text), separators=(",", ":"))
    except (ValueError, RecursionError) as exc:
        raise invalid_schema(f"not JSON: {exc}") from None


def _parser(schema_type: str) -> Callable[[str, Mapping[str, str]], Any]:
    if schema_type == "AVRO":
        from trikafka.registry.avro import parse_avro

        return parse_avro
    if schema_type == "JSON":
        from trikafka.registry.json_schema import parse_json

        return parse_json
    from trikafka.registry.protobuf import parse_protobuf

    return parse_protobuf


def parse_spec(spec: SchemaSpec, references: Mapping[str, str]) -> Any:
    """The parsed form of ``spec`` for :func:`check_pair`, or 42201. ``references`` maps
    every reference name reachable from ``spec`` to the referenced text, in order."""
    try:
        return _parser(spec.schema_type)(spec.schema, references)
    except ImportError as exc:
        raise invalid_schema(
            f"{spec.schema_type} schemas need the registry extra (pip install 'trikafka[registry]'): {exc}"
        ) from None
    except RecursionError:
        raise invalid_schema("nested too deeply") from None


def check_pair(schema_type: str, reader: Any, writer: Any) -> list[str]:
    """Problems when ``reader`` reads data written with ``writer`` (empty: compatible)."""
    if schema_type == "AVRO":
        from trikafka.registry.avro import check_avro

        return check_avro(reader, writer)
    if schema_type == "JSON":
        from trikafka.registry.json_schema import check_json

        return check_json(reader, writer)
    from trikafka.registry.protobuf import check_protobuf

    return check_protobuf(reader, writer)


def schema_guid(spec: SchemaSpec) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    digest.update(spec.schema.encode())
    for ref in spec.references:
        digest.update(ref.name.encode())
        digest.update(ref.subject.encode())
        digest.update(struct.pack(">i", ref.version))
    metadata = spec.metadata
    if metadata is not None:
        digest.update(b"\x01")
        for key, values in sorted((metadata.get("tags") or {}).items()):
            digest.update(str(key).encode())
            for value in sorted(values or ()):
                digest.update(str(value).encode())
        for key, value in sorted((metadata.get("properties") or {}).items()):
            digest.update(str(key).encode())
            digest.update(str(value).encode())
        for value in sorted(metadata.get("sensitive") or ()):
            digest.update(str(value).encode())
    if spec.rule_set is not None:
        digest.update(b"\x01")
        digest.update(json.dumps(spec.rule_set, sort_keys=True).encode())
    return str(uuid.UUID(bytes=digest.digest()))
