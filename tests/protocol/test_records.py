"""Record batches v2: round-trips, patching, and malformed input, with bytes alone.

The property tests are deterministic (``derandomize=True``) and keep no example database, so
CI sees the same examples every run and nothing is written to the working tree. Every test
runs twice: with the pure-Python record walk and with the native one (``record_walks.py``).
"""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from trikafka.errors import CorruptRecordError, ErrorCode, InvalidRecordError, KafkaProtocolError
from trikafka.protocol import records as records_module
from trikafka.protocol.records import (
    BATCH_HEADER_SIZE,
    Compression,
    TimestampType,
    _read_varint,
    assign_offsets,
    build_batch,
    iter_batches,
    iter_records,
    parse_batch_header,
    rebase_batch_parts,
    rebase_batches,
)

from .record_walks import WALKS

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None, max_examples=150)

records_st = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=40),
        st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=2),
        st.integers(min_value=0, max_value=2**41),
    ),
    min_size=1,
    max_size=5,
)
batches_st = st.lists(records_st, min_size=1, max_size=3)


@pytest.fixture(autouse=True, scope="module", params=sorted(WALKS))
def record_walk(request):
    """Run the module's tests with each walk in turn behind ``iter_batches``."""
    walk = WALKS[request.param]()
    saved = records_module._walk_records
    records_module._walk_records = walk
    yield walk
    records_module._walk_records = saved


# Bytes the CRC does not cover and that do not decide where the batch ends.
UNCOVERED = set(range(0, 8)) | set(range(12, 16))


def concat(batches: list[list]) -> tuple[bytes, list[int]]:
    out, bases, offset = b"", [], 0
    for records in batches:
        bases.append(offset)
        out += build_batch(records, offset)
        offset += len(records)
    return out, bases


def with_crc(batch: bytearray) -> bytearray:
    batch[17:21] = struct.pack(">I", crc32c(bytes(batch[21:])))
    return batch


@DETERMINISTIC
@given(batches_st)
def test_build_then_iter_round_trips(batches):
    data, bases = concat(batches)
    headers = list(iter_batches(data))
    assert [h.base_offset for h in headers] == bases
    assert sum(h.size for h in headers) == len(data)
    for header, records in zip(headers, batches, strict=True):
        assert header.magic == 2
        assert header.record_count == len(records) == header.last_offset_delta + 1
        assert header.compression == Compression.NONE
        assert header.timestamp_type == TimestampType.CREATE_TIME
        assert header.max_timestamp == max(r[3] for r in records)
        assert header == parse_batch_header(data, header.position)
        decoded = list(iter_records(data, header))
        assert [r.offset for r in decoded] == list(range(header.base_offset, header.next_offset))
        assert [(r.key, r.value, r.timestamp) for r in decoded] == [
            (k, v, ts) for k, v, _, ts in records
        ]
        assert [r.headers for r in decoded] == [
            tuple((name, value) for name, value in hs) for _, _, hs, _ in records
        ]


@DETERMINISTIC
@given(records_st, st.data())
def test_a_flipped_byte_is_rejected_unless_the_crc_does_not_cover_it(records, data):
    batch = bytearray(build_batch(records, 7))
    index = data.draw(st.integers(0, len(batch) - 1), label="index")
    batch[index] ^= data.draw(st.integers(1, 255), label="mask")
    if index in UNCOVERED:
        (header,) = iter_batches(batch)
        assert header.size == len(batch)
    else:
        with pytest.raises(KafkaProtocolError):
            list(iter_batches(batch))


@DETERMINISTIC
@given(batches_st, st.data())
def test_any_truncation_is_a_corrupt_record(batches, data):
    whole, _ = concat(batches)
    last = list(iter_batches(whole))[-1]
    cut = data.draw(st.integers(last.position + 1, len(whole) - 1), label="cut")
    with pytest.raises(CorruptRecordError):
        list(iter_batches(whole[:cut]))


@DETERMINISTIC
@given(st.binary(max_size=200))
def test_any_bytes_parse_or_raise_the_protocol_error(data):
    try:
        list(iter_batches(data))
    except KafkaProtocolError:
        pass


@DETERMINISTIC
@given(st.binary(max_size=120), st.integers(0, 6), st.integers(-2, 6))
def test_any_records_area_with_a_valid_crc_parses_or_raises_the_protocol_error(
    body, count, last_delta
):
    """Get past the CRC into the record walker, which then sees arbitrary bytes."""
    batch = bytearray(build_batch([(None, b"x", [], 0)]))[:BATCH_HEADER_SIZE] + body
    batch[8:12] = struct.pack(">i", len(batch) - 12)
    batch[23:27] = struct.pack(">i", last_delta)
    batch[57:61] = struct.pack(">i", count)
    try:
        for header in iter_batches(with_crc(batch)):
            list(iter_records(batch, header))
    except KafkaProtocolError:
        pass


@DETERMINISTIC
@given(batches_st, st.integers(0, 2**40), st.integers(0, 2**31 - 1))
def test_assign_offsets_patches_in_place_and_keeps_crcs_valid(batches, base, epoch):
    data, _ = concat(batches)
    buffer = bytearray(data)
    next_offset, max_ts, offset_of_max = assign_offsets(buffer, base, leader_epoch=epoch)
    headers = list(iter_batches(buffer))
    assert next_offset == base + sum(len(r) for r in batches)
    assert [h.base_offset for h in headers][0] == base
    assert all(a.next_offset == b.base_offset for a, b in zip(headers, headers[1:], strict=False))
    assert all(h.partition_leader_epoch == epoch for h in headers)
    assert max_ts == max(h.max_timestamp for h in headers)
    holder = next(h for h in headers if h.max_timestamp == max_ts)
    assert offset_of_max == holder.last_offset
    # Only the uncovered fields changed.
    assert all(buffer[h.position + 16 : h.end] == data[h.position + 16 : h.end] for h in headers)


@DETERMINISTIC
@given(batches_st, st.integers(0, 2**41))
def test_assign_offsets_with_log_append_time(batches, now):
    data, _ = concat(batches)
    buffer = bytearray(data)
    next_offset, max_ts, offset_of_max = assign_offsets(buffer, 100, log_append_time_ms=now)
    assert (max_ts, offset_of_max) == (now, 100)
    for header, original in zip(iter_batches(buffer), iter_batches(data), strict=True):
        assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
        assert header.max_timestamp == now
        assert header.base_timestamp == original.base_timestamp  # Kafka's in-place path
        assert all(r.timestamp == now for r in iter_records(buffer, header))


@DETERMINISTIC
@given(batches_st, st.integers(0, 2**40), st.integers(0, 2**31 - 1), st.none() | st.integers(0, 2**41))
def test_rebase_batches_is_assign_offsets_then_a_parse(batches, base, epoch, now):
    """The log's one-parse path: the same bytes as assign_offsets, and headers equal to the
    ones a second parse of the patched bytes gives."""
    data, _ = concat(batches)
    reference = bytearray(data)
    next_offset, _, _ = assign_offsets(reference, base, leader_epoch=epoch, log_append_time_ms=now)
    buffer = bytearray(data)
    patched = rebase_batches(
        buffer, list(iter_batches(buffer)), base, leader_epoch=epoch, log_append_time_ms=now
    )
    assert buffer == reference
    assert patched == [parse_batch_header(reference, h.position) for h in patched]
    assert patched[-1].next_offset == next_offset


def test_old_message_formats_are_unsupported():
    for magic in (0, 1):
        legacy = bytearray(build_batch([(None, b"v", [], 0)]))
        legacy[16] = magic
        with pytest.raises(KafkaProtocolError) as info:
            list(iter_batches(legacy))
        assert info.value.error_code == ErrorCode.unsupported_for_message_format


def test_record_count_must_match_the_offsets():
    batch = bytearray(build_batch([(None, b"a", [], 0), (None, b"b", [], 0)]))
    batch[57:61] = struct.pack(">i", 3)
    with pytest.raises(InvalidRecordError):
        list(iter_batches(with_crc(batch)))


def test_record_walk_catches_a_record_count_the_records_do_not_hold():
    batch = bytearray(build_batch([(None, b"a", [], 0), (None, b"b", [], 0)]))
    batch[57:61] = struct.pack(">i", 1)
    batch[23:27] = struct.pack(">i", 0)
    with pytest.raises(InvalidRecordError):
        list(iter_batches(with_crc(batch)))
    (header,) = iter_batches(batch, validate_records=False)  # header-level checks only
    assert header.record_count == 1


def test_compressed_batches_are_not_walked_nor_decompressed():
    batch = bytearray(build_batch([(None, b"a", [], 0)]))
    batch[21:23] = struct.pack(">h", Compression.ZSTD)
    batch[BATCH_HEADER_SIZE:] = b"\xff" * (len(batch) - BATCH_HEADER_SIZE)  # not records
    (header,) = iter_batches(with_crc(batch))
    assert header.compression == Compression.ZSTD
    batch[21:23] = struct.pack(">h", 5)
    with pytest.raises(KafkaProtocolError) as info:
        list(iter_batches(with_crc(batch)))
    assert info.value.error_code == ErrorCode.unsupported_compression_type


def test_transactional_batches_need_a_producer_id():
    with pytest.raises(InvalidRecordError):
        list(iter_batches(build_batch([(None, b"a", [], 0)], transactional=True)))
    batch = build_batch([(None, b"a", [], 0)], transactional=True, producer_id=5)
    (header,) = iter_batches(batch)
    assert header.is_transactional and not header.is_control and header.producer_id == 5


def test_kafka_python_reads_our_batches_and_we_read_its_batches():
    import kafka.record.default_records as kafka
    from kafka.record.memory_records import MemoryRecords

    ours = build_batch([(b"k", b"v", [("h", b"x")], 1000), (None, None, [], 999)], 5)
    theirs = MemoryRecords(ours).next_batch()
    assert theirs.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs] == [
        (5, 1000, b"k", b"v", [("h", b"x")]),
        (6, 999, None, None, []),
    ]
    builder = kafka.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 16,
    )
    builder.append(0, timestamp=10, key=b"a", value=b"b", headers=[("x", b"y")])
    builder.append(1, timestamp=5, key=None, value=None, headers=[])
    data = bytes(builder.build())
    (header,) = iter_batches(data)
    assert [(r.offset, r.timestamp, r.key, r.headers) for r in iter_records(data, header)] == [
        (0, 10, b"a", (("x", b"y"),)),
        (1, 5, None, ()),
    ]


def _reference_walk(view, position, end, count):
    """Every field through _read_varint: the record walk without its inline fast path."""
    for index in range(count):
        if position >= end:
            raise InvalidRecordError("too few records")
        length, position = _read_varint(view, position, end)
        record_end = position + length
        if length <= 0 or record_end > end:
            raise InvalidRecordError("bad record size")
        p = position + 1
        _, p = _read_varint(view, p, record_end, 10)
        delta, p = _read_varint(view, p, record_end)
        for minimum in (-1, -1):
            size, p = _read_varint(view, p, record_end)
            if size < minimum:
                raise InvalidRecordError("bad key/value size")
            p += max(size, 0)
        headers, p = _read_varint(view, p, record_end)
        if headers < 0:
            raise InvalidRecordError("bad header count")
        for _ in range(headers):
            for minimum in (0, -1):
                size, p = _read_varint(view, p, record_end)
                if size < minimum:
                    raise InvalidRecordError("bad header size")
                p += max(size, 0)
        if p != record_end or delta != index:
            raise InvalidRecordError("bad record")
        position = record_end
    if position != end:
        raise InvalidRecordError("trailing bytes")


# Sizes around the varint byte boundaries (63/64 is where zig-zag needs a second byte).
_sized = st.sampled_from([0, 1, 63, 64, 65, 127, 128, 200, 8191, 8192]).map(lambda n: b"x" * n)
_record_strategy = st.tuples(
    st.none() | _sized | st.binary(max_size=100),
    st.none() | _sized | st.binary(max_size=100),
    st.lists(st.tuples(st.text(max_size=70), st.none() | st.binary(max_size=70)), max_size=2),
    st.integers(0, 2**40),
)


@DETERMINISTIC
@given(
    records=st.lists(_record_strategy, min_size=1, max_size=5)
    # 64+ records: offset deltas need two varint bytes
    | st.lists(st.just((None, b"v", [], 0)), min_size=60, max_size=140),
    edits=st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=3),
    count_change=st.integers(-1, 1),
)
def test_record_walk_agrees_with_a_varint_by_varint_walk(record_walk, records, edits, count_change):
    """The walk's inline one-byte varints accept and refuse exactly what reading every varint
    with _read_varint does — on good records (multi-byte sizes and timestamps included) and on
    records with bytes overwritten."""
    batch = bytearray(build_batch(records))
    area = range(BATCH_HEADER_SIZE, len(batch))
    for where, value in edits:
        batch[area[where % len(area)]] = value
    count = len(records) + count_change
    view = memoryview(bytes(batch))
    outcomes = []
    for walk in (
        lambda: record_walk(view, BATCH_HEADER_SIZE, len(view), count, 0),
        lambda: _reference_walk(view, BATCH_HEADER_SIZE, len(view), count),
    ):
        try:
            walk()
            outcomes.append("ok")
        except InvalidRecordError:
            outcomes.append("invalid")
    assert outcomes[0] == outcomes[1]
    if not edits and not count_change:
        assert outcomes == ["ok", "ok"]


@pytest.mark.parametrize("append_time", [None, 1_800_000_000_123], ids=["create-time", "log-append-time"])
def test_rebase_batch_parts_writes_what_rebase_batches_patches(append_time):
    """The parts (each batch's patched header copy, then its records where they are) are the
    bytes rebase_batches patches in place, with the same headers; the input is not touched."""
    data = b"".join(
        build_batch([(b"k", b"v%d" % i * size, [], 1_700_000_000_000 + i) for i in range(count)])
        for count, size in ((3, 5_000), (1, 1), (40, 100))
    )
    headers = list(iter_batches(data))
    patched = bytearray(data)
    expected = rebase_batches(patched, headers, 1234, leader_epoch=7, log_append_time_ms=append_time)

    got, parts = rebase_batch_parts(
        memoryview(data).toreadonly(), headers, 1234, leader_epoch=7, log_append_time_ms=append_time
    )

    assert b"".join(parts) == patched
    assert got == expected
    assert list(iter_batches(b"".join(parts))) == expected  # CRCs hold
    assert bytes(data) == bytes(memoryview(data))  # unchanged
    assert [h.base_offset for h in got] == [1234, 1237, 1238]
