"""The direct encoder against kio: same bytes as ``entity_writer(cls)(build(cls, **values))``.

The property test walks every request and response class kio has a schema for (the implemented
APIs get more examples), generating values from each class's own field metadata, so a schema
kio adds later is covered without editing this file. Examples are deterministic
(``derandomize=True``) and no example database is written.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import struct
import typing
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.index import api_key_map
from kio.serial import entity_writer

from trikafka.errors import ErrorCode
from trikafka.protocol.encoder import encode, encode_entity, encoder_for, uvarint
from trikafka.protocol.entities import build, entity_fields
from trikafka.protocol.registry import IMPLEMENTED_APIS, ApiRegistry, api_name, kio_versions

ALL_KIO = ApiRegistry({k: (kio_versions(k)[0], kio_versions(k)[-1]) for k in api_key_map})


def _classes() -> list:
    out = []
    for api_key in sorted(api_key_map):
        implemented = IMPLEMENTED_APIS.get(api_key)
        for version in kio_versions(api_key):
            spec = ALL_KIO.get(api_key, version)
            hot = implemented is not None and implemented[0] <= version <= implemented[1]
            for kind, cls in (("req", spec.request_type), ("resp", spec.response_type)):
                out.append(pytest.param(cls, hot, id=f"{api_name(api_key)}-v{version}-{kind}"))
    return out


CLASSES = _classes()


def kio_bytes(cls: type, **values: typing.Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, build(cls, **values))
    return buffer.getvalue()


# -- value strategies from field metadata ---------------------------------------------------------

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_TD_MAX_MS = 86_399_999_999_999_999  # about timedelta.max, in milliseconds
_UTC = datetime.UTC


def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi) | st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1])


def _binary() -> st.SearchStrategy:
    return (
        st.binary(max_size=12)
        | st.binary(max_size=12).map(memoryview)
        | st.binary(max_size=12).map(bytearray)
    )


def _scalar(kafka_type: str) -> st.SearchStrategy:
    if kafka_type in _INT_RANGES:
        return _ints(*_INT_RANGES[kafka_type])
    if kafka_type == "error_code":
        return st.sampled_from(list(ErrorCode)) | st.sampled_from([int(c) for c in ErrorCode])
    if kafka_type == "timedelta_i32":
        return _ints(-(2**31), 2**31 - 1) | st.timedeltas(
            min_value=datetime.timedelta(days=-24), max_value=datetime.timedelta(days=24)
        )
    if kafka_type == "timedelta_i64":
        # Past 2**50 ms the int goes through kio's float formula; cover both sides.
        return _ints(-(2**50), 2**50) | st.integers(-_TD_MAX_MS, _TD_MAX_MS) | st.timedeltas()
    if kafka_type == "datetime_i64":
        return st.datetimes(
            min_value=datetime.datetime(1900, 1, 1),
            max_value=datetime.datetime(2300, 1, 1),
            timezones=st.just(_UTC),
        )
    if kafka_type == "float64":
        return st.floats()
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "uuid":
        return st.uuids()
    if kafka_type == "string":
        return st.text(max_size=8)
    if kafka_type in ("bytes", "records"):
        return _binary()
    raise AssertionError(f"no strategy for {kafka_type!r}")


MAX_DEPTH = 4


@functools.cache
def entity_values(cls: type, depth: int = 0) -> st.SearchStrategy[dict]:
    """Dicts ``build(cls, **d)`` accepts: optional fields sometimes left out."""
    required: dict[str, st.SearchStrategy] = {}
    optional: dict[str, st.SearchStrategy] = {}
    for name, (field, hint, nested, is_tuple) in entity_fields(cls).items():
        nullable = type(None) in typing.get_args(hint)
        kafka_type = field.metadata.get("kafka_type")
        if nested is not None:
            item = entity_value(nested, depth + 1)
            if is_tuple:
                value = st.lists(item, max_size=0 if depth >= MAX_DEPTH else 3)
                value = value | value.map(tuple)
            else:
                value = item
        elif is_tuple:
            inner = _scalar(kafka_type)
            if kafka_type == "uuid":
                inner = inner | st.none()
            value = st.lists(inner, max_size=3)
            value = value | value.map(tuple)
        else:
            value = _scalar(kafka_type)
        # build() turns None into "" for non-nullable strings/bytes; arrays may be null too.
        if nullable or kafka_type in ("string", "bytes", "records") or is_tuple:
            value = value | st.none()
        if field.default is not dataclasses.MISSING:
            value = value | st.just(field.default)
            optional[name] = value
        elif kafka_type == "error_code":
            optional[name] = value
        else:
            required[name] = value
    # Keys the class does not have are ignored.
    optional["not_a_field"] = st.integers()
    return st.fixed_dictionaries(required, optional=optional)


@functools.cache
def entity_value(cls: type, depth: int) -> st.SearchStrategy:
    """A nested entity: as a dict, or already built."""
    as_dict = entity_values(cls, depth)
    return as_dict | as_dict.map(lambda d: build(cls, **d))


def _check(cls: type, values: dict) -> None:
    try:
        expected = kio_bytes(cls, **values)
    except Exception as exc:  # kio refuses (e.g. float rounding to an int64 overflow)
        with pytest.raises(type(exc) if isinstance(exc, (TypeError, ValueError)) else Exception):
            encode(cls, **values)
        return
    assert encode(cls, **values) == expected
    assert encode_entity(build(cls, **values)) == expected


def _profile(max_examples: int) -> settings:
    return settings(
        derandomize=True,
        database=None,
        deadline=None,
        max_examples=max_examples,
        suppress_health_check=list(HealthCheck),
    )


@pytest.mark.parametrize(("cls", "hot"), CLASSES)
def test_matches_kio_for_every_class(cls: type, hot: bool) -> None:
    @_profile(25 if hot else 8)
    @given(entity_values(cls))
    def check(values: dict) -> None:
        _check(cls, values)

    check()


# -- targeted -------------------------------------------------------------------------------------


def _fetch(version: int) -> type:
    return ALL_KIO.get(1, version).response_type


def _fetch_values(**partition: typing.Any) -> dict:
    part = {"partition_index": 0, "high_watermark": 5, "aborted_transactions": None}
    part.update(partition)
    part.setdefault("records", b"")
    return {
        "throttle_time": 0,
        "session_id": 0,
        "responses": [{"topic": "t", "topic_id": None, "partitions": [part]}],
    }


def test_tagged_fields_absent_default_and_present() -> None:
    cls = _fetch(12)
    absent = encode(cls, **_fetch_values())
    assert absent == kio_bytes(cls, **_fetch_values())
    # A dict equal to the default is not written, as kio compares after build().
    same = _fetch_values(current_leader={"leader_id": -1})
    assert encode(cls, **same) == absent == kio_bytes(cls, **same)
    present = _fetch_values(current_leader={"leader_id": 3, "leader_epoch": 7})
    got = encode(cls, **present)
    assert got == kio_bytes(cls, **present)
    # Tag 1, 9 bytes (two int32 and the nested entity's empty tag section).
    tag = uvarint(1) + uvarint(1) + uvarint(9) + struct.pack(">ii", 3, 7) + b"\x00"
    assert tag in got and len(got) == len(absent) + len(tag) - 1
    # Several tags are written in tag order whatever the dict order.
    many = _fetch_values(snapshot_id={"end_offset": 1}, diverging_epoch={"epoch": 2})
    assert encode(cls, **many) == kio_bytes(cls, **many)


def test_tagged_primitive_and_top_level_tags() -> None:
    cls = ALL_KIO.get(1, 16).response_type  # node_endpoints: tagged entity array
    values = _fetch_values()
    nodes = [{"node_id": 1, "host": "h", "port": 9092, "rack": None}]
    for endpoints in ([], (), nodes, [build(_node_cls(cls), **nodes[0])]):
        v = dict(values, node_endpoints=endpoints)
        assert encode(cls, **v) == kio_bytes(cls, **v)
    assert encode(cls, **values).endswith(b"\x00")


def _node_cls(cls: type) -> type:
    return entity_fields(cls)["node_endpoints"][2]


def test_nullable_entity() -> None:
    cls = ALL_KIO.get(75, 0).response_type  # DescribeTopicPartitions: next_cursor
    base = {"throttle_time": 0, "topics": []}
    null = encode(cls, **base, next_cursor=None)
    assert null == kio_bytes(cls, **base, next_cursor=None)
    cursor = {"topic_name": "t", "partition_index": 2}
    some = encode(cls, **base, next_cursor=cursor)
    assert some == kio_bytes(cls, **base, next_cursor=cursor)
    assert b"\xff" in null and b"\x01" + uvarint(2) + b"t" in some


def test_none_arrays_compact_and_legacy() -> None:
    v12 = encode(_fetch(12), **_fetch_values())
    assert v12 == kio_bytes(_fetch(12), **_fetch_values())
    v4 = encode(_fetch(4), **_fetch_values())
    assert v4 == kio_bytes(_fetch(4), **_fetch_values())
    assert b"\xff\xff\xff\xff" in v4  # null legacy array
    metadata = ALL_KIO.get(3, 4).request_type  # topics: nullable legacy array
    assert encode(metadata, topics=None) == kio_bytes(metadata, topics=None)
    assert encode(metadata, topics=None).startswith(b"\xff\xff\xff\xff")
    assert encode(metadata, topics=[]).startswith(b"\x00\x00\x00\x00")


@pytest.mark.parametrize(
    "bad",
    [
        {"partition_index": 2**31},
        {"partition_index": -(2**31) - 1},
        {"high_watermark": 2**63},
        {"partition_index": "1"},
        {"partition_index": None},
    ],
)
def test_out_of_range_int_raises(bad: dict) -> None:
    for version in (4, 12):
        with pytest.raises(struct.error):
            encode(_fetch(version), **_fetch_values(**bad))
        with pytest.raises(struct.error):
            kio_bytes(_fetch(version), **_fetch_values(**bad))


def test_unknown_error_code_raises_value_error() -> None:
    with pytest.raises(ValueError):
        encode(_fetch(12), **_fetch_values(error_code=12345))
    with pytest.raises(ValueError):
        build(_fetch(12), **_fetch_values(error_code=12345))


def test_long_legacy_string_raises() -> None:
    cls = ALL_KIO.get(3, 1).request_type
    with pytest.raises(struct.error):
        encode(cls, topics=[{"name": "x" * 40_000}])


def test_missing_required_field_raises_type_error() -> None:
    values = _fetch_values()
    del values["responses"][0]["partitions"][0]["high_watermark"]
    with pytest.raises(TypeError, match="high_watermark"):
        encode(_fetch(12), **values)
    with pytest.raises(TypeError, match="high_watermark"):
        build(_fetch(12), **values)
    with pytest.raises(TypeError, match="throttle_time"):
        encode(_fetch(12), session_id=0, responses=[])
    # An error code left out means no error, like build().
    got = encode(_fetch(12), throttle_time=0, session_id=0, responses=[])
    assert got == kio_bytes(_fetch(12), throttle_time=0, session_id=0, responses=[])


def test_conversions_like_build() -> None:
    cls = ALL_KIO.get(11, 9).response_type  # JoinGroup: throttle_time, error_code, nullable strings
    values = {
        "generation_id": 1,
        "protocol_type": None,
        "protocol_name": "range",
        "leader": "m",
        "skip_assignment": False,
        "member_id": "m",
        "members": [{"member_id": "m", "group_instance_id": None, "metadata": b"\x01"}],
    }
    for throttle in (5, datetime.timedelta(milliseconds=5)):
        for code in (ErrorCode.rebalance_in_progress, 27):
            v = dict(values, throttle_time=throttle, error_code=code)
            assert encode(cls, **v) == kio_bytes(cls, **v)
    # None for a non-nullable string is "" (leader), for non-nullable bytes b"" (metadata).
    v = dict(values, throttle_time=0, leader=None, members=[{"member_id": "m", "metadata": None}])
    assert encode(cls, **v) == kio_bytes(cls, **v)


@pytest.mark.parametrize("version", [4, 12])
def test_records_as_memoryview_and_chunks(version: int) -> None:
    cls = _fetch(version)
    data = bytes(range(256)) * 50
    expected = kio_bytes(cls, **_fetch_values(records=data))
    assert encode(cls, **_fetch_values(records=memoryview(data))) == expected
    assert encode(cls, **_fetch_values(records=bytearray(data))) == expected
    chunks = [memoryview(data)[:1000], data[1000:5000], bytearray(data[5000:])]
    assert encode(cls, **_fetch_values(records=chunks)) == expected
    assert encode(cls, **_fetch_values(records=tuple(chunks))) == expected
    assert encode(cls, **_fetch_values(records=[])) == kio_bytes(cls, **_fetch_values())
    # The chunks land in the part list as they are: copied once, by the final join.
    parts: list = []
    encoder_for(cls)(parts, _fetch_values(records=chunks))
    assert all(any(part is chunk for part in parts) for chunk in chunks)
    # Null records stay null where the schema allows it.
    assert encode(cls, **_fetch_values(records=None)) == kio_bytes(
        cls, **_fetch_values(records=None)
    )


def test_request_header_client_id_is_legacy_string() -> None:
    from kio.schema.request_header.v2.header import RequestHeader

    for client_id in ("client", None, ""):
        values = {
            "request_api_key": 3,
            "request_api_version": 12,
            "correlation_id": 7,
            "client_id": client_id,
        }
        assert encode(RequestHeader, **values) == kio_bytes(RequestHeader, **values)
    assert encode(RequestHeader, **dict(values, client_id="ab"))[8:12] == b"\x00\x02ab"


def test_mixed_dicts_and_entities() -> None:
    cls = _fetch(12)
    values = _fetch_values(records=b"abc")
    topic_cls = entity_fields(cls)["responses"][2]
    built = build(topic_cls, **values["responses"][0])
    mixed = dict(values, responses=[built, values["responses"][0]])
    assert encode(cls, **mixed) == kio_bytes(cls, **mixed)
    assert encode_entity(build(cls, **mixed)) == kio_bytes(cls, **mixed)


def test_uuid_none_is_zero() -> None:
    cls = ALL_KIO.get(3, 12).response_type
    topic = {"error_code": 0, "name": "t", "topic_id": None, "is_internal": False, "partitions": []}
    values = {
        "throttle_time": 0,
        "brokers": [],
        "cluster_id": None,
        "controller_id": 1,
        "topics": [topic],
    }
    assert encode(cls, **values) == kio_bytes(cls, **values)
    assert bytes(16) in encode(cls, **values)
    topic["topic_id"] = uuid.uuid4()
    assert encode(cls, **values) == kio_bytes(cls, **values)
