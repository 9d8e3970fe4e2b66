"""The ``_schemas`` topic as the registry's store: append records, and fold what is new.

The log is the one truth, as it is for Confluent's registry (a write-ahead log of a single
partition): a write appends its records, then the state catches up by reading from where it
stopped to the log's end, the same path a record written by anyone else takes. Before every
request the state catches up, so every broker of a cluster — all reading the same
partition — answers the same, and records another registry wrote are seen.

The topic is created on the first write (one partition, ``cleanup.policy=compact``, as
Confluent creates it); a broker that never registers a schema lists no ``_schemas``. If the
log ends before where the state stopped (the topic deleted and made anew), the state is
rebuilt from the start.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from trikafka.protocol.records import build_batch, iter_batches, iter_records
from trikafka.registry.state import RegistryState

__all__ = ["SCHEMAS_TOPIC", "SchemasLog", "SchemasStore"]

log = logging.getLogger("trikafka.registry")

SCHEMAS_TOPIC = "_schemas"
_READ_CHUNK = 1 << 20


class SchemasLog(Protocol):
    """Partition 0 of ``_schemas`` (a :class:`~trikafka.log.log.Log`)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def append(self, batches: bytearray, *, leader_epoch: int, log_append_time_ms: int | None = None) -> object: ...

    def read(self, offset: int, max_bytes: int) -> Any: ...


class SchemasStore:
    """``log_for(create)`` gives the partition (creating the topic when ``create``), or
    None while the topic does not exist."""

    def __init__(self, log_for: Callable[[bool], SchemasLog | None], now_ms: Callable[[], float]) -> None:
        self._log_for = log_for
        self._now_ms = now_ms
        self.state = RegistryState()
        #: The offset of the next record to fold.
        self.applied = 0

    def sync(self) -> RegistryState:
        """Fold every record appended since the last call; the state, up to date."""
        partition = self._log_for(False)
        if partition is None:
            if self.applied:
                self.state, self.applied = RegistryState(), 0
            return self.state
        end = partition.log_end_offset
        if end < self.applied:
            log.warning("_schemas ends at %d, before %d: rebuilding the registry from it", end, self.applied)
            self.state, self.applied = RegistryState(), 0
        offset = max(self.applied, partition.log_start_offset)
        while offset < end:
            data = partition.read(offset, _READ_CHUNK).records
            if not data:
                break
            for header in iter_batches(data, validate_records=False):
                if not header.is_control:
                    for record in iter_records(data, header):
                        if record.offset >= offset:
                            self._fold(record.offset, record.key, record.value)
                offset = header.next_offset
        self.applied = max(self.applied, offset)
        return self.state

    def _fold(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        try:
            key_doc = json.loads(key) if key else None
            value_doc = json.loads(value) if value is not None else None
            if not isinstance(key_doc, dict) or not (value_doc is None or isinstance(value_doc, dict)):
                raise ValueError("key and value must be JSON objects")
            self.state.apply(key_doc, value_doc)
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("_schemas record at offset %d skipped: %s", offset, exc)

    def write(self, records: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> RegistryState:
        """Append ``records`` (key, value or None) in one batch, then fold them."""
        self.sync()
        now = int(self._now_ms())
        batch = build_batch(
            [
                (_dumps(key), None if value is None else _dumps(value), [], now)
                for key, value in records
            ]
        )
        partition = self._log_for(True)
        assert partition is not None
        partition.append(bytearray(batch), leader_epoch=0, log_append_time_ms=now)
        return self.sync()


def _dumps(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()
