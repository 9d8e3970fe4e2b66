"""The native record decoders answer exactly as the pure-Python reference does.

``decode_records`` (tuples) and ``record_objects`` (ConsumerRecord instances made without
``__init__``) in ``_recordwalk.c`` either decline (None: the reference then answers) or give
precisely the reference's records. They are held to that on built batches, on the same
batches with bytes overwritten or cut, and on record areas assembled field by field from
arbitrary varints; and they must not decline on well-formed batches, or the fast path would
silently never run. ``decode_partition`` answers the same with and without them.
Deterministic (``derandomize=True``), no example database, like ``test_records.py``.
"""

from __future__ import annotations

import gc
import pickle

import attrs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trikafka.client import fetcher
from trikafka.client.fetcher import ConsumerRecord, decode_partition
from trikafka.protocol import record_reader
from trikafka.protocol.compression import recompress_batches
from trikafka.protocol.records import (
    BATCH_HEADER_SIZE,
    TimestampType,
    build_batch,
    iter_batches,
    parse_batch_header,
    record_objects,
    record_tuples,
)

from .record_walks import native as native_function
from .record_walks import outcome
from .test_record_walk_native import _assemble, _fields, _records, _varint, _zigzag

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None, max_examples=300)


@pytest.fixture(scope="module")
def native():
    decoders = native_function("decode_records"), native_function("record_objects")
    if record_reader._record_objects is None:
        pytest.skip("TRIKAFKA_PURE_PYTHON is set: the client decodes with the reference alone")
    return decoders


def reference(data, position, end, count, base, base_ts, append_time):
    return outcome_list(
        lambda: record_reader._py_record_tuples(memoryview(data), position, end, count, base, base_ts, append_time)
    )


def outcome_list(call):
    """The records a decoder gives before it stops, and how it stops."""
    got = []

    def run():
        for item in call():
            got.append(item)

    return got, outcome(run)


def agree(native, data, position, end, count, base=0, base_ts=0, append_time=None):
    decode_records, _ = native
    answer = decode_records(data, position, end, count, base, base_ts, append_time)
    expected = reference(data, position, end, count, base, base_ts, append_time)
    if answer is not None:  # a native answer is the reference's whole, error-free answer
        assert (answer, ("ok", "")) == expected
    return answer, expected


# --- built batches, then mutated ------------------------------------------------------------


@DETERMINISTIC
@given(
    records_=_records,
    edits=st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 3),
    count_change=st.integers(-2, 2),
    base=st.integers(-(2**63), 2**63 - 1),
    base_ts=st.integers(-(2**63), 2**63 - 1),
    append_time=st.none() | st.integers(-(2**63), 2**63 - 1),
)
def test_decode_records_agrees_with_the_reference(
    native, records_, edits, cut, count_change, base, base_ts, append_time
):
    batch = bytearray(build_batch(records_))
    for where, value in edits:
        batch[BATCH_HEADER_SIZE + where % (len(batch) - BATCH_HEADER_SIZE)] = value
    end = max(BATCH_HEADER_SIZE, len(batch) - cut)
    answer, _ = agree(
        native, bytes(batch), BATCH_HEADER_SIZE, end, len(records_) + count_change, base, base_ts, append_time
    )
    fits = -(2**63) <= base + len(records_) and base_ts + 2**42 < 2**63 and base_ts >= -(2**63) + 2**42
    if not (edits or cut or count_change) and fits:
        assert answer is not None, "the native decoder declined a well-formed batch"


@DETERMINISTIC
@given(
    bodies=st.lists(_fields, min_size=1, max_size=4),
    lengths=st.lists(st.none() | _varint, min_size=4, max_size=4),
    count=st.integers(-1, 5),
    trailer=st.binary(max_size=3),
)
@example(  # a 10-byte timestamp delta above 2**64: the reference reads it into a Python int
    bodies=[b"\x00" + b"\xff" * 9 + b"\x7f" + b"\x00\x01\x01\x00"], lengths=[None] * 4, count=1, trailer=b"",
)
@example(  # a record length past the batch: the reference reads on into what follows
    bodies=[b"\x00\x00\x00\x01\x01\x00"], lengths=[_zigzag(9)] + [None] * 3, count=1, trailer=b"\x00" * 3,
)
@example(  # a header name that is not UTF-8, and a null one
    bodies=[b"\x00\x00\x00\x01\x01\x04" + _zigzag(2) + b"\xff\xfe\x01" + b"\x01\x01"],
    lengths=[None] * 4, count=1, trailer=b"",
)
def test_decode_records_agrees_on_records_assembled_from_arbitrary_fields(native, bodies, lengths, count, trailer):
    area = bytearray()
    for index, fields in enumerate(bodies):
        body = fields if isinstance(fields, bytes) else _assemble(fields, index)
        length = lengths[index] if lengths[index] is not None else _zigzag(len(body))
        area += length + body
    data = bytes(area + trailer)
    agree(native, data, 0, len(data) - len(trailer), count, 7, 1000)
    agree(native, data, 0, len(data), count, 7, 1000, 42)


@DETERMINISTIC
@given(st.binary(max_size=300), st.integers(-1, 8), st.integers(0, 2**40))
def test_decode_records_agrees_on_raw_bytes(native, data, count, base):
    agree(native, data, 0, len(data), count, base, 5)


def test_a_huge_declared_count_is_declined_without_allocating(native):
    decode_records, _ = native
    data = build_batch([(None, b"v", [], 0)])
    assert decode_records(data, BATCH_HEADER_SIZE, len(data), 2**40, 0, 0, None) is None


def test_positions_outside_the_buffer_are_a_value_error(native):
    decode_records, objects = native
    with pytest.raises(ValueError, match="must lie within"):
        decode_records(b"abc", 0, 4, 1, 0, 0, None)
    with pytest.raises(ValueError, match="must lie within"):
        objects(b"abc", 2, 1, 1, 0, 0, None, ConsumerRecord, fetcher._RECORD_SLOTS, (), (), 0)


# --- objects made in C ------------------------------------------------------------------------


_header_records = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=40),
        st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=2),
        st.integers(0, 2**41),
    ),
    min_size=1,
    max_size=12,
)


@DETERMINISTIC
@given(records_=_header_records, base=st.integers(0, 2**50), floor_at=st.integers(0, 14), log_append=st.booleans())
def test_record_objects_equal_records_made_by_their_constructor(native, records_, base, floor_at, log_append):
    kind = TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME
    data = build_batch(records_, base, partition_leader_epoch=3, timestamp_type=kind)
    header = parse_batch_header(data)
    floor = base + floor_at
    made = record_objects(
        data, header, ConsumerRecord, fetcher._RECORD_SLOTS, fetcher._CONSTANT_SLOTS, ("t", 4, kind, 3), floor
    )
    expected = [
        ConsumerRecord("t", 4, offset, timestamp, kind, key, value, headers, 3)
        for offset, timestamp, key, value, headers in record_reader._py_record_tuples(
            memoryview(data), BATCH_HEADER_SIZE, header.end, header.record_count, header.base_offset,
            header.base_timestamp, header.max_timestamp if log_append else None,
        )
        if offset >= floor
    ]
    assert made == expected
    assert [hash(r) for r in made] == [hash(r) for r in expected]
    assert [repr(r) for r in made] == [repr(r) for r in expected]
    for record in made:  # still a frozen attrs instance in every way
        assert type(record) is ConsumerRecord
        assert not gc.is_tracked(record)  # no cycle can pass through it: no GC passes over it
        assert attrs.evolve(record, topic="u").topic == "u"
        assert pickle.loads(pickle.dumps(record)) == record
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            record.value = b"changed"


def test_record_objects_refuses_what_is_not_an_object_slot_of_the_class(native):
    data = build_batch([(None, b"v", [], 0)])
    header = parse_batch_header(data)
    wrong = (fetcher._RECORD_SLOTS[:4] + (int.real,), (), ())
    with pytest.raises(TypeError, match="not a writable object slot"):
        record_objects(data, header, ConsumerRecord, *wrong, 0)

    @attrs.frozen
    class Other:
        offset: int

    with pytest.raises(TypeError, match="not a writable object slot"):
        record_objects(data, header, Other, fetcher._RECORD_SLOTS, (), (), 0)


# --- decode_partition with and without the native decoders -----------------------------------


def _fetch_answer(batches_records, codec):
    data, base = b"", 0
    for values in batches_records:
        batch = build_batch([(None, v, [("h", v)], 1000 + i) for i, v in enumerate(values)], base)
        if codec:
            batch = bytes(recompress_batches(batch, list(iter_batches(batch)), codec))
        data += batch
        base += len(values)
    return data, base


@DETERMINISTIC
@given(
    batches_records=st.lists(st.lists(st.binary(max_size=6), min_size=1, max_size=6), min_size=1, max_size=4),
    codec=st.sampled_from([0, 1]),
    start=st.integers(0, 30),
    max_records=st.none() | st.integers(0, 30),
    cut=st.integers(0, 20),
)
def test_decode_partition_answers_the_same_with_either_decoder(batches_records, codec, start, max_records, cut):
    data, total = _fetch_answer(batches_records, codec)
    data = data[: len(data) - cut]
    start = start % (total + 1)

    def decode():
        try:
            return decode_partition("t", 0, data, start, max_records=max_records)
        except Exception as error:  # noqa: BLE001 - both must fail alike
            return type(error).__name__, str(error)

    native = decode()
    saved = record_reader._record_objects, record_reader._decode_records
    record_reader._record_objects = record_reader._decode_records = None
    try:
        reference_answer = decode()
    finally:
        record_reader._record_objects, record_reader._decode_records = saved
    assert native == reference_answer


def test_the_client_decodes_natively_when_built(native):
    """The switch itself: ConsumerRecord's __init__ is not what makes fetched records."""
    data, _ = _fetch_answer([[b"a", b"b", b"c"]], 0)
    calls = []
    original = ConsumerRecord.__init__

    def counting(self, *args, **kwargs):
        calls.append(args)
        original(self, *args, **kwargs)

    ConsumerRecord.__init__ = counting
    try:
        fetched = decode_partition("t", 0, data, 0)
    finally:
        ConsumerRecord.__init__ = original
    assert [r.value for r in fetched.records] == [b"a", b"b", b"c"] and calls == []


def test_record_tuples_falls_back_to_the_reference_for_its_errors():
    data = bytearray(build_batch([(None, b"v", [], 0), (None, b"w", [], 0)]))
    data[-1] = 0x06  # the second record declares three headers it does not hold
    header = parse_batch_header(bytes(data))
    got, how = outcome_list(lambda: record_tuples(bytes(data), header))
    assert [value for _, _, _, value, _ in got] == [b"v"]  # the good record before the bad one
    assert how[0] == "InvalidRecordError"


def test_the_slots_cover_every_field_of_consumer_record():
    """A field the native decoder does not fill would be missing on every fetched record."""
    filled = {slot.__name__ for slot in fetcher._RECORD_SLOTS + fetcher._CONSTANT_SLOTS}
    assert filled == {field.name for field in attrs.fields(ConsumerRecord)}
    assert all(field.converter is None and field.validator is None for field in attrs.fields(ConsumerRecord))
    assert not hasattr(ConsumerRecord, "__attrs_post_init__")
