"""Idempotent producers: producer ids, and per-partition sequence checks with de-duplication.

Kafka (KIP-98) gives each idempotent producer an id and epoch (InitProducerId) and numbers
its batches per partition. The leader remembers the last five batches of each producer: a
batch seen again (a retry after a lost response) is answered with its original offset and not
appended twice; a gap in the sequence is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is
INVALID_PRODUCER_EPOCH. A producer the partition does not know yet (new, or state lost in a
restart — Kafka keeps snapshots, we do not) is accepted as it comes.

Transaction markers (control batches the coordinator writes) carry the producer's epoch: a
marker with a newer epoch — the coordinator fenced the producer — makes the partition refuse
the older epoch from then on, and a new epoch starts its sequence at 0.

Producer ids are allocated in blocks whose high mark is kept in the first log dir, so ids
never repeat across restarts.
"""

from __future__ import annotations

import collections
import os
from pathlib import Path
from typing import Any

import attrs

from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.protocol.records import BatchHeader

__all__ = ["ProducerIdManager", "ProducerStateManager", "BatchMetadata"]

BLOCK_SIZE = 1000
CACHED_BATCHES = 5
NO_PRODUCER_ID = -1


class ProducerIdManager:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._next = 0
        self._block_end = 0
        if path is not None and path.exists():
            self._next = self._block_end = int(path.read_text().strip() or 0)

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            if self.path is not None:
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(f"{self._block_end}\n")
                os.replace(tmp, self.path)
        value = self._next
        self._next += 1
        return value


@attrs.frozen
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int


@attrs.define
class _ProducerEntry:
    epoch: int
    batches: collections.deque[Any] = attrs.Factory(lambda: collections.deque(maxlen=CACHED_BATCHES))
    last_timestamp: int = -1  # of its last batch (DescribeProducers)
    coordinator_epoch: int = -1  # not tracked: markers are not decoded here


class ProducerStateManager:
    """The producers one partition has seen."""

    def __init__(self) -> None:
        self._producers: dict[int, _ProducerEntry] = {}

    def producers(self) -> list[tuple[int, _ProducerEntry]]:
        """(producer id, state) of every producer seen, for DescribeProducers."""
        return list(self._producers.items())

    def check(self, headers: list[BatchHeader]) -> int | None:
        """Validate a partition's batches; the original first offset if they are a duplicate."""
        for header in headers:
            if header.producer_id == NO_PRODUCER_ID or header.base_sequence < 0:
                continue
            entry = self._producers.get(header.producer_id)
            if entry is None:
                continue
            if header.producer_epoch < entry.epoch:
                raise KafkaProtocolError(
                    f"producer {header.producer_id} epoch {header.producer_epoch} is older than "
                    f"{entry.epoch}",
                    ErrorCode.invalid_producer_epoch,
                )
            last_seq = header.base_sequence + header.last_offset_delta
            for cached in entry.batches:
                if cached.first_seq == header.base_sequence and cached.last_seq == last_seq:
                    if header.producer_epoch == entry.epoch and len(headers) == 1:
                        result: int | None = cached.first_offset
                        return result
            if header.producer_epoch > entry.epoch:
                if header.base_sequence != 0:
                    raise KafkaProtocolError(
                        f"new epoch {header.producer_epoch} of producer {header.producer_id} "
                        f"must start at sequence 0, not {header.base_sequence}",
                        ErrorCode.out_of_order_sequence_number,
                    )
                continue
            expected = (entry.batches[-1].last_seq + 1) % 2**31 if entry.batches else 0
            if header.base_sequence != expected:
                raise KafkaProtocolError(
                    f"out of order sequence {header.base_sequence} from producer "
                    f"{header.producer_id} (expected {expected})",
                    ErrorCode.out_of_order_sequence_number,
                )
        return None

    def update(self, headers: list[BatchHeader], first_offset: int) -> None:
        offset = first_offset
        for header in headers:
            if header.is_control and header.producer_id != NO_PRODUCER_ID:
                entry = self._producers.get(header.producer_id)
                if entry is None or header.producer_epoch > entry.epoch:
                    self._producers[header.producer_id] = _ProducerEntry(header.producer_epoch)
            elif header.producer_id != NO_PRODUCER_ID and header.base_sequence >= 0:
                entry = self._producers.get(header.producer_id)
                if entry is None or header.producer_epoch > entry.epoch:
                    entry = self._producers[header.producer_id] = _ProducerEntry(header.producer_epoch)
                entry.batches.append(
                    BatchMetadata(
                        header.base_sequence, header.base_sequence + header.last_offset_delta, offset
                    )
                )
                entry.last_timestamp = header.max_timestamp
            offset += header.last_offset_delta + 1
