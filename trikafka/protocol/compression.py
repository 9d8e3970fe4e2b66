"""Record-batch compression: the four Kafka codecs, through cramjam.

cramjam is one maintained library (Rust bindings) that covers gzip, snappy, lz4 and zstd with
no system dependencies, where the alternatives need four packages of uneven upkeep.

Kafka's framings: gzip is plain gzip; lz4 is the LZ4 *frame* format (KIP-57); zstd is a
standard zstd frame; snappy is written in the xerial/snappy-java framing that every client
reads (magic ``\\x82SNAPPY\\x00``, then length-prefixed blocks) and read in either that framing
or raw snappy, since librdkafka may send raw blocks.

The broker only decompresses when a topic's ``compression.type`` asks for a codec other than
the producer's; then each batch's records section is re-encoded with the topic's codec and the
batch header (attributes, length, CRC-32C) rewritten. Records themselves are never touched.
"""

from __future__ import annotations

import struct
from typing import Any

import cramjam

from trikafka.errors import CorruptRecordError
from trikafka.protocol.batch_layout import (
    _ATTRIBUTES_AT,
    _BATCH_LENGTH_AT,
    _COMPRESSION_MASK,
    _CRC_AT,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
)
from trikafka.protocol.crc import crc32c

__all__ = ["CODECS", "compress", "decompress", "recompress_batches", "codec_id"]

CODECS = {"uncompressed": 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_NAMES = {0: "uncompressed", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def codec_id(name: str) -> int:
    return CODECS[name]


def compress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return bytes(data)
    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(bytes(view[start : start + _XERIAL_BLOCK])))
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == 3:
        return bytes(cramjam.lz4.compress(data))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    raise CorruptRecordError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == 0:
            return bytes(data)
        if codec == 1:
            return bytes(cramjam.gzip.decompress(bytes(data)))
        if codec == 2:
            return _snappy_decompress(bytes(data))
        if codec == 3:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == 4:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except CorruptRecordError:
        raise
    except Exception as exc:  # the codec's own error: the producer sent bad bytes
        raise CorruptRecordError(f"cannot decompress {_NAMES.get(codec, codec)} records: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    position = len(_XERIAL_HEADER)
    while position < len(data):
        if position + 4 > len(data):
            raise CorruptRecordError("truncated xerial snappy block")
        (size,) = struct.unpack_from(">i", data, position)
        position += 4
        out += cramjam.snappy.decompress_raw(data[position : position + size])
        position += size
    return bytes(out)


def recompress_batches(data: bytes | bytearray, headers: list[Any], target: int) -> bytearray:
    """Re-encode every batch whose codec is not ``target``; headers from ``iter_batches``."""
    out = bytearray()
    for header in headers:
        batch = memoryview(data)[header.position : header.position + header.size]
        current = header.attributes & _COMPRESSION_MASK
        if current == target:
            out += batch
            continue
        records = decompress(current, batch[BATCH_HEADER_SIZE:])
        body = compress(target, records)
        attributes = (header.attributes & ~_COMPRESSION_MASK) | target
        rebuilt = bytearray(batch[:BATCH_HEADER_SIZE]) + body
        struct.pack_into(">i", rebuilt, _BATCH_LENGTH_AT, len(rebuilt) - LOG_OVERHEAD)
        struct.pack_into(">h", rebuilt, _ATTRIBUTES_AT, attributes)
        struct.pack_into(">I", rebuilt, _CRC_AT, crc32c(bytes(rebuilt[_ATTRIBUTES_AT:])))
        out += rebuilt
    return out
