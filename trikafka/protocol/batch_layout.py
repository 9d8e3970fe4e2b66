"""The record batch v2 layout: offsets of the header's fields, its attribute bits, and the
values a parsed header becomes. No validation here (that is ``records.py``); just where
things are, so no other module reads a batch by numbers of its own.

Batch header (61 bytes, big-endian)::

    0  baseOffset int64          the CRC does not cover the first 21 bytes, so the broker
    8  batchLength int32         can patch baseOffset and partitionLeaderEpoch for free
    12 partitionLeaderEpoch int32
    16 magic int8                at the same position as in message sets v0/v1
    17 crc uint32                CRC-32C of bytes 21 .. end of batch
    21 attributes int16          bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control
    23 lastOffsetDelta int32
    27 baseTimestamp int64
    35 maxTimestamp int64
    43 producerId int64
    51 producerEpoch int16
    53 baseSequence int32
    57 recordCount int32
    61 records...                each: varint length, then attributes int8, timestampDelta
                                 varlong, offsetDelta varint, key, value, headers
"""

from __future__ import annotations

import enum
import struct

import attrs

__all__ = [
    "BATCH_HEADER_SIZE",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "CURRENT_MAGIC",
    "LOG_OVERHEAD",
    "MIN_BATCH_LENGTH",
    "NO_PRODUCER_ID",
    "NO_TIMESTAMP",
    "BatchHeader",
    "Compression",
    "Record",
    "TimestampType",
    "next_offset_after",
]

LOG_OVERHEAD = 12  # baseOffset + batchLength: the part batchLength does not count
BATCH_HEADER_SIZE = 61
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49
NO_PRODUCER_ID = -1
NO_TIMESTAMP = -1
CURRENT_MAGIC = 2

_OFFSET_LENGTH = struct.Struct(">qi")  # baseOffset, batchLength
_HEADER = struct.Struct(">qiibIhiqqqhii")  # the whole 61-byte header
_BASE_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")

_BATCH_LENGTH_AT = 8
_PARTITION_LEADER_EPOCH_AT = 12
_MAGIC_AT = 16
_CRC_AT = 17
_ATTRIBUTES_AT = 21
_BASE_TIMESTAMP_AT = 27
_MAX_TIMESTAMP_AT = 35

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20


class Compression(enum.IntEnum):
    """Codec ids of attributes bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    """Attributes bit 3."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@attrs.frozen
class BatchHeader:
    """The header of one batch found at ``position`` in a buffer; ``size`` counts all its bytes."""

    position: int
    size: int
    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def end(self) -> int:
        """Position just after this batch."""
        return self.position + self.size

    @property
    def compression(self) -> int:
        """The codec id (see :class:`Compression`); an unknown id never gets past validation."""
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)


@attrs.frozen
class Record:
    """One record of a batch, with absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()



_LAST_OFFSET_DELTA_AT = 23

#: Control record types (the int16 after the version in a control record's key).
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")  # version 0, type
_MARKER_VALUE = struct.Struct(">hi")  # version 0, coordinator epoch


def next_offset_after(records: bytes | bytearray | memoryview) -> int:
    """The offset after the last batch in ``records`` (whole, already validated batches), read
    from each batch's baseOffset, batchLength and lastOffsetDelta without parsing the rest;
    0 for no batches."""
    view = memoryview(records)
    position, next_offset = 0, 0
    while position + _BASE_TIMESTAMP_AT <= len(view):
        base_offset, length = _OFFSET_LENGTH.unpack_from(view, position)
        next_offset = base_offset + _INT32.unpack_from(view, position + _LAST_OFFSET_DELTA_AT)[0] + 1
        position += length + LOG_OVERHEAD
    return next_offset
