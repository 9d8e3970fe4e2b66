"""The native record walk answers exactly as the pure-Python reference does.

Both walks see the same bytes: valid batches from ``record_builder``, the same with bytes
overwritten, inserted or cut, record areas assembled field by field from arbitrary varints
(sizes and counts out of range, overlong varints, values above 2**32), and raw bytes. They
must both accept, or both raise the same exception type with the same message.
Deterministic (``derandomize=True``), no example database, like ``test_records.py``.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trikafka.errors import InvalidRecordError
from trikafka.protocol import records
from trikafka.protocol.records import BATCH_HEADER_SIZE, build_batch, iter_batches

from .record_walks import WALKS, outcome
from .test_records import with_crc

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None, max_examples=400)


@pytest.fixture(scope="module")
def walks():
    return WALKS["python"](), WALKS["native"]()


def agree(walks, data, position: int, end: int, count: int, base: int = 0) -> tuple[str, str]:
    python, native = walks
    answers = [
        outcome(lambda walk=walk: walk(memoryview(data), position, end, count, base))
        for walk in (python, native)
    ]
    assert answers[0] == answers[1]
    return answers[0]


# --- valid batches, then mutated ------------------------------------------------------------

_sized = st.sampled_from([0, 1, 63, 64, 65, 127, 128, 8191, 8192, 70_000]).map(lambda n: b"x" * n)
_record = st.tuples(
    st.none() | _sized | st.binary(max_size=80),
    st.none() | _sized | st.binary(max_size=80),
    st.lists(st.tuples(st.text(max_size=70), st.none() | st.binary(max_size=70)), max_size=3),
    st.integers(0, 2**42),
)
_records = st.lists(_record, min_size=1, max_size=6) | st.lists(
    st.just((None, b"v", [], 0)), min_size=60, max_size=140
)


@DETERMINISTIC
@given(
    records_=_records,
    edits=st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=4),
    inserts=st.lists(st.tuples(st.integers(0), st.binary(min_size=1, max_size=3)), max_size=2),
    cut=st.integers(0, 3),
    count_change=st.integers(-2, 2),
    base=st.integers(-(2**63), 2**63 - 1),
)
def test_both_walks_agree_on_built_and_mutated_batches(
    walks, records_, edits, inserts, cut, count_change, base
):
    batch = bytearray(build_batch(records_))
    for where, value in edits:
        batch[BATCH_HEADER_SIZE + where % (len(batch) - BATCH_HEADER_SIZE)] = value
    for where, extra in inserts:
        at = BATCH_HEADER_SIZE + where % (len(batch) - BATCH_HEADER_SIZE + 1)
        batch[at:at] = extra
    end = max(BATCH_HEADER_SIZE, len(batch) - cut)
    answer = agree(walks, bytes(batch), BATCH_HEADER_SIZE, end, len(records_) + count_change, base)
    if not (edits or inserts or cut or count_change):
        assert answer == ("ok", "")


# --- record areas assembled field by field ---------------------------------------------------


def _zigzag(value: int) -> bytes:
    """A varint of any size (Python ints: the reference walk reads up to 35 bits)."""
    raw = (value << 1) ^ (value >> 70) if value < 0 else value << 1
    out = bytearray()
    while True:
        byte, raw = raw & 0x7F, raw >> 7
        if not raw:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


_int = st.integers(-3, 3) | st.integers(-(2**35), 2**35) | st.sampled_from([63, 64, 8191, 8192])
_overlong = st.integers(4, 11).map(lambda n: b"\x81" * n + b"\x00")  # 5 to 12 bytes
_varint = (
    _int.map(_zigzag)
    | _overlong
    | st.binary(min_size=1, max_size=12).map(
        lambda b: bytes(x | 0x80 for x in b[:-1]) + b[-1:]  # any bytes, any length
    )
)
# A declared size: mostly the true one (so the walk gets past it), else any varint.
_field = st.binary(max_size=12).flatmap(
    lambda data: st.tuples(st.just(_zigzag(len(data))) | _varint, st.just(data))
)
_fields = st.tuples(
    st.just(b"\x00") | st.binary(max_size=1),  # attributes (maybe missing)
    st.just(b"\x00") | _varint,  # timestamp delta
    _varint,  # offset delta (replaced by the right one when offset_deltas_right)
    _field,  # key
    _field,  # value
    st.none() | _varint,  # header count; None: the true count
    st.lists(st.tuples(_field, _field), max_size=3),
)


def _assemble(fields, right_delta: int | None = None) -> bytes:
    attributes, ts, delta, key, value, count, headers = fields
    if right_delta is not None:
        delta = _zigzag(right_delta)
    if count is None:
        count = _zigzag(len(headers))
    body = attributes + ts + delta + key[0] + key[1] + value[0] + value[1] + count
    for name, header_value in headers:
        body += name[0] + name[1] + header_value[0] + header_value[1]
    return body


@DETERMINISTIC
@given(
    bodies=st.lists(_fields, min_size=1, max_size=4),
    lengths=st.lists(st.none() | _varint, min_size=4, max_size=4),
    offset_deltas_right=st.booleans() | st.just(True),
    count=st.integers(-1, 5),
    prefix=st.binary(max_size=3),
    trailer=st.binary(max_size=3),
)
@example(  # a 5-byte offset delta above 2**32 (no truncation to 32 bits, as in Python)
    bodies=[b"\x00\x00" + _zigzag(2**34) + b"\x01\x01\x00"],
    lengths=[None] * 4, offset_deltas_right=False, count=1, prefix=b"", trailer=b"",
)
@example(  # a timestamp delta of 11 bytes: one more than a varlong may have
    bodies=[b"\x00" + b"\x80" * 10 + b"\x00\x00\x01\x01\x00"],
    lengths=[None] * 4, offset_deltas_right=False, count=1, prefix=b"", trailer=b"",
)
@example(  # a 10-byte timestamp delta is fine
    bodies=[b"\x00" + b"\x80" * 9 + b"\x00\x00\x01\x01\x00"],
    lengths=[None] * 4, offset_deltas_right=False, count=1, prefix=b"", trailer=b"",
)
@example(  # a 6-byte key size
    bodies=[b"\x00\x00\x00" + b"\x80" * 5 + b"\x00\x01\x00"],
    lengths=[None] * 4, offset_deltas_right=False, count=1, prefix=b"", trailer=b"",
)
@example(  # a header value of size -2
    bodies=[b"\x00\x00\x00\x01\x01\x02\x02h\x03"],
    lengths=[None] * 4, offset_deltas_right=False, count=1, prefix=b"", trailer=b"",
)
@example(  # a header count far beyond the record
    bodies=[b"\x00\x00\x00\x01\x01" + _zigzag(2**34 - 1)],
    lengths=[None] * 4, offset_deltas_right=False, count=1, prefix=b"", trailer=b"",
)
def test_both_walks_agree_on_records_assembled_from_arbitrary_fields(
    walks, bodies, lengths, offset_deltas_right, count, prefix, trailer
):
    area = bytearray(prefix)
    for index, fields in enumerate(bodies):
        if isinstance(fields, bytes):  # an @example's record, as bytes
            body = fields
        else:  # mostly valid records get the deeper checks
            body = _assemble(fields, index if offset_deltas_right else None)
        length = lengths[index] if lengths[index] is not None else _zigzag(len(body))
        area += length + body
    data = bytes(area + trailer)
    agree(walks, data, len(prefix), len(data) - len(trailer), count, 7)


@DETERMINISTIC
@given(st.binary(max_size=300), st.integers(-1, 8), st.integers(0, 2**40))
def test_both_walks_agree_on_raw_bytes(walks, data, count, base):
    agree(walks, data, 0, len(data), count, base)


@DETERMINISTIC
@given(records_=_records, edits=st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=3))
def test_iter_batches_answers_the_same_with_either_walk(walks, records_, edits):
    """Through the validating entry point, CRC fixed up so the walk is reached."""
    batch = bytearray(build_batch(records_, 42))
    for where, value in edits:
        batch[BATCH_HEADER_SIZE + where % (len(batch) - BATCH_HEADER_SIZE)] = value
    data = bytes(with_crc(batch))
    saved = records._walk_records
    answers = []
    try:
        for walk in walks:
            records._walk_records = walk
            answers.append(outcome(lambda: list(iter_batches(data))))
    finally:
        records._walk_records = saved
    assert answers[0] == answers[1]


# --- the native walk's own edges -------------------------------------------------------------


def test_the_native_walk_takes_bytes_bytearray_and_memoryview(walks):
    _, native = walks
    batch = build_batch([(b"k", b"v", [("h", b"x")], 5), (None, None, [], 6)])
    for data in (batch, bytearray(batch), memoryview(batch), memoryview(bytearray(batch))):
        native(data, BATCH_HEADER_SIZE, len(batch), 2, 0)
    with pytest.raises(InvalidRecordError, match="declares 3 records, holds 2"):
        native(batch, BATCH_HEADER_SIZE, len(batch), 3, 0)


def test_the_native_walk_refuses_positions_outside_the_buffer(walks):
    _, native = walks
    batch = build_batch([(None, b"v", [], 0)])
    for position, end in ((-1, len(batch)), (BATCH_HEADER_SIZE, len(batch) + 1)):
        with pytest.raises(ValueError, match="must lie within"):
            native(batch, position, end, 1, 0)
    with pytest.raises(TypeError):
        native("not bytes", 0, 0, 0, 0)


@pytest.mark.parametrize(("setting", "native"), [("1", False), ("0", True), ("", True)])
def test_trikafka_pure_python_selects_the_reference_walk(walks, setting, native):
    """The switch works in a fresh interpreter (the choice is made at import)."""
    env = {**os.environ, "TRIKAFKA_PURE_PYTHON": setting}
    code = (
        "from trikafka.protocol import records; "
        "print(records.NATIVE_RECORD_WALK, records._walk_records is records._py_walk_records)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    assert result.stdout.split() == [str(native), str(not native)]


def test_struct_of_a_record_is_what_the_walks_read():
    """A guard on the assembling strategy above: a record assembled from correct fields is
    what build_batch writes, so the field-by-field tests start from valid records."""
    body = b"\x00" + _zigzag(0) + _zigzag(0) + _zigzag(1) + b"k" + _zigzag(1) + b"v" + _zigzag(0)
    batch = build_batch([(b"k", b"v", [], 0)])
    assert batch[BATCH_HEADER_SIZE:] == _zigzag(len(body)) + body
    assert struct.unpack_from(">i", batch, 57)[0] == 1
