"""The registry's state as the fold of the ``_schemas`` records, with Confluent's shapes.

Keys and values are the JSON documents Confluent Schema Registry writes to its
``_schemas`` topic, so a registry reading an existing ``_schemas`` agrees with it, and ours
can be read by theirs:

==================  ==================================================  =============================
keytype             key                                                 value (null: a tombstone)
==================  ==================================================  =============================
SCHEMA              ``{"keytype","subject","version","magic":1}``       ``{"subject","version","id",
                                                                        "schemaType","references",
                                                                        "metadata","ruleSet",
                                                                        "schema","deleted"}``
CONFIG              ``{"keytype","subject"(null: global),"magic":0}``   ``{"compatibilityLevel",...}``
MODE                ``{"keytype","subject","magic":0}``                 ``{"mode"}``
DELETE_SUBJECT      ``{"keytype","subject","magic":0}``                 ``{"subject","version"}``: versions
                                                                        up to it are soft-deleted
CLEAR_SUBJECT       ``{"keytype","subject","magic":0}``                 ``{"subject"}``: all versions gone
NOOP                ``{"keytype","magic":0}``                           ignored
==================  ==================================================  =============================

A soft-deleted version is a SCHEMA record with ``"deleted": true``; a permanent deletion a
tombstone of its key. Other key types (ASSOC, CONTEXT, ...) are read and ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from trikafka.registry.schemas import Reference, SchemaSpec, schema_guid

__all__ = ["RegistryState", "StoredSchema", "config_key", "mode_key", "schema_key", "schema_value"]


@attrs.define
class StoredSchema:
    subject: str
    version: int
    id: int
    spec: SchemaSpec
    deleted: bool = False
    guid: str = ""

    def as_json(self, *, with_subject: bool = True) -> dict[str, Any]:
        """The entity Confluent answers with for a subject's version."""
        out: dict[str, Any] = {}
        if with_subject:
            out.update(subject=self.subject, version=self.version)
        out.update(id=self.id, guid=self.guid)
        if self.spec.schema_type != "AVRO":
            out["schemaType"] = self.spec.schema_type
        if self.spec.references:
            out["references"] = [r.as_json() for r in self.spec.references]
        if self.spec.metadata is not None:
            out["metadata"] = self.spec.metadata
        if self.spec.rule_set is not None:
            out["ruleSet"] = self.spec.rule_set
        out["schema"] = self.spec.schema
        return out


def schema_key(subject: str, version: int) -> dict[str, Any]:
    return {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}


def config_key(subject: str | None) -> dict[str, Any]:
    return {"keytype": "CONFIG", "subject": subject, "magic": 0}


def mode_key(subject: str | None) -> dict[str, Any]:
    return {"keytype": "MODE", "subject": subject, "magic": 0}


def schema_value(stored: StoredSchema) -> dict[str, Any]:
    value: dict[str, Any] = {"subject": stored.subject, "version": stored.version, "id": stored.id}
    if stored.spec.schema_type != "AVRO":
        value["schemaType"] = stored.spec.schema_type
    if stored.spec.references:
        value["references"] = [r.as_json() for r in stored.spec.references]
    if stored.spec.metadata is not None:
        value["metadata"] = stored.spec.metadata
    if stored.spec.rule_set is not None:
        value["ruleSet"] = stored.spec.rule_set
    value["schema"] = stored.spec.schema
    value["deleted"] = stored.deleted
    return value


def _spec_from_value(value: dict[str, Any]) -> SchemaSpec:
    refs = tuple(
        Reference(str(r.get("name")), str(r.get("subject")), int(r.get("version", 0)))
        for r in value.get("references") or ()
        if isinstance(r, dict)
    )
    return SchemaSpec(
        str(value.get("schema", "")),
        value.get("schemaType") or "AVRO",
        refs,
        value.get("metadata"),
        value.get("ruleSet"),
    )


class RegistryState:
    """Subjects → versions, ids, configs and modes; ``apply`` one record at a time."""

    def __init__(self) -> None:
        self.versions: dict[str, dict[int, StoredSchema]] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        #: id → the (subject, version) pairs holding it (Produce validation looks ids up).
        self._ids: dict[int, set[tuple[str, int]]] = {}

    def _unindex(self, subject: str, version: int) -> None:
        stored = self.versions.get(subject, {}).get(version)
        if stored is not None:
            holders = self._ids.get(stored.id, set())
            holders.discard((subject, version))
            if not holders:
                self._ids.pop(stored.id, None)

    # --- the fold --------------------------------------------------------------------

    def apply(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        """One record; a record of a shape not understood is skipped (ValueError for the
        caller to log)."""
        keytype = key.get("keytype")
        subject = key.get("subject")
        if keytype == "SCHEMA":
            version = key.get("version")
            if not isinstance(subject, str) or not isinstance(version, int):
                raise ValueError(f"SCHEMA key without subject and version: {key}")
            self._unindex(subject, version)
            if value is None:
                self.versions.get(subject, {}).pop(version, None)
                if not self.versions.get(subject, True):
                    del self.versions[subject]
                return
            spec = _spec_from_value(value)
            stored = StoredSchema(
                subject, version, int(value["id"]), spec, bool(value.get("deleted")), schema_guid(spec)
            )
            self.versions.setdefault(subject, {})[version] = stored
            self._ids.setdefault(stored.id, set()).add((subject, version))
            self.max_id = max(self.max_id, stored.id)
        elif keytype == "CONFIG":
            if value is None:
                self.configs.pop(subject, None)
            else:
                self.configs[subject] = {k: v for k, v in value.items() if k != "subject"}
        elif keytype == "MODE":
            if value is None:
                self.modes.pop(subject, None)
            else:
                self.modes[subject] = str(value.get("mode"))
        elif keytype == "DELETE_SUBJECT" and value is not None:
            upto = int(value.get("version", 0))
            for version, stored in self.versions.get(str(value.get("subject", subject)), {}).items():
                if version <= upto:
                    stored.deleted = True
        elif keytype == "CLEAR_SUBJECT" and value is not None:
            cleared = str(value.get("subject", subject))
            for version in list(self.versions.get(cleared, {})):
                self._unindex(cleared, version)
            self.versions.pop(cleared, None)

    # --- reads -------------------------------------------------------------------------

    def subject_versions(self, subject: str, *, deleted: bool = False) -> list[StoredSchema]:
        found = self.versions.get(subject, {})
        return [found[v] for v in sorted(found) if deleted or not found[v].deleted]

    def all_stored(self) -> Iterator[StoredSchema]:
        for subject in sorted(self.versions):
            yield from self.subject_versions(subject, deleted=True)

    def by_id(self, schema_id: int, subject: str | None = None) -> list[StoredSchema]:
        return [
            self.versions[s][v] for s, v in sorted(self._ids.get(schema_id, ()))
            if subject is None or s == subject
        ]

    def by_guid(self, guid: str) -> list[StoredSchema]:
        return [s for s in self.all_stored() if s.guid == guid]

    def id_for(self, spec: SchemaSpec) -> int | None:
        """The id this exact schema already has under any subject (ids are shared)."""
        identity = spec.identity()
        return next((s.id for s in self.all_stored() if s.spec.identity() == identity), None)

    def referenced_by(self, subject: str, version: int) -> list[StoredSchema]:
        return [
            s for s in self.all_stored()
            if not s.deleted and any(r.subject == subject and r.version == version for r in s.spec.references)
        ]
