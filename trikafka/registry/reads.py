"""The registry's read operations (GET routes and compatibility checks), Confluent's answers.

A mixin of :class:`~trikafka.registry.service.SchemaRegistry`: ``self.state`` is the state
caught up with ``_schemas``; ``self.parsed`` parses with references.
"""

from __future__ import annotations

import base64
from typing import Any

from trikafka.registry import errors
from trikafka.registry.compatibility import check_compatibility
from trikafka.registry.schemas import SCHEMA_TYPES, SchemaSpec
from trikafka.registry.state import RegistryState, StoredSchema

__all__ = ["RegistryReads", "parse_version", "schema_entity"]


def parse_version(text: Any) -> int | None:
    """A version in a path: an integer in [1, 2^31-1], or None for ``latest``/``-1``; else 42202."""
    if text in ("latest", "-1", -1):
        return None
    try:
        version = int(str(text), 10)
    except ValueError:
        raise errors.invalid_version(text) from None
    if not 1 <= version < 2**31 or str(text).strip() != str(text):
        raise errors.invalid_version(text)
    return version


def _page(items: list[Any], offset: int, limit: int) -> list[Any]:
    items = items[max(offset, 0):]
    return items[:limit] if limit > 0 else items


class RegistryReads:
    """The reads; what they need of the registry is declared here, defined by
    :class:`~trikafka.registry.service.SchemaRegistry`."""

    @property
    def state(self) -> RegistryState:  # pragma: no cover - SchemaRegistry's
        raise NotImplementedError

    def parsed(self, spec: SchemaSpec, state: RegistryState) -> Any:  # pragma: no cover - SchemaRegistry's
        raise NotImplementedError

    def level(self, subject: str | None) -> str:  # pragma: no cover - SchemaRegistry's
        raise NotImplementedError

    def _spec(self, body: Any) -> SchemaSpec:  # pragma: no cover - SchemaRegistry's
        raise NotImplementedError

    def subjects(
        self, *, prefix: str = "", deleted: bool = False, deleted_only: bool = False, offset: int = 0, limit: int = -1
    ) -> list[str]:
        state = self.state
        out = []
        for subject in sorted(state.versions):
            live = state.subject_versions(subject)
            every = state.subject_versions(subject, deleted=True)
            if not subject.startswith(prefix) or not every:
                continue
            if deleted_only:
                if len(live) < len(every):
                    out.append(subject)
            elif live or deleted:
                out.append(subject)
        return _page(out, offset, limit)

    def _subject(self, subject: str, deleted: bool = False) -> list[StoredSchema]:
        versions = self.state.subject_versions(subject, deleted=deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        return versions

    def versions(
        self, subject: str, *, deleted: bool = False, deleted_only: bool = False, offset: int = 0, limit: int = -1
    ) -> list[int]:
        versions = self._subject(subject, deleted=deleted or deleted_only)
        found = [s.version for s in versions if not deleted_only or s.deleted]
        return _page(found, offset, limit)

    def version(self, subject: str, version: Any, *, deleted: bool = False) -> StoredSchema:
        number = parse_version(version)
        versions = self.state.subject_versions(subject, deleted=True)
        if not versions:
            raise errors.subject_not_found(subject)
        if number is None:
            live = [s for s in versions if deleted or not s.deleted]
            if not live:
                raise errors.subject_not_found(subject)
            return live[-1]
        found = next((s for s in versions if s.version == number), None)
        if found is None or (found.deleted and not deleted):
            raise errors.version_not_found(version)
        return found

    def schema_by_id(self, schema_id: Any, subject: str | None = None, fmt: str | None = None) -> dict[str, Any]:
        found = self._by_id(schema_id, subject)
        return schema_entity(found, fmt)

    def _by_id(self, schema_id: Any, subject: str | None = None) -> StoredSchema:
        try:
            number = int(str(schema_id), 10)
        except ValueError:
            raise errors.schema_not_found(f"{schema_id}") from None
        found = self.state.by_id(number, subject) or self.state.by_id(number)
        if not found:
            raise errors.RegistryError(404, 40403, f"Schema {schema_id} not found")
        return found[0]

    def schema_by_guid(self, guid: str, fmt: str | None = None) -> dict[str, Any]:
        found = self.state.by_guid(guid)
        if not found:
            raise errors.RegistryError(404, 40403, f"Schema {guid} not found")
        return schema_entity(found[0], fmt)

    def id_versions(self, schema_id: Any, *, subject: str | None = None, deleted: bool = False) -> list[dict[str, Any]]:
        number = self._by_id(schema_id).id
        return [
            {"subject": s.subject, "version": s.version}
            for s in self.state.by_id(number, subject)
            if deleted or not s.deleted
        ]

    def id_subjects(self, schema_id: Any, *, subject: str | None = None, deleted: bool = False) -> list[str]:
        return sorted({v["subject"] for v in self.id_versions(schema_id, subject=subject, deleted=deleted)})

    def referenced_by(self, subject: str, version: Any) -> list[int]:
        stored = self.version(subject, version, deleted=True)
        return sorted({s.id for s in self.state.referenced_by(subject, stored.version)})

    def latest_with_metadata(self, subject: str, wanted: dict[str, str], *, deleted: bool = False) -> StoredSchema:
        versions = self._subject(subject, deleted=deleted)
        for stored in reversed(versions):
            properties = (stored.spec.metadata or {}).get("properties") or {}
            if all(properties.get(k) == v for k, v in wanted.items()):
                return stored
        raise errors.RegistryError(404, 40403, f"Schema with metadata {wanted} not found in subject '{subject}'")

    def check(self, subject: str, version: Any, body: Any, *, verbose: bool = False) -> dict[str, Any]:
        """POST /compatibility/subjects/{subject}/versions[/{version}]; ``version`` None is
        every version the subject's level checks against."""
        spec = self._spec(body)
        state = self.state
        parsed = self.parsed(spec, state)
        level = self.level(subject)
        if version is None:  # what registering would be checked against
            targets = state.subject_versions(subject)
        else:  # that one version, in the level's direction(s)
            level = level.replace("_TRANSITIVE", "")
            try:
                targets = [self.version(subject, version)]
            except errors.RegistryError as exc:
                if exc.error_code != 40401 or parse_version(version) is not None:
                    raise
                targets = []  # "latest" of a subject with no version: compatible
        previous = [(s.version, s.spec.schema_type, self.parsed(s.spec, state)) for s in targets]
        reasons = check_compatibility(level, (spec.schema_type, parsed), previous)
        answer: dict[str, Any] = {"is_compatible": not reasons}
        if verbose:
            answer["messages"] = reasons
        return answer

    @staticmethod
    def schema_types() -> list[str]:
        return sorted(SCHEMA_TYPES, key=("JSON", "PROTOBUF", "AVRO").index)


def schema_entity(stored: StoredSchema, fmt: str | None, *, with_subject: bool = False) -> dict[str, Any]:
    """The schema as answered: without subject, version and id for GET /schemas/ids/{id};
    ``format=serialized`` turns a Protobuf schema into its base64 ``FileDescriptorProto``."""
    out = stored.as_json(with_subject=with_subject)
    if not with_subject:
        del out["id"]
    if fmt == "serialized" and stored.spec.schema_type == "PROTOBUF":
        from trikafka.registry.protobuf import descriptor_of

        proto = descriptor_of(stored.spec.schema, "schema.proto")
        out["schema"] = base64.b64encode(proto.SerializeToString()).decode()
    return out
