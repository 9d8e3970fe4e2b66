"""Reading back what a test produced: raw kio Fetch over the broker's own test connection.

Independent of the code under test (the producer): batches are decoded with the protocol
layer's functions, compressed ones decompressed first, and a read_committed view applies the
broker's aborted-transaction list the way Kafka's consumers do.
"""

from __future__ import annotations

import struct

from trikafka.protocol.compression import decompress
from trikafka.protocol.entities import build
from trikafka.protocol.records import (
    BATCH_HEADER_SIZE,
    iter_batches,
    iter_records,
    parse_batch_header,
)
from trikafka.protocol.registry import ApiVersionSpec

FETCH = ApiVersionSpec.resolve(1, 12)


async def fetch(test_broker, topic: str, partition: int = 0, *, committed: bool = False):
    """The partition's FetchResponse entry from offset 0 (one round, up to 10 MB)."""
    async with test_broker.client() as connection:
        answer = await connection.request(
            build(
                FETCH.request_type, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=10_000_000,
                isolation_level=int(committed), session_id=0, session_epoch=-1,
                topics=[{"topic": topic, "partitions": [{
                    "partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
                    "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 10_000_000,
                }]}],
                forgotten_topics_data=[], rack_id="",
            )
        )
    return answer.responses[0].partitions[0]


def batches(data: bytes):
    """(header, [records]) per batch; compressed batches are decompressed to read them."""
    out = []
    for header in iter_batches(data, validate_records=False):
        raw = bytes(data[header.position : header.end])
        if header.compression:
            body = decompress(header.compression, raw[BATCH_HEADER_SIZE:])
            raw = bytearray(raw[:BATCH_HEADER_SIZE]) + body
            struct.pack_into(">h", raw, 21, header.attributes & ~0x07)
            struct.pack_into(">i", raw, 8, len(raw) - 12)
        plain = parse_batch_header(raw)
        out.append((header, list(iter_records(raw, plain))))
    return out


def committed_view(partition) -> list[bytes | None]:
    """Values a read_committed consumer delivers: neither control records nor aborted ones."""
    aborted = {t.first_offset: t.producer_id for t in partition.aborted_transactions or ()}
    dropping: set[int] = set()
    out = []
    for header, records in batches(partition.records):
        if aborted.get(header.base_offset) == header.producer_id:
            dropping.add(header.producer_id)
        if header.is_control:
            dropping.discard(header.producer_id)
            continue
        if header.producer_id not in dropping:
            out += [r.value for r in records]
    return out


def values(partition) -> list[bytes | None]:
    return [r.value for header, records in batches(partition.records) if not header.is_control for r in records]
