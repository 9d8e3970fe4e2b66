"""Request and response headers: round-trips for every supported API version, and the rule
that any bytes either decode or raise InvalidRequestError — nothing else escapes.

Pure bytes, no trio. Hypothesis runs derandomized so CI sees the same examples every time.

Why the fuzz tests walk each input before decoding it: kio's native reader (0.6.5)
allocates ``Vec::with_capacity(count)`` from an array count read off the wire, before checking
that the bytes are there. A 14-byte Metadata request declaring ~4 billion topics makes Rust
abort the whole process (SIGABRT, not an exception), and whether smaller counts abort depends
on the machine's memory. ``trikafka.protocol.guard`` refuses such frames before kio sees them.
The fuzz tests find impossible counts themselves (:func:`_body_bombs`, which walks kio's
schema in kio's read order) and, for those inputs, check the guard alone — so a gap in the
guard fails a test instead of killing the test session. The bomb itself goes through the full
decoder in a child process under a fixed address-space limit.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import resource
import struct
import subprocess
import sys
import textwrap
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.index import api_key_map
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from trikafka.errors import ErrorCode, InvalidRequestError, UnsupportedRequestVersionError
from trikafka.protocol.entities import build, error_response
from trikafka.protocol.guard import check_request
from trikafka.protocol.headers import (
    DecodedRequest,
    LastRequest,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_api,
)
from trikafka.protocol.registry import ApiKey, ApiRegistry, ApiVersionSpec

REGISTRY = ApiRegistry()
SPECS: list[ApiVersionSpec] = [
    REGISTRY.get(key, version)
    for key, lo, hi in REGISTRY.ranges()
    for version in range(lo, hi + 1)
]

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None, max_examples=150)
FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=400)

correlation_ids = st.integers(min_value=-(2**31), max_value=2**31 - 1)
client_ids = st.one_of(st.none(), st.text(max_size=40))
names = st.text(max_size=20)


def _spec_id(spec: ApiVersionSpec) -> str:
    return f"{spec.name}-v{spec.version}"


def _strip_prefix(frame: bytes) -> bytes:
    (size,) = struct.unpack_from(">i", frame, 0)
    assert size == len(frame) - 4
    return frame[4:]


def _minimal_request(spec: ApiVersionSpec) -> object:
    return error_response(spec.request_type, ErrorCode.none)


def _minimal_response(spec: ApiVersionSpec) -> object:
    return error_response(spec.response_type, ErrorCode.none)


@st.composite
def request_bodies(draw: st.DrawFn, spec: ApiVersionSpec) -> object:
    """A valid request body for ``spec``, with some content where the API has any."""
    if spec.api_key == ApiKey.METADATA:
        topics = draw(st.none() | st.lists(names, max_size=4))
        return build(
            spec.request_type,
            topics=None
            if topics is None
            else [{"name": name, "topic_id": None} for name in topics],
            allow_auto_topic_creation=draw(st.booleans()),
            include_cluster_authorized_operations=draw(st.booleans()),
            include_topic_authorized_operations=draw(st.booleans()),
        )
    if spec.api_key == ApiKey.API_VERSIONS:
        return build(
            spec.request_type,
            client_software_name=draw(names),
            client_software_version=draw(names),
        )
    return _minimal_request(spec)


@st.composite
def request_frames(draw: st.DrawFn) -> tuple[ApiVersionSpec, bytes]:
    """A valid request frame (prefix stripped) for some supported API version."""
    spec = draw(st.sampled_from(SPECS))
    body = draw(request_bodies(spec))
    frame = encode_request(spec, draw(correlation_ids), body, draw(client_ids))
    return spec, _strip_prefix(frame)


# --- requests ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_minimal_request_round_trips(spec):
    body = _minimal_request(spec)
    frame = _strip_prefix(encode_request(spec, 42, body, "client"))
    assert peek_api(frame) == (spec.api_key, spec.version, 42)
    decoded = decode_request(frame, REGISTRY)
    assert isinstance(decoded, DecodedRequest)
    assert decoded.spec is spec
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id) == (
        spec.api_key,
        spec.version,
        42,
    )
    assert decoded.header.client_id == "client"
    assert decoded.body == body
    assert isinstance(decoded.body, spec.request_type)


@DETERMINISTIC
@given(data=st.data(), correlation_id=correlation_ids, client_id=client_ids)
def test_request_header_and_body_round_trip(data, correlation_id, client_id):
    spec = data.draw(st.sampled_from(SPECS), label="spec")
    body = data.draw(request_bodies(spec), label="body")
    frame = _strip_prefix(encode_request(spec, correlation_id, body, client_id))
    decoded = decode_request(frame, REGISTRY)
    assert decoded.correlation_id == correlation_id
    assert decoded.header.client_id == client_id
    assert decoded.api_key == spec.api_key
    assert decoded.api_version == spec.version
    assert decoded.body == body


def _fetch_frame(correlation_id: int, fetch_offset: int, client_id: str = "rdkafka") -> bytes:
    spec = REGISTRY.get(1, 16)
    body = build(
        spec.request_type,
        replica_state={"replica_id": -1, "replica_epoch": -1},
        max_wait=0,
        min_bytes=1,
        max_bytes=52428800,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                "topic_id": UUID_A,
                "partitions": [{"partition": 0, "fetch_offset": fetch_offset, "partition_max_bytes": 1048576}],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    return _strip_prefix(encode_request(spec, correlation_id, body, client_id))


UUID_A = uuid.UUID(int=0xA)


def test_a_repeated_fetch_frame_is_decoded_once_and_answered_with_its_own_correlation_id():
    """A busy-polling consumer repeats its Fetch frame byte for byte but for the correlation
    id: the decoder reuses the first decode's (frozen) body, and each request keeps its own
    correlation id; any other byte that differs is a different request."""
    last = LastRequest()
    first = decode_request(_fetch_frame(1, 7), REGISTRY, last)
    again = decode_request(bytearray(_fetch_frame(2, 7)), REGISTRY, last)  # as a connection's buffer
    view = decode_request(memoryview(_fetch_frame(3, 7)), REGISTRY, last)
    assert again.body is first.body and view.body is first.body
    assert [d.correlation_id for d in (first, again, view)] == [1, 2, 3]
    assert again.header == dataclasses.replace(first.header, correlation_id=2)
    moved = decode_request(_fetch_frame(4, 8), REGISTRY, last)
    assert moved.body.topics[0].partitions[0].fetch_offset == 8
    other_client = decode_request(_fetch_frame(5, 8, "other"), REGISTRY, last)
    assert other_client.header.client_id == "other" and other_client.correlation_id == 5
    assert other_client.body is not moved.body
    assert first.body.topics[0].partitions[0].fetch_offset == 7  # never changed by the others


def test_a_connection_remembers_only_its_last_frame():
    """The frame before the last is decoded anew (its decoding was let go), and a decoder
    without a LastRequest (one per connection) remembers nothing."""
    last = LastRequest()
    first = decode_request(_fetch_frame(1, 7), REGISTRY, last)
    decode_request(_fetch_frame(2, 8), REGISTRY, last)
    back = decode_request(_fetch_frame(3, 7), REGISTRY, last)
    assert back.body == first.body and back.body is not first.body
    assert decode_request(_fetch_frame(4, 7), REGISTRY).body is not back.body


def test_busy_polling_frames_leave_nothing_for_the_collector():
    """A consumer whose fetch offset moves with every record sends a new frame each time. The
    decodings of the frames it moved past must die with the next frame, not wait in a table:
    objects that outlive the generation-0 threshold make collections (~0.1 ms each) land
    inside requests. Counted with the collector off: what the loop leaves allocated."""
    last = LastRequest()
    frames = [_fetch_frame(offset, offset) for offset in range(1_000)]
    decode_request(_fetch_frame(0, 5_000), REGISTRY, LastRequest())  # kio's first-use imports
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        for frame in frames:
            decode_request(frame, REGISTRY, last)
            decode_request(frame, REGISTRY, last)  # and its repeat
        left = gc.get_count()[0] - before
    finally:
        gc.enable()
    assert left < 100  # the last frame's decoding (~10); a table of recent frames left ~2,000


@pytest.mark.parametrize("api_key, version", [(3, 12), (3, 1), (18, 3), (18, 0)])
def test_repeated_metadata_and_api_versions_frames_decode_like_the_first(api_key, version):
    """Metadata and ApiVersions repeats (clients refresh metadata with the same frame; a
    pipelining client sends bursts) reuse the body; the renumbered header is exactly what a
    full decode gives, for header v1 and v2."""
    spec = REGISTRY.get(api_key, version)
    fields = {f.name for f in dataclasses.fields(spec.request_type)}
    values = {
        "topics": None,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
        "client_software_name": "librdkafka",
        "client_software_version": "2.16.0",
    }
    body = build(spec.request_type, **{k: v for k, v in values.items() if k in fields})

    def frame(correlation_id: int) -> bytes:
        return _strip_prefix(encode_request(spec, correlation_id, body, f"client-{version}"))

    last = LastRequest()
    first = decode_request(frame(1), REGISTRY, last)
    again = decode_request(memoryview(frame(2)), REGISTRY, last)
    assert again.body is first.body
    fresh = decode_request(frame(2), REGISTRY)
    assert fresh.body is not first.body
    assert again.header == fresh.header and type(again.header) is type(fresh.header)
    assert again.correlation_id == 2 and again.header.client_id == f"client-{version}"
    assert first.correlation_id == 1


def test_renumbering_knows_every_request_header_field():
    """_renumbered copies the four fields of kio's request headers by name: a kio with more
    would lose them, so this fails first."""
    from kio.schema.request_header.v1.header import RequestHeader as V1
    from kio.schema.request_header.v2.header import RequestHeader as V2

    for header in (V1, V2):
        assert [f.name for f in dataclasses.fields(header)] == [
            "request_api_key", "request_api_version", "correlation_id", "client_id"
        ]


def test_a_bad_fetch_frame_is_refused_every_time_it_comes():
    """Only frames that decoded are remembered: the same bad bytes fail again."""
    frame = bytearray(_fetch_frame(1, 7))
    frame[-8:] = b"\xff" * 8  # the tail counts run past the end
    last = LastRequest()
    for _ in range(2):
        with pytest.raises(InvalidRequestError):
            decode_request(bytes(frame), REGISTRY, last)
    assert last.key is None


def test_request_header_version_follows_flexible_versions():
    """Header v2 (with tagged fields) exactly for the flexible versions of an API."""
    for spec in SPECS:
        flexible = spec.request_type.__flexible__
        module = spec.request_header_type.__module__
        assert module.endswith(".v2.header" if flexible else ".v1.header"), _spec_id(spec)
    assert REGISTRY.get(ApiKey.API_VERSIONS, 3).request_type.__flexible__
    assert not REGISTRY.get(ApiKey.METADATA, 8).request_type.__flexible__
    assert REGISTRY.get(ApiKey.METADATA, 9).request_type.__flexible__


def test_unicode_and_null_client_ids():
    spec = REGISTRY.get(ApiKey.METADATA, 12)
    body = _minimal_request(spec)
    for client_id in (None, "", "kafka-python-3.0", "клиент-🚀", "a" * 1000):
        frame = _strip_prefix(encode_request(spec, 1, body, client_id))
        assert decode_request(frame, REGISTRY).header.client_id == client_id


# --- responses --------------------------------------------------------------------------


@st.composite
def response_bodies(draw: st.DrawFn, spec: ApiVersionSpec) -> object:
    if spec.api_key == ApiKey.METADATA:
        return build(
            spec.response_type,
            throttle_time=draw(st.integers(0, 2**31 - 1)),
            brokers=[
                {
                    "node_id": draw(st.integers(0, 2**31 - 1)),
                    "host": draw(names),
                    "port": draw(st.integers(0, 65535)),
                    "rack": draw(st.none() | names),
                }
            ],
            cluster_id=draw(st.none() | names),
            controller_id=draw(st.integers(-1, 2**31 - 1)),
            topics=[],
            cluster_authorized_operations=-(2**31),
            error_code=ErrorCode.none,
        )
    if spec.api_key == ApiKey.API_VERSIONS:
        return build(
            spec.response_type,
            error_code=draw(st.sampled_from([ErrorCode.none, ErrorCode.unsupported_version])),
            api_keys=[
                {"api_key": key, "min_version": lo, "max_version": hi}
                for key, lo, hi in REGISTRY.ranges()
            ],
            throttle_time=draw(st.integers(0, 2**31 - 1)),
            finalized_features_epoch=-1,
        )
    return error_response(spec.response_type, ErrorCode.none)


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_minimal_response_round_trips(spec):
    body = error_response(spec.response_type, ErrorCode.unknown_server_error)
    frame = encode_response(spec, 7, body)
    assert decode_response(spec, _strip_prefix(frame)) == (7, body)


@DETERMINISTIC
@given(data=st.data(), correlation_id=correlation_ids)
def test_response_round_trips(data, correlation_id):
    spec = data.draw(st.sampled_from(SPECS), label="spec")
    body = data.draw(response_bodies(spec), label="body")
    frame = _strip_prefix(encode_response(spec, correlation_id, body))
    assert decode_response(spec, frame) == (correlation_id, body)


def test_api_versions_responses_use_header_v0():
    """KIP-511: a client that cannot parse our ApiVersions must still read the correlation id,
    so every ApiVersions response header is v0 (no tagged fields), even for flexible versions."""
    for version in range(REGISTRY.supported[ApiKey.API_VERSIONS][1] + 1):
        spec = REGISTRY.get(ApiKey.API_VERSIONS, version)
        frame = _strip_prefix(encode_response(spec, 0x01020304, _minimal_response(spec)))
        assert frame[:4] == b"\x01\x02\x03\x04"
        assert spec.response_header_type.__module__.endswith(".v0.header")


# --- what the broker refuses ------------------------------------------------------------


@DETERMINISTIC
@given(
    version=st.integers(REGISTRY.supported[ApiKey.API_VERSIONS][1] + 1, 2**15 - 1),
    correlation_id=correlation_ids,
    tail=st.binary(max_size=32),
)
def test_api_versions_at_an_unsupported_version_decodes_without_a_body(
    version, correlation_id, tail
):
    frame = struct.pack(">hhi", ApiKey.API_VERSIONS, version, correlation_id) + tail
    decoded = decode_request(frame, REGISTRY)
    assert decoded.body is None
    assert decoded.spec is None
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id) == (
        ApiKey.API_VERSIONS,
        version,
        correlation_id,
    )


def test_api_versions_v99_decodes_without_a_body():
    decoded = decode_request(struct.pack(">hhi", ApiKey.API_VERSIONS, 99, 12345), REGISTRY)
    assert decoded.body is None
    assert decoded.correlation_id == 12345
    assert decoded.api_version == 99


# An API kio knows but trikafka does not implement (yet) is as unknown to us as 9999.
_KNOWN_TO_KIO_ONLY = [key for key in sorted(api_key_map) if key not in REGISTRY.supported][:1]


@pytest.mark.parametrize("api_key", [9999, 250, -1, *_KNOWN_TO_KIO_ONLY])
def test_unknown_api_key_is_an_invalid_request(api_key):
    frame = struct.pack(">hhi", api_key, 0, 1) + b"\x00" * 16
    with pytest.raises(InvalidRequestError) as info:
        decode_request(frame, REGISTRY)
    assert not isinstance(info.value, UnsupportedRequestVersionError)
    assert info.value.error_code == ErrorCode.invalid_request
    assert info.value.close_connection
    assert str(api_key) in str(info.value)


@pytest.mark.parametrize(
    "version", [99, REGISTRY.supported[ApiKey.METADATA][1] + 1, -1], ids=["v99", "max+1", "v-1"]
)
def test_supported_key_at_unsupported_version(version):
    frame = struct.pack(">hhi", ApiKey.METADATA, version, 1) + b"\x00" * 16
    with pytest.raises(UnsupportedRequestVersionError) as info:
        decode_request(frame, REGISTRY)
    assert info.value.error_code == ErrorCode.unsupported_version
    assert info.value.close_connection
    assert "Metadata" in str(info.value)
    assert f"v{version}" in str(info.value)


@pytest.mark.parametrize("size", range(8))
def test_frame_shorter_than_a_header(size):
    with pytest.raises(InvalidRequestError):
        decode_request(struct.pack(">hhi", ApiKey.METADATA, 12, 1)[:size], REGISTRY)


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_truncated_request_is_an_invalid_request(spec):
    request = _minimal_request(spec)
    frame = _strip_prefix(encode_request(spec, 1, request, "client-id"))
    assert decode_request(frame, REGISTRY).body == request  # whole, it decodes
    # Every request ends in a field it cannot do without (the last field, or the tagged-field
    # count of a flexible version), so every cut through it is refused, never half-decoded.
    for cut in range(8, len(frame)):
        with pytest.raises(InvalidRequestError) as info:
            decode_request(frame[:cut], REGISTRY)
        assert info.value.error_code == ErrorCode.invalid_request, cut


# --- defusing kio's array-count allocation (see the module docstring) --------------------

_FIXED_SIZES = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}  # fmt: skip


class _Stop(Exception):
    """kio would stop reading here too (bytes exhausted, or a structure it refuses)."""


@dataclasses.dataclass
class _Bomb:
    at: int  # offset of the array count
    width: int  # bytes of the count on the wire
    compact: bool
    room: int  # bytes left after the count


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    for index in range(5):
        if pos >= len(data):
            raise _Stop
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return result, pos
    raise _Stop


def _int(data: bytes, pos: int, fmt: str) -> tuple[int, int]:
    size = struct.calcsize(fmt)
    if pos + size > len(data):
        raise _Stop
    return struct.unpack_from(fmt, data, pos)[0], pos + size


def _skip(data: bytes, pos: int, size: int) -> int:
    if size < 0 or pos + size > len(data):
        raise _Stop
    return pos + size


def _walk_primitive(kafka_type: str, flexible: bool, data: bytes, pos: int) -> int:
    if kafka_type in _FIXED_SIZES:
        return _skip(data, pos, _FIXED_SIZES[kafka_type])
    if kafka_type not in ("string", "bytes", "records"):
        raise _Stop
    if flexible:
        length, pos = _uvarint(data, pos)
        return pos if length == 0 else _skip(data, pos, length - 1)
    length, pos = _int(data, pos, ">h" if kafka_type == "string" else ">i")
    return pos if length == -1 else _skip(data, pos, length)


def _walk_entity(cls: type, data: bytes, pos: int, bombs: list, nullable: bool = False) -> int:
    """Mirror kio's ``parse_entity``: regular fields in order, then the tagged section."""
    if nullable:
        marker, pos = _int(data, pos, ">b")
        if marker == -1:
            return pos
    flexible = cls.__flexible__
    fields = dataclasses.fields(cls)
    tagged = {get_field_tag(f): f for f in fields if get_field_tag(f) is not None}
    for field in fields:
        if get_field_tag(field) is None:
            pos = _walk_field(field, flexible, data, pos, bombs)
    if flexible:
        count, pos = _uvarint(data, pos)
        for _ in range(count):
            tag, pos = _uvarint(data, pos)
            size, pos = _uvarint(data, pos)
            if tag in tagged:
                pos = _walk_field(tagged[tag], flexible, data, pos, bombs)
            else:
                # kio 0.6.5 refuses unknown tags; Kafka skips them. Reading on is safe either
                # way: walking further than kio only ever clamps more.
                pos = _skip(data, pos, size)
    return pos


def _walk_field(field: dataclasses.Field, flexible: bool, data: bytes, pos: int, bombs: list) -> int:
    kind = classify_field(field)
    if isinstance(kind, EntityField):
        return _walk_entity(kind.type_, data, pos, bombs, nullable=is_optional(field))
    if not kind.is_array:
        return _walk_primitive(get_schema_field_type(field), flexible, data, pos)
    start = pos
    if flexible:
        count, pos = _uvarint(data, pos)
        if count == 0:
            return pos
        count -= 1
    else:
        count, pos = _int(data, pos, ">i")
        if count == -1:
            return pos
        if count < 0:
            raise _Stop
    if count > len(data) - pos:  # each element takes at least one byte
        bombs.append(_Bomb(start, pos - start, flexible, len(data) - pos))
        raise _Stop
    for _ in range(count):
        if isinstance(kind, EntityTupleField):
            pos = _walk_entity(kind.type_, data, pos, bombs)
        else:
            assert isinstance(kind, PrimitiveTupleField)
            pos = _walk_primitive(get_schema_field_type(field), flexible, data, pos)
    return pos


def _body_bombs(frame: bytes) -> tuple[list[_Bomb], int | None]:
    """Array counts in the body that exceed the bytes left, and where the walk ended."""
    if len(frame) < 8:
        return [], None
    spec = REGISTRY.get(*struct.unpack_from(">hh", frame, 0))
    if spec is None:
        return [], None
    bombs: list[_Bomb] = []
    try:
        # Request header: api key, version, correlation id, then a legacy nullable client id
        # even in header v2, whose tag section has no known tags (all skipped by size).
        client_id, pos = _int(frame, 8, ">h")
        if client_id < -1:
            raise _Stop
        pos = _skip(frame, pos, max(client_id, 0))
        if spec.request_header_type.__flexible__:
            count, pos = _uvarint(frame, pos)
            for _ in range(count):
                _tag, pos = _uvarint(frame, pos)
                size, pos = _uvarint(frame, pos)
                pos = _skip(frame, pos, size)
        end = _walk_entity(spec.request_type, frame, pos, bombs)
    except _Stop:
        end = None
    return bombs, end


@DETERMINISTIC
@given(frame=request_frames())
def test_bomb_walker_reads_valid_frames_exactly_as_kio_does(frame):
    """The walker is only trustworthy if it follows kio's layout: on every valid frame it
    must find no bomb and end exactly where the frame ends."""
    _spec, data = frame
    assert _body_bombs(data) == ([], len(data))


def _decode_or_refuse(frame: bytes) -> None:
    """The property: decode, or raise InvalidRequestError. Anything else fails the test."""
    bombs, _end = _body_bombs(frame)
    if bombs:
        # kio would reserve memory for an impossible count (and may abort): the guard, which
        # runs before kio, must refuse the frame. Not decoded here, so a gap fails, not aborts.
        spec = REGISTRY.get(*struct.unpack_from(">hh", frame, 0))
        with pytest.raises(InvalidRequestError):
            check_request(spec.request_header_type.__flexible__, spec.request_type, frame)
        return
    try:
        decoded = decode_request(frame, REGISTRY)
    except InvalidRequestError:
        return
    api_key, version, correlation_id = peek_api(frame)
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id) == (
        api_key,
        version,
        correlation_id,
    )
    if decoded.spec is None:
        assert api_key == ApiKey.API_VERSIONS and decoded.body is None
    else:
        assert isinstance(decoded.body, decoded.spec.request_type)


@FUZZ
@given(st.binary(max_size=96))
def test_any_bytes_decode_or_raise_invalid_request(data):
    _decode_or_refuse(data)


@FUZZ
@given(
    spec=st.sampled_from(SPECS),
    correlation_id=correlation_ids,
    tail=st.binary(max_size=96),
)
def test_any_body_after_a_supported_head_decodes_or_raises_invalid_request(
    spec, correlation_id, tail
):
    frame = struct.pack(">hhi", spec.api_key, spec.version, correlation_id) + tail
    _decode_or_refuse(frame)


@FUZZ
@given(
    frame=request_frames(),
    edits=st.lists(
        st.tuples(
            st.sampled_from(["set", "insert", "delete"]),
            st.integers(min_value=0),
            st.integers(0, 255),
        ),
        min_size=1,
        max_size=6,
    ),
    cut=st.none() | st.integers(min_value=0),
)
def test_mutated_valid_frames_decode_or_raise_invalid_request(frame, edits, cut):
    _spec, data = frame
    mutated = bytearray(data)
    for op, position, value in edits:
        # Keep api key and version mostly intact so the body parser, not the lookup, is tested.
        position = 4 + position % max(1, len(mutated) - 3)
        if op == "set" and position < len(mutated):
            mutated[position] = value
        elif op == "insert":
            mutated[position:position] = bytes([value])
        elif op == "delete" and position < len(mutated):
            del mutated[position]
    if cut is not None:
        del mutated[cut % (len(mutated) + 1) :]
    _decode_or_refuse(bytes(mutated))


@pytest.mark.parametrize(
    "frame",
    [
        # Metadata v12, client id length says 0x7fff bytes but none follow.
        struct.pack(">hhih", ApiKey.METADATA, 12, 1, 0x7FFF),
        # A client id that is not UTF-8.
        struct.pack(">hhih", ApiKey.METADATA, 4, 1, 2) + b"\xff\xfe" + b"\x00\x00\x00\x00\x01",
        # ApiVersions v3 with a null compact string where a name is required.
        struct.pack(">hhih", ApiKey.API_VERSIONS, 3, 1, -1) + b"\x00" + b"\x00",
        # Metadata v4 with a negative (not -1) topics count.
        struct.pack(">hhihi", ApiKey.METADATA, 4, 1, -1, -2),
        # Metadata v12: a topic count one more than the bytes can hold.
        struct.pack(">hhih", ApiKey.METADATA, 12, 1, -1) + b"\x00" + b"\x03" + b"\x00" * 17,
    ],
    ids=[
        "client-id-too-long",
        "bad-utf8",
        "null-name",
        "negative-count",
        "count-past-end",
    ],
)
def test_hostile_frames_are_invalid_requests(frame):
    with pytest.raises(InvalidRequestError):
        decode_request(frame, REGISTRY)


@pytest.mark.parametrize("where", ["body", "header"])
def test_unknown_tagged_fields_are_skipped(where):
    """Kafka (KIP-482) skips a tag it does not know by its size; kio 0.6.5 alone would refuse
    it, closing the connection of any client newer than us."""
    spec = REGISTRY.get(ApiKey.METADATA, 12)
    unknown = b"\x01" + b"\x07" + b"\x02" + b"\xab\xcd"  # one field, tag 7, two bytes
    header = struct.pack(">hhih", ApiKey.METADATA, 12, 5, -1)
    body = b"\x01" + b"\x00" + b"\x00"  # no topics, two false flags
    if where == "body":
        frame = header + b"\x00" + body + unknown
    else:
        frame = header + unknown + body + b"\x00"
    decoded = decode_request(frame, REGISTRY)
    assert decoded.correlation_id == 5
    expected = build(
        spec.request_type,
        topics=[],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    assert decoded.body == expected


def test_impossible_count_behind_unknown_header_tags_is_refused_by_the_guard():
    """The guard drops unknown header tags so kio can read the body: the body it hands on
    must still have been bounds-checked."""
    frame = (
        struct.pack(">hhih", ApiKey.METADATA, 12, 1, -1)
        + b"\x01\x05\x01\x00"  # header: one unknown tag (5) of one byte
        + b"\xff\xff\xff\xff\x0f"  # body: 2**32 - 2 topics, nothing after
    )
    assert _body_bombs(frame)[0]
    spec = REGISTRY.get(ApiKey.METADATA, 12)
    with pytest.raises(InvalidRequestError, match="cannot fit"):
        check_request(True, spec.request_type, frame)


# --- the allocation bomb, in a child process ---------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys
    from trikafka.errors import InvalidRequestError
    from trikafka.protocol.headers import decode_request
    from trikafka.protocol.registry import IMPLEMENTED_APIS, ApiRegistry

    try:
        decode_request(bytes.fromhex(sys.argv[1]), ApiRegistry({3: IMPLEMENTED_APIS[3]}))
    except InvalidRequestError as exc:
        print("InvalidRequestError:", exc)
    else:
        print("decoded")
    """
)
_ADDRESS_SPACE = 2 * 1024**3  # the same limit on every machine: the result does not depend on RAM


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_ADDRESS_SPACE, _ADDRESS_SPACE))


@pytest.mark.parametrize(
    "frame",
    [
        # Metadata v4: topics count 2**31-1, nothing after: 16 GiB asked for.
        struct.pack(">hhihi", ApiKey.METADATA, 4, 1, -1, 2**31 - 1),
        # Metadata v12: compact topics count 0xffffffff (varint), nothing after: 32 GiB.
        struct.pack(">hhih", ApiKey.METADATA, 12, 1, -1) + b"\x00" + b"\xff\xff\xff\xff\x0f",
    ],
    ids=["legacy-array", "compact-array"],
)
def test_huge_array_count_is_an_invalid_request_not_an_abort(frame):
    """Before the guard, each of these frames killed the broker process with SIGABRT."""
    assert _body_bombs(frame)[0], "the frame must declare an impossible array count"
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, frame.hex()],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_address_space,
        env={**os.environ, "RUST_BACKTRACE": "0"},
    )
    assert child.returncode == 0, f"decoder died with {child.returncode}: {child.stderr[-500:]}"
    assert child.stdout.startswith("InvalidRequestError"), child.stdout


# --- record batches lifted out of Produce frames as views ----------------------------------


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_produce_records_of_lift_size_are_views_of_the_frame_equal_to_kios_bytes(version):
    """A Produce request's large ``records`` are views of the frame (no kio copy); small
    ones and nulls stay as kio decodes them; every other field is what kio decodes."""
    import datetime

    from kio.static.primitive import i16, i32

    from trikafka.protocol.guard import LIFT_RECORDS_MIN
    from trikafka.protocol.records import build_batch

    spec = REGISTRY.get(0, version)
    module = sys.modules[spec.request_type.__module__]
    big = b"".join(build_batch([(b"k", b"v" * 1000, (), 1)] * 5) for _ in range(3))
    assert len(big) >= LIFT_RECORDS_MIN
    small = build_batch([(None, b"s", (), 1)])
    parts = module.PartitionProduceData
    body = spec.request_type(
        transactional_id="tx",
        acks=i16(-1),
        timeout=datetime.timedelta(milliseconds=1500),
        topic_data=(
            module.TopicProduceData(
                name="t",
                partition_data=(
                    parts(index=i32(0), records=big),
                    parts(index=i32(1), records=small),
                    parts(index=i32(2), records=None),
                ),
            ),
            module.TopicProduceData(name="u", partition_data=(parts(index=i32(7), records=big),)),
        ),
    )
    frame = encode_request(spec, 42, body, "client")[4:]
    decoded = decode_request(frame, REGISTRY)
    got = [p.records for t in decoded.body.topic_data for p in t.partition_data]
    assert [type(r) for r in got] == [memoryview, bytes, type(None), memoryview]
    assert all(r.readonly for r in got if isinstance(r, memoryview))
    assert [bytes(r) if r is not None else None for r in got] == [big, small, None, big]
    assert [t.name for t in decoded.body.topic_data] == ["t", "u"]
    assert [p.index for t in decoded.body.topic_data for p in t.partition_data] == [0, 1, 2, 7]
    assert (decoded.body.transactional_id, decoded.body.acks) == ("tx", -1)
    assert decoded.header.correlation_id == 42
    # The views are of the frame itself, not of a copy.
    view = got[0]
    assert view.obj is frame
