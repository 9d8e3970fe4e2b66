"""Reading Fetch answers: record batches in, consumer records and the next position out.

Pure functions and values (no trio). The consumer's fetch loop hands each partition's answer
— its record bytes, high watermark, last stable offset and aborted transactions — to
:func:`decode_partition`, which returns the records the application may see and the offset to
fetch next. The rules are the Java consumer's (``CompletedFetch``):

- Batches are found and CRC-checked with ``trikafka.protocol.records`` (``check.crcs``); a
  compressed batch is inflated with ``trikafka.protocol.compression`` and its records read by
  the same ``record_tuples`` — one codec for broker and client.
- A Fetch answer may end in a partial batch (the broker cuts at the size limit); it is dropped
  and fetched again from its start next time.
- Records below the fetch offset are skipped: a compressed batch is returned whole even when
  the fetch starts in its middle.
- ``read_committed``: the answer lists the aborted transactions (producer id, first offset) of
  the range. Walking batches in order, every aborted transaction whose first offset is at or
  before a batch's last offset marks its producer as aborted; a transactional data batch of an
  aborted producer is skipped; that producer's ABORT marker ends it. Control batches (the
  markers) are never shown to the application but advance the position. The broker already
  stops a read_committed answer at the last stable offset.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence

import attrs

from trikafka.errors import CorruptRecordError, InvalidRecordError, KafkaProtocolError
from trikafka.protocol.compression import decompress
from trikafka.protocol.records import (
    BATCH_HEADER_SIZE,
    CONTROL_ABORT,
    LOG_OVERHEAD,
    BatchHeader,
    Compression,
    TimestampType,
    control_type,
    iter_batches,
    parse_batch_header,
    record_objects,
    record_tuples,
)

__all__ = ["ConsumerRecord", "FetchedPartition", "RecordDecodeError", "decode_partition"]

_LENGTH = struct.Struct(">i")
_ATTRIBUTES_AT = 21


class RecordDecodeError(Exception):
    """A fetched batch is corrupt (CRC, sizes): Kafka's CorruptRecordException for the app."""


@attrs.frozen
class ConsumerRecord:
    """One record as the application sees it.

    Fetched records are made by the native decoder without calling ``__init__`` (each slot
    filled directly: attrs' frozen ``__init__`` cost more than decoding): a new field must be
    added to ``_RECORD_SLOTS`` or ``_CONSTANT_SLOTS`` below, and must need no converter or
    validator (a test holds the slots to the fields).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    leader_epoch: int = -1


@attrs.frozen
class FetchedPartition:
    records: tuple[ConsumerRecord, ...]
    next_offset: int  # where the next fetch starts


def _complete_prefix(data: memoryview) -> int:
    """Length of the whole batches at the front of ``data`` (a Fetch answer may be cut)."""
    position = 0
    total = len(data)
    while total - position >= LOG_OVERHEAD:
        size = _LENGTH.unpack_from(data, position + 8)[0] + LOG_OVERHEAD
        if size < BATCH_HEADER_SIZE or position + size > total:
            break
        position += size
    return position


def _inflate(view: memoryview, header: BatchHeader) -> tuple[bytearray, BatchHeader]:
    """The batch rewritten uncompressed, so ``record_tuples`` reads it (no CRC recomputed: the
    original was checked and this copy never leaves the process)."""
    records = decompress(header.compression, view[header.position + BATCH_HEADER_SIZE : header.end])
    rebuilt = bytearray(view[header.position : header.position + BATCH_HEADER_SIZE]) + records
    struct.pack_into(">i", rebuilt, 8, len(rebuilt) - LOG_OVERHEAD)
    struct.pack_into(">h", rebuilt, _ATTRIBUTES_AT, header.attributes & ~0x07)
    return rebuilt, parse_batch_header(rebuilt, 0)


def _plain(view: memoryview, header: BatchHeader) -> tuple[memoryview | bytearray, BatchHeader]:
    """The batch uncompressed (itself when it is)."""
    if header.compression == Compression.NONE:
        return view, header
    return _inflate(view, header)


#: ConsumerRecord's member descriptors, for the native decoder that fills them directly.
_RECORD_SLOTS = tuple(getattr(ConsumerRecord, name) for name in ("offset", "timestamp", "key", "value", "headers"))
_CONSTANT_SLOTS = tuple(
    getattr(ConsumerRecord, name) for name in ("topic", "partition", "timestamp_type", "leader_epoch")
)


def decode_partition(
    topic: str,
    partition: int,
    data: bytes | bytearray | memoryview | None,
    fetch_offset: int,
    *,
    read_committed: bool = False,
    aborted_transactions: Iterable[tuple[int, int]] = (),
    check_crcs: bool = True,
    max_records: int | None = None,
) -> FetchedPartition:
    """Decode one partition's records from a Fetch answer starting at ``fetch_offset``.

    ``max_records`` stops early (the next offset then points at the first record not taken).
    """
    if not data:
        return FetchedPartition((), fetch_offset)
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    view = view[: _complete_prefix(view)]
    aborted: Sequence[tuple[int, int]] = sorted(aborted_transactions, key=lambda a: a[1]) if read_committed else ()
    pending = list(aborted)
    aborted_producers: set[int] = set()
    out: list[ConsumerRecord] = []
    position = fetch_offset
    try:
        headers = iter_batches(view, validate_records=False) if check_crcs else _unchecked(view)
        for header in headers:
            if header.next_offset <= position:
                continue
            if read_committed:
                while pending and pending[0][1] <= header.last_offset:
                    aborted_producers.add(pending.pop(0)[0])
                if header.is_control:
                    if control_type(view, header) == CONTROL_ABORT:
                        aborted_producers.discard(header.producer_id)
                    position = header.next_offset
                    continue
                if header.is_transactional and header.producer_id in aborted_producers:
                    position = header.next_offset
                    continue
            elif header.is_control:
                position = header.next_offset
                continue
            timestamp_type, leader_epoch = header.timestamp_type, header.partition_leader_epoch
            data, plain = _plain(view, header)
            made = record_objects(
                data, plain, ConsumerRecord, _RECORD_SLOTS, _CONSTANT_SLOTS,
                (topic, partition, timestamp_type, leader_epoch), position,
            )
            if made is not None:
                if made:
                    room = len(made) if max_records is None else max_records - len(out)
                    if room < len(made):  # as the loop below: stop before the first not taken
                        out.extend(made[:room])
                        return FetchedPartition(tuple(out), made[room - 1].offset + 1 if room > 0 else position)
                    out.extend(made)
                    position = made[-1].offset + 1
                position = max(position, header.next_offset)
                continue
            for offset, timestamp, key, value, record_headers in record_tuples(data, plain):
                if offset < position:
                    continue
                if max_records is not None and len(out) >= max_records:
                    return FetchedPartition(tuple(out), position)
                out.append(
                    ConsumerRecord(
                        topic, partition, offset, timestamp, timestamp_type, key, value, record_headers, leader_epoch
                    )
                )
                position = offset + 1
            position = max(position, header.next_offset)
    except (CorruptRecordError, InvalidRecordError, KafkaProtocolError) as exc:
        if out:  # hand over what was good; the bad batch fails the next fetch at its offset
            return FetchedPartition(tuple(out), position)
        raise RecordDecodeError(f"{topic}-{partition} at offset {position}: {exc}") from exc
    return FetchedPartition(tuple(out), position)


def _unchecked(view: memoryview) -> Iterator[BatchHeader]:
    position = 0
    while position < len(view):
        header = parse_batch_header(view, position)
        yield header
        position = header.end
