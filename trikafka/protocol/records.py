"""Kafka record batches, format v2 (magic 2): validate and read. Bytes in, values out.

The broker stores batches exactly as the producer sent them. It never re-encodes records; it
validates a batch, then patches the few header fields that belong to the broker (base offset,
partition leader epoch and, for LogAppendTime topics, the timestamp type and max timestamp,
which are covered by the CRC and force a CRC recomputation). Everything here is a pure
function over ``bytes``/``bytearray``/``memoryview``, so it is tested with bytes alone.

The layout (field offsets, attribute bits, the parsed values) is ``batch_layout.py``; building
and patching are ``record_builder.py``; decoding records is ``record_reader.py``; this module
validates batches and reads their headers, and re-exports the others so
``trikafka.protocol.records`` stays the one import for record batches.

Errors say whose fault they are: :class:`CorruptRecordError` when the bytes do not add up
(CRC, sizes, a batch cut short), :class:`InvalidRecordError` when an intact batch breaks a rule
(record count versus offsets), :class:`KafkaProtocolError` with UNSUPPORTED_FOR_MESSAGE_FORMAT
for the old magic 0/1 message sets and UNSUPPORTED_COMPRESSION_TYPE for an unknown codec.
Nothing here raises any other exception type on any input; a hypothesis test holds us to that.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

from trikafka.errors import CorruptRecordError, ErrorCode, InvalidRecordError, KafkaProtocolError
from trikafka.protocol.batch_layout import (
    _ATTRIBUTES_AT,
    _CONTROL_KEY,
    _HEADER,
    _INT32,
    _MAGIC_AT,
    BATCH_HEADER_SIZE,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    BatchHeader,
    Compression,
    Record,
    TimestampType,
    next_offset_after,
)
from trikafka.protocol.crc import crc32c
from trikafka.protocol.native import native_extension
from trikafka.protocol.record_builder import (
    RecordSpec,
    assign_offsets,
    build_batch,
    build_control_batch,
    rebase_batch_parts,
    rebase_batches,
)
from trikafka.protocol.record_reader import (
    _read_varint,
    iter_records,
    record_objects,
    record_tuples,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "CURRENT_MAGIC",
    "LOG_OVERHEAD",
    "MIN_BATCH_LENGTH",
    "NATIVE_RECORD_WALK",
    "NO_PRODUCER_ID",
    "NO_TIMESTAMP",
    "BatchHeader",
    "Compression",
    "Record",
    "RecordSpec",
    "TimestampType",
    "assign_offsets",
    "build_batch",
    "build_control_batch",
    "control_type",
    "iter_batches",
    "iter_records",
    "next_offset_after",
    "parse_batch_header",
    "rebase_batch_parts",
    "rebase_batches",
    "record_objects",
    "record_tuples",
]


# --- reading --------------------------------------------------------------------------------


def parse_batch_header(
    data: bytes | bytearray | memoryview, position: int = 0, *, origin: int = 0
) -> BatchHeader:
    """Parse the header at ``position`` without validating anything.

    The caller guarantees that 61 bytes are available. Used where the bytes were validated
    before (the log's own segments); :func:`iter_batches` is the validating entry point.
    ``origin`` is added to the reported position, for a buffer that is a window of a larger
    whole (a block read from a segment file).
    """
    (
        base_offset,
        batch_length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    ) = _HEADER.unpack_from(data, position)
    return BatchHeader(
        position=origin + position,
        size=batch_length + LOG_OVERHEAD,
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        magic=magic,
        crc=crc,
        attributes=attributes,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=record_count,
    )


def iter_batches(
    data: bytes | bytearray | memoryview, *, validate_records: bool = True
) -> Iterator[BatchHeader]:
    """Yield the header of every batch in ``data``, validating each before it is yielded.

    ``data`` is a concatenation of whole batches (a Produce request's ``records``, or a log
    segment). A trailing partial batch is a :class:`CorruptRecordError`, as is anything whose
    sizes or CRC do not add up. With ``validate_records`` (produced batches) the record count
    must match the offsets the batch spans and the records of uncompressed batches are walked
    too (count, sizes, offset deltas); compressed batches are never decompressed. Without it
    (stored batches) a compacted batch may hold fewer records than it spans.
    """
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    total = len(view)
    position = 0
    # The native check answers for a batch that passes (one C call instead of ~30 Python
    # steps: a few µs per batch, which is per partition per request); anything else goes to
    # the reference below, which raises the error. Only beside the native walk: with the
    # pure-Python walk (not built, TRIKAFKA_PURE_PYTHON) the reference does everything.
    check = _check_batch if _walk_records is _native_walk_records else None
    while position < total:
        if check is not None:
            fields = check(view, position, total, validate_records)
            if fields is not None:
                yield BatchHeader(position, *fields)
                position += fields[0]
                continue
        header = _validate_batch(view, position, total, validate_records)
        yield header
        position += header.size


def _validate_batch(view: memoryview, position: int, total: int, walk: bool) -> BatchHeader:
    remaining = total - position
    if remaining < _MAGIC_AT + 1:
        raise CorruptRecordError(
            f"trailing partial batch at byte {position}: {remaining} bytes, too few for a header"
        )
    magic = view[position + _MAGIC_AT]
    if magic in (0, 1):
        raise KafkaProtocolError(
            f"message format v{magic} is not supported, only record batches v2",
            ErrorCode.unsupported_for_message_format,
        )
    if magic != CURRENT_MAGIC:
        raise CorruptRecordError(f"batch at byte {position} has unknown magic {magic}")
    batch_length = _INT32.unpack_from(view, position + 8)[0]
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at byte {position} declares length {batch_length} < {MIN_BATCH_LENGTH}"
        )
    size = batch_length + LOG_OVERHEAD
    if size > remaining:
        raise CorruptRecordError(
            f"trailing partial batch at byte {position}: declares {size} bytes, {remaining} present"
        )
    end = position + size
    header = parse_batch_header(view, position)
    actual_crc = crc32c(view[position + _ATTRIBUTES_AT : end])
    if actual_crc != header.crc:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} has CRC {header.crc:#010x}, "
            f"computed {actual_crc:#010x}"
        )
    if header.compression > Compression.ZSTD:
        raise KafkaProtocolError(
            f"batch at offset {header.base_offset} uses unknown compression id "
            f"{header.compression}",
            ErrorCode.unsupported_compression_type,
        )
    if header.last_offset_delta < 0:
        raise InvalidRecordError(
            f"batch at offset {header.base_offset} has lastOffsetDelta {header.last_offset_delta}"
        )
    count = header.record_count
    if count < 0 or (walk and count and count != header.last_offset_delta + 1):
        # Kafka's LogValidator, for produced batches (``walk``): the count from offsets must
        # match the count in the header. Stored batches may hold fewer records than offsets:
        # the log cleaner drops records from a batch's middle and keeps its offsets.
        raise InvalidRecordError(
            f"batch at offset {header.base_offset} holds {count} records "
            f"but spans {header.last_offset_delta + 1} offsets"
        )
    if header.is_transactional and header.producer_id < 0:
        raise InvalidRecordError(
            f"transactional batch at offset {header.base_offset} has no producer id"
        )
    if walk and header.compression == Compression.NONE:
        _walk_records(view, position + BATCH_HEADER_SIZE, end, count, header.base_offset)
    return header


def _py_walk_records(view: memoryview, position: int, end: int, count: int, base: int) -> None:
    """Check that the records area holds exactly ``count`` well-formed records.

    The reference walk, and the fallback where the native one (``_recordwalk.c``, the same
    checks and messages) is not built or ``TRIKAFKA_PURE_PYTHON`` is set; see
    :data:`NATIVE_RECORD_WALK`.

    Kafka's LogValidator walks every record of an uncompressed batch too. Here the walk is
    the produce path's hottest loop (77 % of broker CPU with 100-byte messages when every
    varint went through :func:`_read_varint`), so one-byte varints — nearly all of them:
    small deltas and sizes under 64 — are decoded inline, and anything longer falls back to
    :func:`_read_varint` at that very byte, with the same checks and errors.
    """
    read = _read_varint
    for index in range(count):
        if position >= end:
            raise InvalidRecordError(
                f"batch at offset {base} declares {count} records, holds {index}"
            )
        byte = view[position]
        if byte < 0x80:
            length = (byte >> 1) ^ -(byte & 1)
            position += 1
        elif position + 1 < end and (high := view[position + 1]) < 0x80:
            length = (byte & 0x7F) | (high << 7)  # two bytes: records of 64 B to 8 KiB
            length = (length >> 1) ^ -(length & 1)
            position += 2
        else:
            length, position = read(view, position, end)
        record_end = position + length
        if length <= 0 or record_end > end:
            raise InvalidRecordError(f"record {index} of batch at offset {base} has size {length}")
        offset_delta = _check_record(view, position, record_end)
        if offset_delta != index:
            raise InvalidRecordError(
                f"record {index} of batch at offset {base} has offset delta {offset_delta}"
            )
        position = record_end
    if position != end:
        raise InvalidRecordError(
            f"batch at offset {base}: {end - position} bytes follow the last of {count} records"
        )


_KEY_AND_VALUE = ("key", "value")


def _native() -> tuple[Callable[..., Any] | None, Callable[..., Any] | None]:
    """The C walk and batch check, unless not built or ``TRIKAFKA_PURE_PYTHON`` asks for the
    reference (:func:`~trikafka.protocol.native.native_extension`)."""
    extension = native_extension()
    if extension is None:
        return None, None
    # An extension built before check_batch existed (a checkout not rebuilt since) still
    # walks natively; batches then go through the Python checks.
    return extension.walk_records, getattr(extension, "check_batch", None)


_native_walk_records, _check_batch = _native()
#: True when batches are walked by the C extension (``trikafka/protocol/_recordwalk.c``);
#: False means the pure-Python reference walk (not built, or ``TRIKAFKA_PURE_PYTHON=1``).
#: Both make the same checks and raise the same errors; only the speed differs.
_walk_records = _native_walk_records or _py_walk_records
NATIVE_RECORD_WALK = _walk_records is not _py_walk_records


def _check_record(view: memoryview, position: int, end: int) -> int:
    """Walk one record's fields; return its offset delta. Raises InvalidRecordError.

    Each varint: inline when it is one or two bytes inside the record (timestamp deltas
    within ±8 s, sizes below 8 KiB), else :func:`_read_varint`.
    """
    read = _read_varint
    p = position + 1  # attributes, unused in v2
    if p < end and view[p] < 0x80:  # timestamp delta (a varlong)
        p += 1
    elif p + 1 < end and view[p + 1] < 0x80:  # two bytes: within ±8 s of the first record
        p += 2
    else:
        _, p = read(view, p, end, 10)
    if p < end and (byte := view[p]) < 0x80:
        offset_delta = (byte >> 1) ^ -(byte & 1)
        p += 1
    elif p + 1 < end and (high := view[p + 1]) < 0x80:  # records 64 to 8191 of a batch
        offset_delta = (byte & 0x7F) | (high << 7)
        offset_delta = (offset_delta >> 1) ^ -(offset_delta & 1)
        p += 2
    else:
        offset_delta, p = read(view, p, end)
    for field in _KEY_AND_VALUE:
        if p < end and (byte := view[p]) < 0x80:
            size = (byte >> 1) ^ -(byte & 1)
            p += 1
        elif p + 1 < end and (high := view[p + 1]) < 0x80:
            size = (byte & 0x7F) | (high << 7)
            size = (size >> 1) ^ -(size & 1)
            p += 2
        else:
            size, p = read(view, p, end)
        if size < -1:
            raise InvalidRecordError(f"record {field} has size {size}")
        if size > 0:
            p += size
    if p < end and (byte := view[p]) < 0x80:
        header_count = (byte >> 1) ^ -(byte & 1)
        p += 1
    else:
        header_count, p = read(view, p, end)
    if header_count < 0:
        raise InvalidRecordError(f"record has {header_count} headers")
    for _ in range(header_count):
        size, p = read(view, p, end)
        if size < 0:
            raise InvalidRecordError(f"record header key has size {size}")
        p += size
        size, p = read(view, p, end)
        if size < -1:
            raise InvalidRecordError(f"record header value has size {size}")
        p += max(size, 0)
    if p != end:
        raise InvalidRecordError(
            f"record declares {end - p:+d} bytes more than its fields hold"
        )
    return offset_delta


def control_type(data: bytes | bytearray | memoryview, header: BatchHeader) -> int | None:
    """The control record type of a control batch (its first record's key), or None when
    the batch is not a control batch or its key cannot be read (compressed, malformed)."""
    if not header.is_control or header.record_count < 1 or header.compression != Compression.NONE:
        return None
    try:
        record = next(iter_records(data, header))
    except (InvalidRecordError, KafkaProtocolError, StopIteration, IndexError, struct.error):
        return None
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        return None
    result: int | None = _CONTROL_KEY.unpack_from(record.key)[1]
    return result
