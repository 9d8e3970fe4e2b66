"""The four codecs, Kafka's framings, and batch re-encoding."""

from __future__ import annotations

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trikafka.errors import CorruptRecordError
from trikafka.protocol.compression import compress, decompress, recompress_batches
from trikafka.protocol.records import build_batch, iter_batches, iter_records

CODECS = [0, 1, 2, 3, 4]


@settings(derandomize=True, max_examples=50)
@given(data=st.binary(max_size=100_000), codec=st.sampled_from(CODECS))
def test_round_trip(data, codec):
    assert decompress(codec, compress(codec, data)) == data


def test_snappy_uses_xerial_framing_and_reads_raw_blocks():
    data = b"kafka " * 20_000  # more than one 32 KiB xerial block
    framed = compress(2, data)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert decompress(2, framed) == data
    assert decompress(2, bytes(cramjam.snappy.compress_raw(data))) == data


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_is_a_corrupt_record(codec):
    with pytest.raises(CorruptRecordError):
        decompress(
            codec,
            b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09garbage!!"
            if codec == 2
            else b"not compressed at all",
        )


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_recompressed_batches_keep_their_records(source, target):
    records = [(b"k%d" % i, b"v" * i, [("h", b"%d" % i)], 1_000 + i) for i in range(20)]
    plain = build_batch(records, producer_id=7, producer_epoch=1, base_sequence=3)
    batch = recompress_batches(plain, list(iter_batches(plain)), source)
    again = recompress_batches(batch, list(iter_batches(batch)), target)
    (header,) = iter_batches(again)  # validates the rewritten length and CRC
    assert header.attributes & 0x07 == target
    assert (header.producer_id, header.base_sequence, header.record_count) == (7, 3, 20)
    decoded = recompress_batches(again, [header], 0)
    (plain_header,) = iter_batches(decoded)
    got = [(r.key, r.value, r.timestamp) for r in iter_records(decoded, plain_header)]
    assert got == [(k, v, ts) for k, v, _, ts in records]
