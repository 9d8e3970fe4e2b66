"""The native record encoder writes exactly the bytes the pure-Python reference writes.

``encode_records`` (``_recordwalk.c``) either declines (None: the reference then encodes, or
raises its own error) or gives the reference's records area and largest timestamp. Held to
that on records of every shape ``build_batch`` is given (bytes, None, bytearray and str
fields; str, bytes and None header names; headers as tuples, lists and other iterables;
timestamps beyond 64 bits), and it must not decline on the plain shape the producer makes.
Deterministic (``derandomize=True``), no example database, like ``test_records.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trikafka.protocol import record_builder
from trikafka.protocol.records import build_batch, iter_batches, iter_records

from .record_walks import native as native_function
from .record_walks import outcome

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None, max_examples=400)


@pytest.fixture(scope="module")
def encode():
    encode_records = native_function("encode_records")
    if record_builder._encode_records is None:
        pytest.skip("TRIKAFKA_PURE_PYTHON is set: batches are built by the reference alone")
    return encode_records


_plain_field = st.none() | st.binary(max_size=40) | st.sampled_from([b"x" * 127, b"x" * 128, b"x" * 20_000])
_plain_headers = st.lists(
    st.tuples(st.text(max_size=6) | st.binary(max_size=6), st.none() | st.binary(max_size=6)), max_size=3
)
_timestamp = st.integers(-(2**63), 2**63 - 1) | st.integers(0, 2**41)
_plain = st.tuples(_plain_field, _plain_field, _plain_headers | _plain_headers.map(tuple), _timestamp)

_odd_field = _plain_field | st.binary(max_size=5).map(bytearray) | st.text(max_size=4) | st.just(7)
_odd_name = st.text(max_size=4) | st.binary(max_size=4) | st.none() | st.just("\ud800") | st.just(3)
_odd_headers = (
    st.lists(st.tuples(_odd_name, _odd_field), max_size=2)
    | st.lists(st.lists(st.binary(max_size=2), min_size=2, max_size=2).map(list), max_size=2)
    | st.just(iter(()))
    | st.just(None)
)
_odd = st.tuples(_odd_field, _odd_field, _odd_headers, _timestamp | st.integers(2**63, 2**70) | st.just(True))
_odd_records = st.lists(_plain | _odd, min_size=1, max_size=5) | st.lists(_plain, min_size=1, max_size=5).map(
    lambda rs: [list(r) if i == 0 else r for i, r in enumerate(rs)]  # a record as a list
)


@DETERMINISTIC
@given(st.lists(_plain, min_size=1, max_size=8))
def test_plain_records_are_encoded_natively_and_identically(encode, records_):
    base = records_[0][3]
    answer = encode(records_, base)
    body, largest = record_builder._py_encode_records(records_, base)
    if all(-(2**63) <= r[3] - base < 2**63 for r in records_):
        assert answer is not None, "the native encoder declined a plain record"
    if answer is not None:
        assert answer == (bytes(body), largest)


@DETERMINISTIC
@given(_odd_records)
def test_records_of_any_shape_give_the_references_answer(encode, records_):
    base = records_[0][3]
    expected = outcome(lambda: record_builder._py_encode_records(records_, base))
    try:
        answer = encode(records_, base)
    except Exception as error:  # noqa: BLE001 - must never raise what the reference would not
        answer = type(error).__name__, str(error)
        assert answer == expected
        return
    if answer is not None:
        assert expected == ("ok", "")
        body, largest = record_builder._py_encode_records(records_, base)
        assert answer == (bytes(body), largest)


_readable = st.tuples(_plain_field, _plain_field, _plain_headers, st.integers(0, 2**41))  # deltas a varlong holds


@DETERMINISTIC
@given(st.lists(_readable, min_size=1, max_size=6), st.integers(0, 2**40))
def test_build_batch_is_the_same_with_either_encoder_and_reads_back(records_, base_offset):
    native = build_batch(records_, base_offset)
    saved = record_builder._encode_records
    record_builder._encode_records = None
    try:
        reference = build_batch(records_, base_offset)
    finally:
        record_builder._encode_records = saved
    assert native == reference
    header = next(iter_batches(native))
    decoded = [(r.key, r.value, r.timestamp) for r in iter_records(native, header)]
    assert decoded == [(key, value, timestamp) for key, value, _, timestamp in records_]


def test_the_producer_path_encodes_natively(encode):
    """The switch itself: the reference is not what build_batch runs for plain records."""
    saved = record_builder._py_encode_records
    record_builder._py_encode_records = None  # calling it would fail
    try:
        data = build_batch([(b"k", b"v", (("h", b"1"),), 5), (None, None, [], 6)])
    finally:
        record_builder._py_encode_records = saved
    header = next(iter_batches(data))
    assert [(r.key, r.value, r.headers) for r in iter_records(data, header)] == [
        (b"k", b"v", (("h", b"1"),)),
        (None, None, ()),
    ]


_sized_value = st.none() | st.binary(max_size=40) | st.integers(0, 3).map(lambda i: bytes([65 + i]) * (4090 + 3 * i))


@DETERMINISTIC
@given(
    st.lists(st.tuples(_plain_field, _sized_value, _plain_headers | _plain_headers.map(tuple), _timestamp), min_size=1,
             max_size=8),
    st.sampled_from([1, 4093, 4096]),
)
def test_record_parts_are_the_records_area_with_large_values_uncopied(records_, separate):
    """``encode_record_parts``: the same bytes as ``encode_records``, each value of at least
    ``separate`` bytes the very object given (a produced batch's 10 KB values go to the socket
    from where they are), the bytes between them in parts of their own."""
    encode_parts = native_function("encode_record_parts")
    base = records_[0][3]
    whole = native_function("encode_records")(records_, base)
    answer = encode_parts(records_, base, separate)
    assert (answer is None) == (whole is None)
    if answer is None:
        return
    parts, largest = answer
    assert (b"".join(parts), largest) == whole
    # (Bytes of length 1 are shared objects: a one-byte part may be one of them by chance.)
    large = [value for _, value, _, _ in records_ if value is not None and len(value) >= max(separate, 2)]
    assert [p for p in parts if len(p) > 1 and any(p is value for value in large)] == large
    assert all(type(p) is bytes and len(p) > 0 for p in parts)


@DETERMINISTIC
@given(st.lists(_readable, min_size=1, max_size=6), st.sampled_from([1, 100, 4096]))
def test_build_batch_parts_with_separate_values_is_the_same_batch(records_, separate):
    parts = record_builder.build_batch_parts(records_, 7, separate=separate)
    whole = build_batch(records_, 7)
    assert b"".join(parts) == whole
    if record_builder._encode_record_parts is not None:  # natively: large values not copied
        large = [value for _, value, _, _ in records_ if value is not None and len(value) >= max(separate, 2)]
        assert [p for p in parts if len(p) > 1 and any(p is value for value in large)] == large
