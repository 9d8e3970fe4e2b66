"""Reading the records inside a batch: the client's (and tests') side of ``records.py``.

The broker never needs record contents (it walks them to validate, in ``records.py``); the
consumer decodes every one, so this is its hottest loop. Each decoder has a pure-Python
reference here and a native twin in ``_recordwalk.c`` that answers the same or declines (then
the reference answers), as the walk does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from trikafka.errors import ErrorCode, InvalidRecordError, KafkaProtocolError
from trikafka.protocol.batch_layout import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    Compression,
    Record,
    TimestampType,
)
from trikafka.protocol.native import native_extension

__all__ = ["RecordTuple", "iter_records", "record_objects", "record_tuples"]


_extension = native_extension()
# An extension built before the decoders existed (a checkout not rebuilt since) leaves
# decoding to the references.
_decode_records: Callable[..., list[RecordTuple] | None] | None = getattr(_extension, "decode_records", None)
_record_objects: Callable[..., list[Any] | None] | None = getattr(_extension, "record_objects", None)


def _read_varint(
    view: memoryview | bytes, position: int, end: int, max_bytes: int = 5
) -> tuple[int, int]:
    """Read a zig-zag varint (``max_bytes`` 5) or varlong (10); return (value, next position)."""
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if position >= end:
            raise InvalidRecordError("record ends inside a varint")
        byte = view[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
    raise InvalidRecordError(f"varint longer than {max_bytes} bytes")


RecordTuple = tuple[int, int, "bytes | None", "bytes | None", tuple[tuple[str, "bytes | None"], ...]]


def record_tuples(data: bytes | bytearray | memoryview, header: BatchHeader) -> Iterable[RecordTuple]:
    """The records of one uncompressed batch as ``(offset, timestamp, key, value, headers)``.

    What :func:`iter_records` yields, without a :class:`Record` per record: the consumer's
    hot loop (at 100-byte messages it spent ~90 % of its time here in Python). The native
    decoder (``_recordwalk.c``) answers with a list at once; where it declines (a record the
    reference refuses or reads oddly) or is not built, the pure-Python reference generator
    runs from the batch's start, so the answers, good records before a bad one and the
    error, are the reference's own. Raises for a compressed batch at once.
    """
    if header.compression != Compression.NONE:
        raise KafkaProtocolError(
            "decoding compressed batches is not supported yet",
            ErrorCode.unsupported_compression_type,
        )
    position = header.position + BATCH_HEADER_SIZE
    append_time = (
        header.max_timestamp if header.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    )
    if _decode_records is not None:
        decoded = _decode_records(
            data, position, header.end, header.record_count, header.base_offset,
            header.base_timestamp, append_time,
        )
        if decoded is not None:
            return decoded
    return _py_record_tuples(
        memoryview(data), position, header.end, header.record_count, header.base_offset,
        header.base_timestamp, append_time,
    )


def record_objects(
    data: bytes | bytearray | memoryview,
    header: BatchHeader,
    cls: type,
    record_slots: tuple[Any, ...],
    constant_slots: tuple[Any, ...],
    constants: tuple[Any, ...],
    floor: int,
) -> list[Any] | None:
    """The records of an uncompressed batch from ``floor`` on as ``cls`` instances made in C,
    or None: not built, or a record the reference must answer (use :func:`record_tuples`).

    ``cls`` is a slotted class whose ``__init__`` only stores its arguments (an attrs class
    without converters, validators or post-init); ``record_slots`` are its member descriptors
    for offset, timestamp, key, value and headers, ``constants[i]`` goes into
    ``constant_slots[i]``. Why: attrs' frozen ``__init__`` cost the consumer more per record
    than decoding it did (~1.1 us for nine fields).

    The instances are not tracked by the cyclic GC (their fields cannot lead back to them),
    so ``constants`` must be immutable values: a container that could come to hold the
    record would make a cycle the GC never sees.
    """
    if _record_objects is None or header.compression != Compression.NONE:
        return None
    append_time = (
        header.max_timestamp if header.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    )
    return _record_objects(
        data, header.position + BATCH_HEADER_SIZE, header.end, header.record_count,
        header.base_offset, header.base_timestamp, append_time,
        cls, record_slots, constant_slots, constants, floor,
    )


def _py_record_tuples(
    view: memoryview,
    position: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    append_time: int | None,
) -> Iterator[RecordTuple]:
    """The reference decoder (and the fallback where ``_recordwalk`` is not built); the
    native ``decode_records`` takes the same arguments and answers the same, or declines."""
    for _ in range(count):
        length, position = _read_varint(view, position, end)
        record_end = position + length
        position += 1
        ts_delta, position = _read_varint(view, position, record_end, 10)
        offset_delta, position = _read_varint(view, position, record_end)
        key, position = _read_bytes(view, position, record_end)
        value, position = _read_bytes(view, position, record_end)
        count, position = _read_varint(view, position, record_end)
        headers = []
        for _ in range(count):
            name, position = _read_bytes(view, position, record_end)
            header_value, position = _read_bytes(view, position, record_end)
            headers.append(((name or b"").decode("utf-8", "replace"), header_value))
        yield (
            base_offset + offset_delta,
            base_timestamp + ts_delta if append_time is None else append_time,
            key,
            value,
            tuple(headers),
        )
        position = record_end


def iter_records(data: bytes | bytearray | memoryview, header: BatchHeader) -> Iterator[Record]:
    """Decode the records of one uncompressed batch found by ``records.iter_batches``.

    For the client and tests; the broker itself never needs record contents. A LogAppendTime
    batch gives every record the batch's max timestamp, as Kafka does.
    """
    for fields in record_tuples(data, header):
        yield Record(*fields)


def _read_bytes(view: memoryview, position: int, end: int) -> tuple[bytes | None, int]:
    size, position = _read_varint(view, position, end)
    if size < 0:
        return None, position
    if position + size > end:
        raise InvalidRecordError("record field runs past the end of its record")
    return bytes(view[position : position + size]), position + size
