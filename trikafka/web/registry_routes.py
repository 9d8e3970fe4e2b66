"""The Schema Registry's route table: (method, path pattern, handler), Confluent's paths.

A handler takes the registry and a :class:`Request` (path parameters, query, JSON body) and
returns the JSON answer, or bytes for the routes that answer a schema's raw text.

:func:`access` says what each route needs from the broker's ACLs, after Confluent's Schema
Registry operations (SUBJECT_READ, SUBJECT_WRITE, …) mapped onto Kafka's resources: a
subject is a topic resource of the same name (so a PREFIXED ACL on ``orders`` covers
``orders-key`` and ``orders-value``), the global settings are the cluster resource.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from trikafka.registry import SchemaRegistry
from trikafka.registry.errors import bad_request
from trikafka.registry.reads import schema_entity

__all__ = ["ROUTES", "Access", "Request", "access"]


@attrs.frozen
class Request:
    params: dict[str, str]
    query: dict[str, list[str]]
    body: Any

    def text(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else default

    def flag(self, name: str) -> bool:
        """Confluent's boolean parameters: ``true`` in any case is true, anything else false."""
        return (self.text(name) or "").strip().lower() == "true"

    def number(self, name: str, default: int) -> int:
        value = self.text(name)
        if value is None or value == "":
            return default
        try:
            return int(value)
        except ValueError:
            raise bad_request(f"query parameter {name}={value!r}: an integer is required") from None


Handler = Callable[[SchemaRegistry, Request], Any]


def _subjects(r: SchemaRegistry, q: Request) -> Any:
    return r.subjects(
        prefix=q.text("subjectPrefix", "") or "", deleted=q.flag("deleted"), deleted_only=q.flag("deleted_only"),
        offset=q.number("offset", 0), limit=q.number("limit", -1),
    )


def _versions(r: SchemaRegistry, q: Request) -> Any:
    return r.versions(
        q.params["subject"], deleted=q.flag("deleted"), deleted_only=q.flag("deleted_only"),
        offset=q.number("offset", 0), limit=q.number("limit", -1),
    )


def _version(r: SchemaRegistry, q: Request) -> Any:
    stored = r.version(q.params["subject"], q.params["version"], deleted=q.flag("deleted"))
    return schema_entity(stored, q.text("format"), with_subject=True)


def _version_schema(r: SchemaRegistry, q: Request) -> Any:
    return r.version(q.params["subject"], q.params["version"], deleted=q.flag("deleted")).spec.schema.encode()


def _id_schema(r: SchemaRegistry, q: Request) -> Any:
    return r.schema_by_id(q.params["id"], q.text("subject"))["schema"].encode()


def _metadata(r: SchemaRegistry, q: Request) -> Any:
    keys, values = q.query.get("key", []), q.query.get("value", [])
    if len(keys) != len(values):
        raise bad_request("key and value parameters come in pairs")
    stored = r.latest_with_metadata(
        q.params["subject"], dict(zip(keys, values, strict=True)), deleted=q.flag("deleted")
    )
    return schema_entity(stored, q.text("format"), with_subject=True)


def _check(r: SchemaRegistry, q: Request) -> Any:
    return r.check(q.params["subject"], q.params.get("version"), q.body, verbose=q.flag("verbose"))


def _config(r: SchemaRegistry, q: Request) -> Any:
    return r.get_config(q.params.get("subject"), q.flag("defaultToGlobal"))


def _mode(r: SchemaRegistry, q: Request) -> Any:
    return r.get_mode(q.params.get("subject"), q.flag("defaultToGlobal"))


S = "{subject}"
V = "{version}"
ROUTES: tuple[tuple[str, tuple[str, ...], Handler], ...] = (
    ("GET", (), lambda r, q: {}),
    ("GET", ("schemas", "types"), lambda r, q: r.schema_types()),
    (
        "GET",
        ("schemas", "ids", "{id}"),
        lambda r, q: r.schema_by_id(q.params["id"], q.text("subject"), q.text("format")),
    ),
    ("GET", ("schemas", "ids", "{id}", "schema"), _id_schema),
    (
        "GET",
        ("schemas", "ids", "{id}", "versions"),
        lambda r, q: r.id_versions(q.params["id"], subject=q.text("subject"), deleted=q.flag("deleted")),
    ),
    (
        "GET",
        ("schemas", "ids", "{id}", "subjects"),
        lambda r, q: r.id_subjects(q.params["id"], subject=q.text("subject"), deleted=q.flag("deleted")),
    ),
    ("GET", ("schemas", "guids", "{guid}"), lambda r, q: r.schema_by_guid(q.params["guid"], q.text("format"))),
    ("GET", ("subjects",), _subjects),
    ("POST", ("subjects", S), lambda r, q: r.lookup(q.params["subject"], q.body, q.flag("deleted"))),
    ("DELETE", ("subjects", S), lambda r, q: r.delete_subject(q.params["subject"], q.flag("permanent"))),
    ("GET", ("subjects", S, "versions"), _versions),
    ("POST", ("subjects", S, "versions"), lambda r, q: r.register(q.params["subject"], q.body)),
    ("GET", ("subjects", S, "versions", V), _version),
    (
        "DELETE",
        ("subjects", S, "versions", V),
        lambda r, q: r.delete_version(q.params["subject"], q.params["version"], q.flag("permanent")),
    ),
    ("GET", ("subjects", S, "versions", V, "schema"), _version_schema),
    (
        "GET",
        ("subjects", S, "versions", V, "referencedby"),
        lambda r, q: r.referenced_by(q.params["subject"], q.params["version"]),
    ),
    ("GET", ("subjects", S, "metadata"), _metadata),
    ("POST", ("compatibility", "subjects", S, "versions"), _check),
    ("POST", ("compatibility", "subjects", S, "versions", V), _check),
    ("GET", ("config",), _config),
    ("PUT", ("config",), lambda r, q: r.set_config(None, q.body)),
    ("DELETE", ("config",), lambda r, q: r.delete_config(None)),
    ("GET", ("config", S), _config),
    ("PUT", ("config", S), lambda r, q: r.set_config(q.params["subject"], q.body)),
    ("DELETE", ("config", S), lambda r, q: r.delete_config(q.params["subject"])),
    ("GET", ("mode",), _mode),
    ("PUT", ("mode",), lambda r, q: r.set_mode(None, q.body, q.flag("force"))),
    ("GET", ("mode", S), _mode),
    ("PUT", ("mode", S), lambda r, q: r.set_mode(q.params["subject"], q.body, q.flag("force"))),
    ("DELETE", ("mode", S), lambda r, q: r.delete_mode(q.params["subject"])),
    ("GET", ("contexts",), lambda r, q: ["."]),
)


#: What a route needs: (operation, on what). "subject": that operation on the topic resource
#: named like the subject; "cluster": on the cluster resource; "schema": READ on at least one
#: subject the schema id is registered under (Confluent's SCHEMA_READ); "listed": the answer
#: (a list of subjects) keeps only the subjects the caller may READ; None: any caller.
Access = tuple[str, str] | None


def access(method: str, pattern: tuple[str, ...]) -> Access:
    """What ``method`` on ``pattern`` (a row of :data:`ROUTES`) needs from the ACLs."""
    head = pattern[0] if pattern else ""
    if head == "subjects" and len(pattern) == 1:
        return ("READ", "listed")
    if head == "subjects":
        if method == "DELETE":
            return ("DELETE", "subject")
        if method == "POST" and len(pattern) == 3:  # register a version
            return ("WRITE", "subject")
        return ("READ", "subject")  # reads, and POST /subjects/{s}: lookup
    if head == "compatibility":
        return ("WRITE", "subject")
    if head in ("config", "mode"):
        operation = "DESCRIBE_CONFIGS" if method == "GET" else "ALTER_CONFIGS"
        return (operation, "subject" if len(pattern) == 2 else "cluster")
    if head == "schemas" and len(pattern) >= 3 and pattern[1] in ("ids", "guids"):
        return ("READ", "schema")
    return None
