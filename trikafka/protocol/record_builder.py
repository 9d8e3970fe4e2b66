"""Writing record batches v2: building new ones (the broker's own: ``__consumer_offsets``,
transaction markers, and the client's) and patching the broker's fields into a validated one.
The layout is ``batch_layout.py``; validation is ``records.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from trikafka.protocol.batch_layout import (
    _ATTRIBUTES_AT,
    _BASE_OFFSET,
    _CONTROL_BIT,
    _CONTROL_KEY,
    _CRC_AT,
    _INT16,
    _INT32,
    _INT64,
    _MARKER_VALUE,
    _MAX_TIMESTAMP_AT,
    _PARTITION_LEADER_EPOCH_AT,
    _TIMESTAMP_TYPE_BIT,
    _TRANSACTIONAL_BIT,
    _UINT32,
    BATCH_HEADER_SIZE,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    BatchHeader,
    Record,
    TimestampType,
)
from trikafka.protocol.crc import crc32c
from trikafka.protocol.native import native_extension

__all__ = [
    "DELETE_HORIZON_BIT",
    "RecordSpec",
    "assign_offsets",
    "build_batch",
    "build_batch_parts",
    "build_control_batch",
    "build_retained_batch",
    "rebase_batch_parts",
    "rebase_batches",
]

# An extension built before encode_records existed leaves encoding to the reference.
_encode_records: Callable[..., tuple[bytes, int] | None] | None = getattr(native_extension(), "encode_records", None)
_encode_record_parts: Callable[..., tuple[list[bytes], int] | None] | None = getattr(
    native_extension(), "encode_record_parts", None
)

#: Attribute bit 6 (KIP-534): the batch's base timestamp is the log cleaner's delete horizon.
DELETE_HORIZON_BIT = 0x40

# --- patching -------------------------------------------------------------------------------


def assign_offsets(
    data: bytearray,
    base_offset: int,
    *,
    leader_epoch: int = 0,
    log_append_time_ms: int | None = None,
) -> tuple[int, int, int]:
    """Patch validated batches in place: offsets from ``base_offset``, the leader epoch, and
    with ``log_append_time_ms`` the LogAppendTime type and max timestamp (recomputing the CRC).

    Returns ``(next_offset, max_timestamp, offset_of_max_timestamp)`` where the offset of the
    max timestamp is the *last* offset of the batch holding it (Kafka's "shallow" offset), or
    the first assigned offset for LogAppendTime. Like Kafka's in-place path this leaves
    baseTimestamp alone: readers of a LogAppendTime batch use maxTimestamp for every record.
    """
    view = memoryview(data)
    total = len(data)
    position = 0
    next_offset = base_offset
    max_timestamp = NO_TIMESTAMP
    offset_of_max = base_offset
    while position < total:
        batch_length = _INT32.unpack_from(view, position + 8)[0]
        end = position + batch_length + LOG_OVERHEAD
        last_offset_delta = _INT32.unpack_from(view, position + 23)[0]
        _BASE_OFFSET.pack_into(view, position, next_offset)
        _INT32.pack_into(view, position + _PARTITION_LEADER_EPOCH_AT, leader_epoch)
        last_offset = next_offset + last_offset_delta
        if log_append_time_ms is not None:
            attributes = _INT16.unpack_from(view, position + _ATTRIBUTES_AT)[0]
            _INT16.pack_into(view, position + _ATTRIBUTES_AT, attributes | _TIMESTAMP_TYPE_BIT)
            _INT64.pack_into(view, position + _MAX_TIMESTAMP_AT, log_append_time_ms)
            crc = crc32c(view[position + _ATTRIBUTES_AT : end])
            _UINT32.pack_into(view, position + _CRC_AT, crc)
        else:
            batch_max = _INT64.unpack_from(view, position + _MAX_TIMESTAMP_AT)[0]
            if batch_max > max_timestamp:
                max_timestamp = batch_max
                offset_of_max = last_offset
        next_offset = last_offset + 1
        position = end
    view.release()
    if log_append_time_ms is not None:
        return next_offset, log_append_time_ms, base_offset
    return next_offset, max_timestamp, offset_of_max


def rebase_batches(
    data: bytearray | memoryview,
    headers: Sequence[BatchHeader],
    base_offset: int,
    *,
    leader_epoch: int = 0,
    log_append_time_ms: int | None = None,
) -> list[BatchHeader]:
    """:func:`assign_offsets` for batches whose headers were parsed already (the produce
    path's validation): patches ``data`` in place the same way and returns the patched
    headers, built from the ones given rather than parsed from the bytes a second time.
    """
    view = memoryview(data)
    out = []
    next_offset = base_offset
    for h in headers:
        out.append(_patch(view, h.position, h, next_offset, leader_epoch, log_append_time_ms, None))
        next_offset += h.last_offset_delta + 1
    view.release()
    return out


def rebase_batch_parts(
    data: bytes | bytearray | memoryview,
    headers: Sequence[BatchHeader],
    base_offset: int,
    *,
    leader_epoch: int = 0,
    log_append_time_ms: int | None = None,
) -> tuple[list[BatchHeader], list[bytearray | memoryview]]:
    """:func:`rebase_batches` for bytes that are not to be written to or copied whole (a
    Produce request's batches on their way to a file): every patched field lies in a batch's
    61-byte header, so each header is copied and patched and its records are left where
    they are. Returns the patched headers and the parts to write, in order: each batch's
    header copy, then a view of its records. ``data`` is not changed.
    """
    view = memoryview(data)
    out = []
    parts: list[bytearray | memoryview] = []
    next_offset = base_offset
    for h in headers:
        position = h.position
        head = bytearray(view[position : position + BATCH_HEADER_SIZE])
        records = view[position + BATCH_HEADER_SIZE : position + h.size]
        out.append(_patch(memoryview(head), 0, h, next_offset, leader_epoch, log_append_time_ms, records))
        parts.append(head)
        parts.append(records)
        next_offset += h.last_offset_delta + 1
    return out, parts


def _patch(
    view: memoryview,
    position: int,
    h: BatchHeader,
    offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None,
    records: memoryview | None,
) -> BatchHeader:
    """Patch the header at ``position`` of ``view`` (the whole batch, or with ``records``
    the header alone and the records beside it); the header as patched, at ``h.position``."""
    _BASE_OFFSET.pack_into(view, position, offset)
    _INT32.pack_into(view, position + _PARTITION_LEADER_EPOCH_AT, leader_epoch)
    attributes, max_timestamp, crc = h.attributes, h.max_timestamp, h.crc
    if log_append_time_ms is not None:
        attributes |= _TIMESTAMP_TYPE_BIT
        max_timestamp = log_append_time_ms
        _INT16.pack_into(view, position + _ATTRIBUTES_AT, attributes)
        _INT64.pack_into(view, position + _MAX_TIMESTAMP_AT, max_timestamp)
        if records is None:
            crc = crc32c(view[position + _ATTRIBUTES_AT : position + h.size])
        else:  # the CRC of the header's covered part, continued over the records
            crc = crc32c(records, crc32c(view[position + _ATTRIBUTES_AT : position + BATCH_HEADER_SIZE]))
        _UINT32.pack_into(view, position + _CRC_AT, crc)
    return BatchHeader(
        h.position,
        h.size,
        offset,
        leader_epoch,
        h.magic,
        crc,
        attributes,
        h.last_offset_delta,
        h.base_timestamp,
        max_timestamp,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        h.record_count,
    )


# --- building -------------------------------------------------------------------------------

RecordSpec = tuple[bytes | None, bytes | None, Sequence[tuple[str | bytes, bytes | None]], int]


def build_batch(records: Iterable[RecordSpec], base_offset: int = 0, **options: Any) -> bytes:
    """Encode one uncompressed batch of ``(key, value, headers, timestamp_ms)`` records, as
    one buffer (:func:`build_batch_parts` takes the same arguments and gives the batch in parts).

    For tests and the project's client. Offsets run densely from ``base_offset``; the first
    record's timestamp is the batch's base timestamp.
    """
    return b"".join(build_batch_parts(records, base_offset, **options))


def build_batch_parts(
    records: Iterable[RecordSpec],
    base_offset: int = 0,
    *,
    partition_leader_epoch: int = -1,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    separate: int | None = None,
) -> tuple[bytes | bytearray, ...]:
    """:func:`build_batch` as buffers whose concatenation is the batch: its 61-byte header,
    then its records, not copied into one (the client writes them with one scatter write).

    With ``separate``, each value of at least that many bytes is a buffer of its own, the
    very object given (not copied: a 10 KB record's copy into a fresh 1 MB batch was a fifth
    of the Trio producer's time), where the native encoder is built; else the records are
    one buffer.
    """
    records = list(records)
    if not records:
        raise ValueError("a batch needs at least one record")
    base_timestamp = records[0][3]
    split = None
    if separate is not None and _encode_record_parts is not None:
        split = _encode_record_parts(records, base_timestamp, separate)
    body: list[bytes] | list[bytes | bytearray]
    if split is not None:
        body, max_timestamp = split
    else:
        encoded = _encode_records(records, base_timestamp) if _encode_records is not None else None
        data, max_timestamp = encoded if encoded is not None else _py_encode_records(records, base_timestamp)
        body = [data]
    attributes = int(timestamp_type) << 3
    if transactional:
        attributes |= _TRANSACTIONAL_BIT
    if control:
        attributes |= _CONTROL_BIT
    head = _AFTER_CRC_HEAD.pack(
        attributes,
        len(records) - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    crc = crc32c(head)
    size = len(head) + 9  # + leader epoch, magic, crc
    for part in body:
        crc = crc32c(part, crc)
        size += len(part)
    prefix = _BEFORE_CRC.pack(base_offset, size, partition_leader_epoch, CURRENT_MAGIC, crc)
    return prefix + head, *body


_AFTER_CRC_HEAD = struct.Struct(">hiqqqhii")
_BEFORE_CRC = struct.Struct(">qiibI")


def _py_encode_records(records: list[RecordSpec], base_timestamp: int) -> tuple[bytearray, int]:
    """The records area of a batch and its largest timestamp: the reference, and the
    fallback where the native ``encode_records`` (``_recordwalk.c``) is not built or declines
    a record of another shape (it encodes bytes/None fields and tuple headers)."""
    body = bytearray()
    for delta, (key, value, headers, timestamp) in enumerate(records):
        record = bytearray(b"\x00")
        _write_varint(record, timestamp - base_timestamp)
        _write_varint(record, delta)
        _write_nullable(record, key)
        _write_nullable(record, value)
        _write_varint(record, len(headers))
        for name, header_value in headers:
            _write_nullable(record, name.encode() if isinstance(name, str) else name)
            _write_nullable(record, header_value)
        _write_varint(body, len(record))
        body += record
    return body, max(r[3] for r in records)


def _write_varint(out: bytearray, value: int) -> None:
    value = (value << 1) ^ (value >> 63)  # zig-zag, valid for varlongs too
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _write_nullable(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(value))
        out += value


def build_retained_batch(
    header: BatchHeader,
    records: Sequence[Record],
    *,
    delete_horizon_ms: int | None,
    compress: Callable[[int, bytes], bytes],
) -> bytes:
    """A batch rewritten by the log cleaner: ``header``'s base offset, last offset delta,
    producer id, epoch, base sequence, leader epoch and attributes are kept (so retained
    records keep their offsets and sequences, gaps and all: Kafka's ``filterTo``), holding
    only ``records`` (:class:`~trikafka.protocol.batch_layout.Record`, non-empty).

    With ``delete_horizon_ms`` the delete-horizon bit is set and the base timestamp is the
    horizon; record timestamps stay right because their deltas are taken from it (KIP-534).
    ``compress(codec, body)`` re-compresses the records with the batch's own codec.
    """
    h = header
    attributes = h.attributes & ~DELETE_HORIZON_BIT
    log_append = bool(attributes & _TIMESTAMP_TYPE_BIT)
    timestamps = [r.timestamp for r in records]
    base_timestamp = delete_horizon_ms if delete_horizon_ms is not None else min(timestamps)
    max_timestamp = h.max_timestamp if log_append else max(timestamps)
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_BIT
    body = bytearray()
    for r in records:
        record = bytearray(b"\x00")
        _write_varint(record, 0 if log_append else r.timestamp - base_timestamp)
        _write_varint(record, r.offset - h.base_offset)
        _write_nullable(record, r.key)
        _write_nullable(record, r.value)
        _write_varint(record, len(r.headers))
        for name, header_value in r.headers:
            _write_nullable(record, name.encode() if isinstance(name, str) else name)
            _write_nullable(record, header_value)
        _write_varint(body, len(record))
        body += record
    codec = attributes & 0x07
    payload = compress(codec, bytes(body)) if codec else bytes(body)
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            h.last_offset_delta,
            base_timestamp,
            max_timestamp,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            len(records),
        )
        + payload
    )
    return (
        struct.pack(
            ">qiibI", h.base_offset, len(after_crc) + 9, h.partition_leader_epoch, CURRENT_MAGIC, crc32c(after_crc)
        )
        + after_crc
    )


# --- transaction control batches ------------------------------------------------------------


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
    coordinator_epoch: int = 0,
    timestamp_ms: int = 0,
) -> bytes:
    """An end-transaction marker: a transactional control batch of one record whose key is
    (version 0, type ABORT 0 / COMMIT 1) and whose value is (version 0, coordinator epoch)."""
    return build_batch(
        [
            (
                _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT),
                _MARKER_VALUE.pack(0, coordinator_epoch),
                [],
                timestamp_ms,
            )
        ],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )
