"""Decoding Fetch answers: partial batches, compression, offsets inside a batch, read_committed."""

from __future__ import annotations

import struct

import pytest

from trikafka.client.fetcher import RecordDecodeError, decode_partition
from trikafka.protocol.records import build_batch, build_control_batch


def batch(base, values, **kwargs):
    data = bytearray(build_batch([(None, v, [], 1000) for v in values], **kwargs))
    struct.pack_into(">q", data, 0, base)
    return bytes(data)


def compressed(base, values, codec):
    plain = batch(base, values)
    from trikafka.protocol.compression import recompress_batches
    from trikafka.protocol.records import iter_batches

    rebuilt = recompress_batches(plain, list(iter_batches(plain)), codec)
    return bytes(rebuilt)


def values(fetched):
    return [r.value for r in fetched.records]


def test_plain_batches_and_next_offset():
    data = batch(0, [b"a", b"b"]) + batch(2, [b"c"])
    fetched = decode_partition("t", 0, data, 0)
    assert values(fetched) == [b"a", b"b", b"c"] and fetched.next_offset == 3
    assert [r.offset for r in fetched.records] == [0, 1, 2]


def test_trailing_partial_batch_is_dropped():
    data = batch(0, [b"a"]) + batch(1, [b"b"])[:-5]
    fetched = decode_partition("t", 0, data, 0)
    assert values(fetched) == [b"a"] and fetched.next_offset == 1


def test_records_before_the_fetch_offset_are_skipped():
    fetched = decode_partition("t", 0, batch(10, [b"a", b"b", b"c"]), 11)
    assert values(fetched) == [b"b", b"c"] and fetched.next_offset == 13


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches(codec):
    fetched = decode_partition("t", 0, compressed(5, [b"x" * 100, b"y"], codec), 5)
    assert values(fetched) == [b"x" * 100, b"y"] and fetched.next_offset == 7


def test_corrupt_batch_is_refused():
    data = bytearray(batch(0, [b"a"]))
    data[-2] ^= 0xFF  # the value byte (the last is the header count)
    with pytest.raises(RecordDecodeError, match="CRC"):
        decode_partition("t", 0, bytes(data), 0)
    assert values(decode_partition("t", 0, bytes(data), 0, check_crcs=False)) == [b"\x9e"]


def txn(base, producer_id, values_):
    return batch(base, values_, producer_id=producer_id, producer_epoch=0, base_sequence=0, transactional=True)


def marker(base, producer_id, commit):
    data = bytearray(build_control_batch(producer_id, 0, commit=commit))
    struct.pack_into(">q", data, 0, base)
    return bytes(data)


def test_read_committed_skips_aborted_and_markers():
    data = (
        txn(0, 7, [b"aborted-1"])
        + txn(1, 8, [b"committed"])
        + marker(2, 7, commit=False)
        + marker(3, 8, commit=True)
        + txn(4, 7, [b"later"])
        + marker(5, 7, commit=True)
    )
    committed = decode_partition("t", 0, data, 0, read_committed=True, aborted_transactions=[(7, 0)])
    assert values(committed) == [b"committed", b"later"] and committed.next_offset == 6
    uncommitted = decode_partition("t", 0, data, 0)
    assert values(uncommitted) == [b"aborted-1", b"committed", b"later"]


def test_max_records_stops_inside_a_batch():
    fetched = decode_partition("t", 0, batch(0, [b"a", b"b", b"c"]), 0, max_records=2)
    assert values(fetched) == [b"a", b"b"] and fetched.next_offset == 2
