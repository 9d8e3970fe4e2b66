"""Committed offsets and group metadata, kept in the ``__consumer_offsets`` log.

The Kafka way: every commit and every completed rebalance is a record appended to an
internal topic's log, keyed so that the last record for a key wins; a start replays the
log. Records are small JSON documents (not Kafka's binary schemas: nothing outside this
broker reads them), and a deletion is a record with a null value (a tombstone). The topic is
``cleanup.policy=compact``; until compaction exists, replay reads the whole log, which is
bounded by how much a dev or test broker commits.

A group goes to partition ``abs(java_hash(group_id)) % offsets.topic.num.partitions``, as in
Kafka, so tools that compute a group's coordinator partition agree with us.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trikafka.coordinator.ports import OffsetsPartitionLog
from trikafka.protocol.records import build_batch, iter_batches, iter_records

if TYPE_CHECKING:
    from trikafka.clock import Clock

__all__ = ["OffsetStore", "OFFSETS_TOPIC", "group_key", "java_string_hash", "offset_key"]

OFFSETS_TOPIC = "__consumer_offsets"
_READ_CHUNK = 1 << 20


def java_string_hash(text: str) -> int:
    value = 0
    for char in text.encode("utf-16-be").decode("utf-16-be"):
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return json.dumps(["offset", group_id, topic, partition]).encode()


def group_key(group_id: str) -> bytes:
    return json.dumps(["group", group_id]).encode()


class OffsetStore:
    """Appends to and replays the offsets topic through callables the broker provides:
    ``log_for(partition)`` (which creates the topic on first use) and ``exists()``."""

    def __init__(
        self,
        num_partitions: int,
        log_for: Callable[[int], OffsetsPartitionLog],
        now_ms: Clock,
        exists: Callable[[], bool] = lambda: True,
    ) -> None:
        self.num_partitions = num_partitions
        self._log_for = log_for  # creates the topic on first use
        self._now_ms = now_ms
        self._exists = exists

    def partition_for(self, group_id: str) -> int:
        return abs(java_string_hash(group_id)) % self.num_partitions

    def write(self, group_id: str, records: Sequence[tuple[bytes, Mapping[str, Any] | None]]) -> None:
        """Append records for one group in one batch (all or nothing)."""
        if not records:
            return
        now = int(self._now_ms())
        batch = build_batch(
            [
                (key, None if value is None else json.dumps(value).encode(), [], now)
                for key, value in records
            ]
        )
        log = self._log_for(self.partition_for(group_id))
        log.append(bytearray(batch), leader_epoch=0, log_append_time_ms=now)

    def replay(self) -> Iterator[tuple[list[Any], dict[str, Any] | None]]:
        """Every record ever written, partition by partition, oldest first."""
        if not self._exists():
            return
        for partition in range(self.num_partitions):
            log = self._log_for(partition)
            offset = log.log_start_offset
            while offset < log.log_end_offset:
                data = log.read(offset, _READ_CHUNK).records
                if not data:
                    break
                for header in iter_batches(data, validate_records=False):  # compacted: gaps
                    for record in iter_records(data, header):
                        key = json.loads(record.key) if record.key else None
                        value = json.loads(record.value) if record.value is not None else None
                        if key is not None:
                            yield key, value
                    offset = header.next_offset
