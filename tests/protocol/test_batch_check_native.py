"""The native batch check (``_recordwalk.check_batch``) answers as the reference does.

``iter_batches`` asks the C check first and, when it says None, runs the Python reference
(``records._validate_batch``), which raises the error. The check must therefore never accept a
batch the reference refuses, and must hand back exactly the header the reference parses. Both
paths see the same bytes here: built batches (several in a row, transactional, with producer
ids, compressed attributes), the same with any byte overwritten (header included) and the CRC
fixed up or not, cut short, and raw bytes. Deterministic, no example database.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trikafka.errors import CorruptRecordError, InvalidRecordError
from trikafka.protocol import records
from trikafka.protocol.records import BATCH_HEADER_SIZE, build_batch, iter_batches

from .record_walks import WALKS, outcome
from .test_records import with_crc

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None, max_examples=400)


@pytest.fixture(scope="module")
def check():
    """The native check, installed in ``records`` for the module's tests even when
    ``TRIKAFKA_PURE_PYTHON`` keeps the broker on the reference (as ``record_walks`` does)."""
    walk = WALKS["native"]()  # fails (or skips under TRIKAFKA_PURE_PYTHON) when not built
    from trikafka.protocol import _recordwalk

    check_batch = getattr(_recordwalk, "check_batch", None)
    if check_batch is None:
        pytest.fail(
            "the native extension predates check_batch: rebuild it (`make install`, "
            "`pip install -e .` or `python setup.py build_ext --inplace`)"
        )

    saved = records._native_walk_records, records._check_batch
    records._native_walk_records, records._check_batch = walk, check_batch
    yield check_batch
    records._native_walk_records, records._check_batch = saved


def both(data: bytes, validate_records: bool) -> tuple[object, object]:
    """(native path, reference) answers of ``list(iter_batches(data))``."""
    saved_walk, saved_check = records._walk_records, records._check_batch
    try:
        records._walk_records = records._native_walk_records
        native = outcome_or_headers(data, validate_records)
        records._check_batch = None  # the reference alone, with the same (native) walk
        reference = outcome_or_headers(data, validate_records)
    finally:
        records._walk_records, records._check_batch = saved_walk, saved_check
    return native, reference


def outcome_or_headers(data: bytes, validate_records: bool) -> object:
    found: list = []
    answer = outcome(lambda: found.extend(iter_batches(data, validate_records=validate_records)))
    return found if answer == ("ok", "") else answer


_record = st.tuples(
    st.none() | st.binary(max_size=12),
    st.none() | st.binary(max_size=30),
    st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=6)), max_size=2),
    st.integers(0, 2**41),
)
_batch = st.tuples(
    st.lists(_record, min_size=1, max_size=5),
    st.sampled_from([-1, 0, 7, 2**40]),  # producer id
    st.booleans(),  # transactional
)


@DETERMINISTIC
@given(
    batches=st.lists(_batch, min_size=1, max_size=3),
    edits=st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=3),
    fix_crc=st.booleans(),
    cut=st.integers(0, 70) | st.just(0),
    validate_records=st.booleans(),
)
def test_native_check_and_reference_agree_on_built_and_mutated_batches(
    check, batches, edits, fix_crc, cut, validate_records
):
    data = bytearray()
    offset = 0
    for batch_records, producer_id, transactional in batches:
        batch = bytearray(
            build_batch(
                batch_records,
                offset,
                producer_id=producer_id,
                producer_epoch=0 if producer_id >= 0 else -1,
                base_sequence=0 if producer_id >= 0 else -1,
                transactional=transactional,
            )
        )
        for where, value in edits:
            batch[where % len(batch)] = value
        data += with_crc(batch) if fix_crc else batch
        offset += len(batch_records)
    data = bytes(data[: max(0, len(data) - cut)])
    native, reference = both(data, validate_records)
    assert native == reference
    if not (edits or cut) and not any(t and p < 0 for _, p, t in batches):
        assert isinstance(native, list) and len(native) == len(batches)


@DETERMINISTIC
@given(st.binary(max_size=200), st.booleans())
def test_native_check_and_reference_agree_on_raw_bytes(check, data, validate_records):
    native, reference = both(data, validate_records)
    assert native == reference


def _batch_with(**patch: int) -> bytes:
    """A valid one-record batch with header fields overwritten (CRC recomputed)."""
    batch = bytearray(build_batch([(b"k", b"v", [], 1_700_000_000_000)], 5))
    layout = {"magic": (16, ">b"), "attributes": (21, ">h"), "last_offset_delta": (23, ">i"),
              "producer_id": (43, ">q"), "record_count": (57, ">i"), "batch_length": (8, ">i")}
    for name, value in patch.items():
        at, fmt = layout[name]
        struct.pack_into(fmt, batch, at, value)
    return bytes(with_crc(batch))


@pytest.mark.parametrize(
    ("patch", "error"),
    [
        ({"magic": 1}, "KafkaProtocolError"),
        ({"magic": 3}, "CorruptRecordError"),
        ({"batch_length": 48}, "CorruptRecordError"),
        ({"batch_length": 10_000}, "CorruptRecordError"),
        ({"attributes": 5}, "KafkaProtocolError"),
        ({"last_offset_delta": -1}, "InvalidRecordError"),
        ({"record_count": 2}, "InvalidRecordError"),
        ({"attributes": 0x10}, "InvalidRecordError"),  # transactional without a producer id
    ],
)
def test_native_check_leaves_every_refusal_to_the_reference(check, patch, error):
    data = _batch_with(**patch)
    assert check(memoryview(data), 0, len(data), True) is None
    native, reference = both(data, True)
    assert native == reference
    assert native[0] == error


def test_native_check_leaves_a_bad_crc_and_a_bad_record_to_the_reference(check):
    good = bytearray(build_batch([(b"k", b"v", [], 0)], 0))
    bad_crc = bytes(good[:-1] + bytes([good[-1] ^ 1]))
    assert check(memoryview(bad_crc), 0, len(bad_crc), True) is None
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_batches(bad_crc))
    bad_record = bytearray(good)
    bad_record[BATCH_HEADER_SIZE] = 0x7F  # the record's length varint: far too long
    bad_record = bytes(with_crc(bad_record))
    assert check(memoryview(bad_record), 0, len(bad_record), True) is None
    assert check(memoryview(bad_record), 0, len(bad_record), False) is not None  # no walk
    with pytest.raises(InvalidRecordError, match="record 0 of batch at offset 0 has size"):
        list(iter_batches(bad_record))


def test_native_check_returns_the_header_the_reference_parses(check):
    data = build_batch([(None, b"x" * 100, [], 1_700_000_000_000)] * 3, 9, producer_id=4,
                       producer_epoch=2, base_sequence=11)
    fields = check(memoryview(data), 0, len(data), True)
    assert records.BatchHeader(0, *fields) == records.parse_batch_header(data, 0)
    assert fields[0] == len(data)


def test_native_check_refuses_positions_outside_the_buffer(check):
    data = build_batch([(None, b"v", [], 0)])
    with pytest.raises(ValueError, match="must lie within"):
        check(memoryview(data), 0, len(data) + 1, True)
    with pytest.raises(ValueError, match="must lie within"):
        check(memoryview(data), -1, len(data), True)


def test_iter_batches_asks_the_native_check_beside_the_native_walk(check, monkeypatch):
    calls = []

    def counting(*args):
        calls.append(args[1])
        return check(*args)

    data = build_batch([(None, b"a", [], 0)], 0) + build_batch([(None, b"b", [], 0)], 1)
    monkeypatch.setattr(records, "_walk_records", records._native_walk_records)
    monkeypatch.setattr(records, "_check_batch", counting)
    headers = list(iter_batches(data))
    assert calls == [0, headers[1].position]
    calls.clear()
    monkeypatch.setattr(records, "_walk_records", records._py_walk_records)
    assert list(iter_batches(data)) == headers  # the pure-Python reference alone
    assert calls == []
