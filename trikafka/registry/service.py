"""The registry's operations, Confluent's semantics, over the ``_schemas`` store.

Every method catches the state up with the log first, then answers or appends records; they
are synchronous (no await between reading the state and appending), so on the broker's one
Trio loop two registrations never interleave — the role Confluent's single leader plays.
Answers are the JSON documents of Confluent's REST API; refusals are
:class:`~trikafka.registry.errors.RegistryError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trikafka.registry import errors
from trikafka.registry.compatibility import (
    DEFAULT_LEVEL,
    DEFAULT_MODE,
    check_compatibility,
    level_of,
    mode_of,
)
from trikafka.registry.reads import RegistryReads, parse_version
from trikafka.registry.schemas import SchemaSpec, canonical_text, parse_spec
from trikafka.registry.state import (
    RegistryState,
    StoredSchema,
    config_key,
    mode_key,
    schema_key,
    schema_value,
)
from trikafka.registry.store import SchemasLog, SchemasStore

__all__ = ["SchemaRegistry"]

_PARSED_CACHE = 1024
#: What ``PUT /config`` keeps besides the level (Confluent's ConfigUpdateRequest): stored and
#: answered; only the level is acted on.
_CONFIG_KEYS = frozenset({
    "alias", "normalize", "validateFields", "validateRules", "compatibilityGroup", "compatibilityPolicy",
    "defaultMetadata", "overrideMetadata", "defaultRuleSet", "overrideRuleSet",
})


class SchemaRegistry(RegistryReads):
    """See the module docstring; ``log_for(create)`` is partition 0 of ``_schemas``."""

    def __init__(self, log_for: Callable[[bool], SchemasLog | None], now_ms: Callable[[], float]) -> None:
        self.store = SchemasStore(log_for, now_ms)
        self._parsed: dict[tuple[Any, ...], Any] = {}

    @property
    def state(self) -> RegistryState:
        return self.store.sync()

    # --- parsing with references ---------------------------------------------------------

    def _reference_texts(
        self, spec: SchemaSpec, state: RegistryState, seen: frozenset[tuple[str, int]] = frozenset()
    ) -> dict[str, str]:
        texts: dict[str, str] = {}
        for ref in spec.references:
            found = state.versions.get(ref.subject, {}).get(ref.version)
            if found is None:
                raise errors.invalid_schema(
                    f"reference {ref.name!r}: subject {ref.subject!r} version {ref.version} not found"
                )
            if (ref.subject, ref.version) in seen:
                raise errors.invalid_schema(f"reference {ref.name!r} makes a cycle")
            texts.update(self._reference_texts(found.spec, state, seen | {(ref.subject, ref.version)}))
            texts[ref.name] = found.spec.schema
        return texts

    def parsed(self, spec: SchemaSpec, state: RegistryState) -> Any:
        key = spec.identity()
        if key not in self._parsed:
            if len(self._parsed) >= _PARSED_CACHE:
                self._parsed.clear()
            self._parsed[key] = parse_spec(spec, self._reference_texts(spec, state))
        return self._parsed[key]

    # --- configuration -----------------------------------------------------------------

    def level(self, subject: str | None) -> str:
        state = self.state
        for scope in (subject, None):
            level = state.configs.get(scope, {}).get("compatibilityLevel")
            if level:
                return str(level)
        return DEFAULT_LEVEL

    def mode(self, subject: str | None) -> str:
        state = self.state
        return state.modes.get(subject) or state.modes.get(None) or DEFAULT_MODE

    def get_config(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        state = self.state
        if subject is not None and subject in state.configs:
            return dict(state.configs[subject])
        if subject is not None and not default_to_global:
            raise errors.subject_config_not_found(subject)
        return dict(state.configs.get(None) or {"compatibilityLevel": DEFAULT_LEVEL})

    def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        value = {k: v for k, v in body.items() if k in _CONFIG_KEYS}  # Confluent ignores others
        if "compatibility" in body or "compatibilityLevel" in body:
            value["compatibilityLevel"] = level_of(body.get("compatibility", body.get("compatibilityLevel")))
        current = self.state.configs.get(subject, {})
        merged = {**current, **value}
        self.store.write([(config_key(subject), {**merged, "subject": subject} if subject else merged)])
        answer = {k: v for k, v in merged.items() if k != "compatibilityLevel"}
        if "compatibilityLevel" in merged:
            answer["compatibility"] = merged["compatibilityLevel"]
        return answer

    def delete_config(self, subject: str | None) -> dict[str, Any]:
        state = self.state
        if subject is not None and subject not in state.configs:
            raise errors.subject_config_not_found(subject)
        previous = state.configs.get(subject) or {"compatibilityLevel": DEFAULT_LEVEL}
        if subject in state.configs:
            self.store.write([(config_key(subject), None)])
        return {"compatibilityLevel": previous.get("compatibilityLevel", DEFAULT_LEVEL)}

    def get_mode(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        state = self.state
        if subject is not None and subject not in state.modes and not default_to_global:
            raise errors.subject_mode_not_found(subject)
        return {"mode": self.mode(subject)}

    def set_mode(self, subject: str | None, body: Any, force: bool = False) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        mode = mode_of(body.get("mode"))
        state = self.state
        if mode == "IMPORT" and not force:
            has = state.subject_versions(subject) if subject else any(state.subject_versions(s) for s in state.versions)
            if has:
                raise errors.operation_not_permitted("Cannot import since found existing subjects (use force=true)")
        self.store.write([(mode_key(subject), {"subject": subject, "mode": mode} if subject else {"mode": mode})])
        return {"mode": mode}

    def delete_mode(self, subject: str) -> dict[str, Any]:
        state = self.state
        if subject not in state.modes:
            raise errors.subject_mode_not_found(subject)
        previous = state.modes[subject]
        self.store.write([(mode_key(subject), None)])
        return {"mode": previous}

    def _writable(self, subject: str) -> str:
        mode = self.mode(subject)
        if mode == "READONLY":
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
        return mode

    # --- schemas -------------------------------------------------------------------------

    def _spec(self, body: Any) -> SchemaSpec:
        spec = SchemaSpec.from_json(body)
        return SchemaSpec(
            canonical_text(spec.schema_type, spec.schema),
            spec.schema_type,
            spec.references,
            spec.metadata,
            spec.rule_set,
        )

    def register(self, subject: str, body: Any) -> dict[str, Any]:
        """POST /subjects/{subject}/versions: the id of ``body``'s schema under ``subject``."""
        mode = self._writable(subject)
        spec = self._spec(body)
        state = self.state
        parsed = self.parsed(spec, state)
        versions = state.subject_versions(subject)
        for stored in versions:
            if stored.spec.identity() == spec.identity():
                return self._registered(stored)
        requested_id, requested_version = body.get("id"), body.get("version")
        if mode != "IMPORT":
            if requested_id is not None and requested_id != state.id_for(spec):
                raise errors.operation_not_permitted("Overriding the schema id is permitted in IMPORT mode only")
            previous = [(s.version, s.spec.schema_type, self.parsed(s.spec, state)) for s in versions]
            reasons = check_compatibility(self.level(subject), (spec.schema_type, parsed), previous)
            if reasons:
                raise errors.incompatible_schema(subject, reasons)
        schema_id = self._new_id(spec, state, requested_id)
        everything = state.subject_versions(subject, deleted=True)
        version = max((s.version for s in everything), default=0) + 1
        if requested_version is not None and mode == "IMPORT":
            if isinstance(requested_version, bool) or not isinstance(requested_version, int) or requested_version < 1:
                raise errors.invalid_version(requested_version)
            version = requested_version
            taken = state.versions.get(subject, {}).get(version)
            if taken is not None and taken.spec.identity() != spec.identity():
                raise errors.operation_not_permitted(f"Version {version} of subject {subject} holds another schema")
        stored = StoredSchema(subject, version, schema_id, spec)
        state = self.store.write([(schema_key(subject, version), schema_value(stored))])
        return self._registered(state.versions[subject][version])

    def _new_id(self, spec: SchemaSpec, state: RegistryState, requested: Any) -> int:
        if requested is None:
            existing = state.id_for(spec)
            return existing if existing is not None else state.max_id + 1
        if isinstance(requested, bool) or not isinstance(requested, int) or not 1 <= requested < 2**31:
            raise errors.bad_request(f"id {requested!r}: an integer in [1, 2^31-1]")
        taken = state.by_id(requested)
        if taken and taken[0].spec.identity() != spec.identity():
            raise errors.operation_not_permitted(f"Schema id {requested} is already used by another schema")
        return requested

    @staticmethod
    def _registered(stored: StoredSchema) -> dict[str, Any]:
        return stored.as_json()

    def lookup(self, subject: str, body: Any, deleted: bool = False) -> dict[str, Any]:
        """POST /subjects/{subject}: the version of ``subject`` holding ``body``'s schema."""
        spec = self._spec(body)
        state = self.state
        versions = state.subject_versions(subject, deleted=deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        self.parsed(spec, state)  # an invalid schema is 42201, not "not found"
        for stored in reversed(versions):
            if stored.spec.identity() == spec.identity():
                return stored.as_json()
        raise errors.schema_not_found()

    # --- deletion ------------------------------------------------------------------------

    def delete_version(self, subject: str, version: Any, permanent: bool = False) -> int:
        """DELETE /subjects/{subject}/versions/{version}: soft, then ``permanent``."""
        self._writable(subject)
        number = parse_version(version)
        state = self.state
        every = state.subject_versions(subject, deleted=True)
        if not every:
            raise errors.subject_not_found(subject)
        if number is None:
            live = [s for s in every if not s.deleted]
            if not live:
                raise errors.subject_not_found(subject)
            stored = live[-1]
        else:
            found = next((s for s in every if s.version == number), None)
            if found is None:
                raise errors.version_not_found(version)
            stored = found
        if state.referenced_by(subject, stored.version):
            raise errors.reference_exists(f"{subject} version {stored.version}")
        if permanent:
            if not stored.deleted:
                raise errors.version_not_soft_deleted(subject, stored.version)
            records: list[tuple[dict[str, Any], dict[str, Any] | None]] = [(schema_key(subject, stored.version), None)]
            if len(every) == 1:
                records += self._subject_settings_gone(subject, state)
            self.store.write(records)
        else:
            if stored.deleted:
                raise errors.RegistryError(
                    404,
                    40406,
                    f"Subject '{subject}' Version {stored.version} was soft deleted. Set permanent=true to "
                    f"delete permanently",
                )
            gone = StoredSchema(subject, stored.version, stored.id, stored.spec, deleted=True)
            self.store.write([(schema_key(subject, stored.version), schema_value(gone))])
        return stored.version

    @staticmethod
    def _subject_settings_gone(subject: str, state: RegistryState) -> list[tuple[dict[str, Any], None]]:
        records: list[tuple[dict[str, Any], None]] = []
        if subject in state.modes:
            records.append((mode_key(subject), None))
        if subject in state.configs:
            records.append((config_key(subject), None))
        return records

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """DELETE /subjects/{subject}: soft (a DELETE_SUBJECT record), then ``permanent``
        (a tombstone per version). The versions deleted."""
        self._writable(subject)
        state = self.state
        every = state.subject_versions(subject, deleted=True)
        live = [s for s in every if not s.deleted]
        if not every:
            raise errors.subject_not_found(subject)
        targets = every if permanent else live
        for stored in targets:
            if any(other.subject != subject for other in state.referenced_by(subject, stored.version)):
                raise errors.reference_exists(f"{subject} version {stored.version}")
        if permanent:
            if live:
                raise errors.subject_not_soft_deleted(subject)
            records = [(schema_key(subject, s.version), None) for s in reversed(every)]
            self.store.write([*records, *self._subject_settings_gone(subject, state)])
        else:
            if not live:
                raise errors.subject_soft_deleted(subject)
            key = {"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0}
            self.store.write([(key, {"subject": subject, "version": live[-1].version})])
        return [s.version for s in targets]
