"""The client quotas a broker holds: set by AlterClientQuotas, read by DescribeClientQuotas,
kept across restarts with ``--data-dir``, enforced by each broker's own
:class:`ClientQuotaManagers` (a standalone broker uses :attr:`ClientQuotas.local`; each node of
a cluster gets its own from :meth:`ClientQuotas.new_managers`, since Kafka measures rates per
broker while its quota settings are cluster-wide).

Kafka keeps quotas in the cluster metadata (``QuotaRecord``); here :class:`ClientQuotas`
keeps entity → {key: value} and rewrites ``<first data dir>/trikafka-client-quotas.json``
atomically at each change. Validation follows Kafka's ClientQuotaControlManager (entities,
keys, Long values) and ClientQuotasImage.describe (filters): a bad entry is answered
INVALID_REQUEST with Kafka's message, and nothing of that entry is applied.

Refused rather than pretended: ``ip`` entities (``connection_creation_rate``) and
``controller_mutation_rate`` are Kafka keys this broker does not enforce, so setting them is
INVALID_REQUEST naming what is supported — never a quota stored and silently ignored. A
value of zero or less is refused too (Kafka would compute an infinite throttle from it).
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from trikafka.errors import ConfigError
from trikafka.security.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotaManager,
    ClientQuotaManagers,
    QuotaEntity,
)
from trikafka.security.files import write_json_atomically

__all__ = ["QUOTAS_FILE", "ClientQuotas", "QuotaError", "QuotaOp"]

log = logging.getLogger("trikafka.security")

#: Where AlterClientQuotas' quotas are kept, in the first data directory.
QUOTAS_FILE = "trikafka-client-quotas.json"
#: Kafka's QuotaConfigs for user and client-id entities: key → Long (True) or Double.
QUOTA_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False}
#: Kafka keys a client may send that this broker does not enforce (refused, see module doc).
UNSUPPORTED_KEYS = frozenset({"controller_mutation_rate", "connection_creation_rate"})
IP = "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class QuotaError(Exception):
    """A request the client got wrong: answered with ``error`` (a Kafka error name) and the message."""

    def __init__(self, message: str, error: str = "invalid_request") -> None:
        super().__init__(message)
        self.error = error


@attrs.frozen
class QuotaOp:
    key: str
    value: float
    remove: bool


def describe_entity(entity: QuotaEntity) -> str:
    """Kafka's ClientQuotaEntity text: ``ClientQuotaEntity(entries={user=alice})``."""
    inner = ", ".join(f"{kind}={name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


class ClientQuotas:
    """Every quota set (cluster-wide), and the managers of each broker that enforce them."""

    def __init__(self, path: Path | None = None, samples: int = 11, window_seconds: int = 1) -> None:
        self.path = path  # None: in memory only
        self._samples, self._window_seconds = samples, window_seconds
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}
        #: Every broker's managers, each told of every change (a stopped node's are dropped).
        self._managers: weakref.WeakSet[ClientQuotaManagers] = weakref.WeakSet()
        #: The managers of a standalone broker (the default throttler's).
        self.local = self.new_managers()
        #: Some quota was ever set (Kafka's quotasEnabled): until then no answer pays for quotas.
        self.enabled = False
        if path is not None and path.exists():
            self._load(path)

    def new_managers(self) -> ClientQuotaManagers:
        """Rates and throttles for one more broker, following this store's quotas."""
        managers = ClientQuotaManagers(self._samples, self._window_seconds)
        managers.replace_quotas(self._quotas)
        self._managers.add(managers)
        return managers

    @property
    def produce(self) -> ClientQuotaManager:
        return self.local.produce

    @property
    def fetch(self) -> ClientQuotaManager:
        return self.local.fetch

    @property
    def request(self) -> ClientQuotaManager:
        return self.local.request

    @classmethod
    def in_data_dir(cls, log_dirs: Sequence[str] | None, samples: int = 11, window_seconds: int = 1) -> ClientQuotas:
        return cls(Path(log_dirs[0]) / QUOTAS_FILE if log_dirs else None, samples, window_seconds)


    def _load(self, path: Path) -> None:
        try:
            for entry in json.loads(path.read_text(encoding="utf-8")):
                entity = tuple(sorted((str(kind), name) for kind, name in entry["entity"]))
                self._quotas[entity] = {str(k): float(v) for k, v in entry["values"].items()}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(str(path), "[file]", f"unreadable client quotas: {exc}") from None
        self._apply()

    def _save(self) -> None:
        if self.path is not None:
            document = [{"entity": [list(pair) for pair in entity], "values": values}
                        for entity, values in sorted(self._quotas.items(), key=lambda item: repr(item[0]))]
            write_json_atomically(self.path, document)

    def _apply(self) -> None:
        for managers in list(self._managers):
            managers.replace_quotas(self._quotas)
        self.enabled = self.enabled or any(key in QUOTA_KEYS for values in self._quotas.values() for key in values)

    # -- AlterClientQuotas ------------------------------------------------------------------

    def alter(
        self, alterations: Iterable[tuple[Sequence[tuple[str, str | None]], Sequence[QuotaOp]]], validate_only: bool
    ) -> list[QuotaError | None]:
        """Apply each (entity, ops) unless ``validate_only``; per entry None or its error."""
        results: list[QuotaError | None] = []
        changes: dict[QuotaEntity, dict[str, float]] = {}
        seen: set[QuotaEntity] = set()
        for pairs, ops in alterations:
            try:
                entity = self._validate_entity(pairs)
                if entity in seen:
                    raise QuotaError(f"Ignoring duplicate entity {describe_entity(entity)}")
                seen.add(entity)
                changes[entity] = self._validate_ops(entity, ops)
                results.append(None)
            except QuotaError as exc:
                results.append(exc)
        if not validate_only and changes:
            for entity, values in changes.items():
                if values:
                    self._quotas[entity] = values
                else:
                    self._quotas.pop(entity, None)
                log.info("client quotas of %s are now %s", describe_entity(entity), values or "unset")
            self._apply()
            self._save()
        return results

    @staticmethod
    def _validate_entity(pairs: Sequence[tuple[str, str | None]]) -> QuotaEntity:
        if not pairs:
            raise QuotaError("Invalid empty client quota entity")
        kinds: dict[str, str | None] = {}
        for kind, name in pairs:
            if kind in kinds:
                raise QuotaError(f"Invalid empty client quota entity, duplicate entity entry {kind}")
            if kind == IP:
                raise QuotaError("ip quota entities (connection_creation_rate) are not supported by "
                                 f"this broker; supported entity types: {USER}, {CLIENT_ID}")
            if kind not in (USER, CLIENT_ID):
                raise QuotaError(f"Unhandled client quota entity type: {kind}")
            if name is not None and not name:
                raise QuotaError(f"Empty {kind} not supported")
            kinds[kind] = name
        return tuple(sorted(kinds.items()))

    def _validate_ops(self, entity: QuotaEntity, ops: Sequence[QuotaOp]) -> dict[str, float]:
        values = dict(self._quotas.get(entity, {}))
        keys: set[str] = set()
        for op in ops:
            if op.key in keys:
                raise QuotaError(f"Duplicate quota key {op.key} not updating quota for this entity "
                                 f"{describe_entity(entity)}")
            keys.add(op.key)
            if op.remove:
                values.pop(op.key, None)
                continue
            is_long = QUOTA_KEYS.get(op.key)
            if is_long is None:
                if op.key in UNSUPPORTED_KEYS:
                    raise QuotaError(f"Quota {op.key} is not supported by this broker; supported: "
                                     f"{', '.join(QUOTA_KEYS)}")
                raise QuotaError(f"Invalid configuration key {op.key}")
            value = op.value
            if is_long and abs(int(value + 1e-6) - value) > 1e-6:
                raise QuotaError(f"Configuration {op.key} must be a Long value")
            if not value > 0:
                raise QuotaError(f"Configuration {op.key} must be greater than 0, not {value:g}")
            values[op.key] = float(int(value + 1e-6)) if is_long else value
        return values

    # -- DescribeClientQuotas ---------------------------------------------------------------

    def describe(self, components: Iterable[Any], strict: bool) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """The entities matching the filter (``entity_type``, ``match_type``, ``match``), as
        Kafka's ClientQuotasImage.describe; a bad filter raises :class:`QuotaError`."""
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for component in components:
            kind, match_type, match = component.entity_type, component.match_type, component.match
            if not kind:
                raise QuotaError("Invalid empty entity type.")
            if kind in exact or kind in typed:
                raise QuotaError(f"Entity type {kind} cannot appear more than once in the filter.")
            if kind not in (IP, USER, CLIENT_ID):
                raise QuotaError(f"Unsupported entity type {kind}", "unsupported_version")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaError("Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[kind] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise QuotaError("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
                exact[kind] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise QuotaError("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
                typed.add(kind)
            else:
                raise QuotaError(f"Unknown match type {match_type}")
        if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
            raise QuotaError("Invalid entity filter component combination. IP filter component should "
                             "not be used with user or clientId filter component.")
        found = []
        for entity, values in self._quotas.items():
            kinds = dict(entity)
            if any(kind not in kinds or kinds[kind] != name for kind, name in exact.items()):
                continue
            if any(kind not in kinds for kind in typed):
                continue
            if not exact and not typed and strict:
                continue
            if strict and len(kinds) != len(exact) + len(typed):
                continue
            found.append((entity, dict(values)))
        return found
