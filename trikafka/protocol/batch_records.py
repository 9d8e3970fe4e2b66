"""The records of a stored batch, compressed or not — for the broker's own rare needs.

The data path never decodes records: Produce validates them in place and Fetch returns the
stored bytes. Two rules need the records themselves: a compacted topic refuses records
without a key (Kafka's LogValidator), and the log cleaner keeps the last record per key. Both
read batches through :func:`decode_records`, which inflates a compressed batch first.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from trikafka.protocol.batch_layout import BATCH_HEADER_SIZE, BatchHeader, Compression, Record
from trikafka.protocol.compression import decompress
from trikafka.protocol.records import iter_batches, iter_records

__all__ = ["decode_records", "keyless_records"]

_ATTRIBUTES_AT = 21
_COMPRESSION_MASK = 0x07


def decode_records(data: bytes | bytearray | memoryview, header: BatchHeader) -> list[Record]:
    """Every record of the batch at ``header.position`` in ``data``, inflated if compressed."""
    if header.compression == Compression.NONE:
        return list(iter_records(data, header))
    view = memoryview(data)
    body = decompress(header.compression, view[header.position + BATCH_HEADER_SIZE : header.end])
    # A copy of the header with the codec cleared and the plain records after it: the
    # uncompressed walk then reads it as is (offsets and timestamps are the header's).
    head = bytearray(view[header.position : header.position + BATCH_HEADER_SIZE])
    (attributes,) = struct.unpack_from(">h", head, _ATTRIBUTES_AT)
    struct.pack_into(">h", head, _ATTRIBUTES_AT, attributes & ~_COMPRESSION_MASK)
    plain = bytes(head) + body
    inflated = BatchHeader(
        position=0,
        size=len(plain),
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        magic=header.magic,
        crc=header.crc,
        attributes=attributes & ~_COMPRESSION_MASK,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=header.record_count,
    )
    return list(iter_records(plain, inflated))


def keyless_records(data: bytes | bytearray | memoryview, headers: Iterable[BatchHeader] | None = None) -> list[int]:
    """Indexes of the records without a key, counted per batch as Kafka's LogValidator
    counts them (control batches, whose records always have keys, are skipped)."""
    found: list[int] = []
    for header in iter_batches(data, validate_records=False) if headers is None else headers:
        if header.is_control:
            continue
        found.extend(i for i, record in enumerate(decode_records(data, header)) if record.key is None)
    return found
