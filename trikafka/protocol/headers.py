"""Request headers in, response frames out.

A request frame starts with api key and api version (two int16s); they say which header
version follows (v2 for an API version that is flexible, else v1) and which body class to
read. Two Kafka rules live here:

* ApiVersions at a version we do not support is *not* an error of the frame: Kafka reads the
  correlation id and answers with an ApiVersions v0 response (KIP-511), so the client can
  retry with a version we know. ``decode_request`` returns it with ``body=None``.
* Any other unknown api key or unsupported version, or bytes that do not parse, raise
  :class:`InvalidRequestError` / :class:`UnsupportedRequestVersionError`, and the connection closes.

ApiVersions responses always use response header v0, whatever the version; kio's classes
already say so through ``__header_schema__``.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.static.primitive import i16, i32

from trikafka.errors import InvalidRequestError, UnsupportedRequestVersionError
from trikafka.protocol.encoder import encoder_for, entity_encoder
from trikafka.protocol.guard import check_request, put_back_records
from trikafka.protocol.registry import ApiKey, ApiRegistry, ApiVersionSpec, api_name

if TYPE_CHECKING:
    from kio.static.protocol import RequestHeader

__all__ = [
    "Buffers",
    "SEPARATE_BUFFER",
    "DecodedRequest",
    "LastRequest",
    "decode_request",
    "encode_request",
    "encode_request_parts",
    "encode_response",
    "encode_response_body",
    "frame_response",
    "response_parts",
    "decode_response",
    "peek_api",
]

_PRODUCE = ApiKey.PRODUCE  # the one request with record batches: lifted out of the frame as views
_API_HEAD = struct.Struct(">hhi")

_REPEAT_MAX_FRAME = 1024
_REPEAT_KEYS = frozenset({ApiKey.FETCH, ApiKey.METADATA, ApiKey.API_VERSIONS})


class LastRequest:
    """The last Fetch, Metadata or ApiVersions frame a connection sent, with its decoding.

    Why: a consumer polling a partition with nothing new (``fetch.wait.max.ms=0``) sends the
    same frame again and again on its connection, thousands a second; checking and decoding
    it (~8 µs) was a third of answering it. Clients refresh metadata with the same frame too
    (a Metadata v12 frame: 3.1 µs to check and decode, ~1.5 µs as a repeat). kio's entities
    are frozen, so one decoded body serves every repeat; the header is copied with the new
    correlation id (:func:`_renumbered`). The bytes were checked when first seen, and the
    same bytes decode the same way, so nothing Kafka would refuse gets in.

    One per connection (its ``ConnectionState`` holds it), and only the last frame: a
    process-wide table of recent frames (256, emptied when full) kept each decoded frame
    alive for hundreds of requests. A busy-polling consumer's frame changes with every
    record it reads, so each entry (seven objects the collector tracks) outlived Python's
    generation-0 threshold and made collections (~0.1 ms each, inside some request); the
    table caused about a third of them in ``python -m benchmarks.gc_pressure``, deadlines on
    reads the rest (``Processor._expire_idle_connections``). Here a frame's decoding dies
    when the next different frame of its connection replaces it.
    """

    __slots__ = ("key", "spec", "header", "body")

    def __init__(self) -> None:
        self.key: bytes | None = None  # the frame without its correlation id
        self.spec: ApiVersionSpec | None = None
        self.header: RequestHeader | None = None
        self.body: object = None


_set = object.__setattr__
_new = object.__new__


def _renumbered(header: RequestHeader, correlation_id: int) -> RequestHeader:
    """``header`` (a frozen kio RequestHeader v1 or v2: the same four fields) with another
    correlation id, a plain int as kio's reader gives it.

    Set field by field: ``dataclasses.replace`` runs kio's ``__init__`` again (1.9 µs against
    0.4 µs here), more than a repeat saves on a small Metadata request."""
    new = _new(header.__class__)
    _set(new, "request_api_key", header.request_api_key)
    _set(new, "request_api_version", header.request_api_version)
    _set(new, "client_id", header.client_id)
    _set(new, "correlation_id", correlation_id)
    return new



@attrs.frozen(slots=True, cache_hash=False, eq=False)
class DecodedRequest:
    header: RequestHeader  # kio's, v1 or v2
    body: object | None  # None only for an unsupported ApiVersions version
    spec: ApiVersionSpec | None

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


def peek_api(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id) from the first 8 bytes of a request frame."""
    if len(frame) < _API_HEAD.size:
        raise InvalidRequestError(f"request frame of {len(frame)} bytes is shorter than a header")
    return _API_HEAD.unpack_from(frame, 0)


def decode_request(frame: bytes, registry: ApiRegistry, last: LastRequest | None = None) -> DecodedRequest:
    """The frame's header and body; ``last`` (a connection's :class:`LastRequest`) answers a
    repeat of the connection's previous small Fetch, Metadata or ApiVersions frame."""
    api_key, api_version, correlation_id = peek_api(frame)
    spec = registry.get(api_key, api_version)
    repeat: bytes | None = None
    if last is not None and api_key in _REPEAT_KEYS and spec is not None and len(frame) <= _REPEAT_MAX_FRAME:
        data = bytes(frame)
        repeat = data[:4] + data[8:]
        if repeat == last.key and last.spec is spec and last.header is not None:
            return DecodedRequest(header=_renumbered(last.header, correlation_id), body=last.body, spec=spec)
    if spec is None:
        if api_key == ApiKey.API_VERSIONS and api_version >= 0:
            header = RequestHeaderV1(
                request_api_key=i16(api_key),
                request_api_version=i16(api_version),
                correlation_id=i32(correlation_id),
                client_id=None,
            )
            return DecodedRequest(header=header, body=None, spec=None)
        if api_key in registry.supported:
            lo, hi = registry.supported[api_key]
            raise UnsupportedRequestVersionError(
                f"{api_name(api_key)} v{api_version} is not supported (v{lo}-v{hi} are)"
            )
        raise InvalidRequestError(f"unknown api key {api_key} (version {api_version})")
    try:
        # Bounds and unknown tags first: kio allocates from wire counts and refuses unknown tags.
        lift: list[Any] | None = [] if api_key == _PRODUCE else None
        checked, body_start = check_request(
            spec.request_header_type.__flexible__, spec.request_type, frame, lift
        )
        header, offset = spec.read_request_header(checked, 0)
        if offset != body_start:
            raise InvalidRequestError(f"{spec.name} v{api_version} request header is malformed")
        body, _size = spec.read_request(checked, offset)
        if lift and any(lift):
            # Views of the frame, no copy: a large frame's buffer is reused only once the
            # connection reads its next frame, after this request's response (the mute cycle).
            put_back_records(body, spec.request_type, lift, frame)
    except InvalidRequestError:
        raise
    except Exception as exc:  # kio raises whatever the bytes provoke; all of it is bad input
        raise InvalidRequestError(
            f"cannot parse {spec.name} v{api_version} request: {type(exc).__name__}: {exc}"
        ) from exc
    # Trailing bytes are ignored, as Kafka's parser does: librdkafka 2.x sends three extra
    # bytes after some Metadata v13 bodies, and Kafka answers them.
    if repeat is not None:
        last.key, last.spec, last.header, last.body = repeat, spec, header, body  # type: ignore[union-attr]  # repeat is set only with a LastRequest
    return DecodedRequest(header=header, body=body, spec=spec)


def _frame(write: Callable[[io.BytesIO], object]) -> bytes:
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    write(buffer)
    data = buffer.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    del data
    return buffer.getvalue()


# A response header is the correlation id (v0) plus, when flexible (v1), an empty tagged-field
# section: written by hand because kio's entity writer cost as much as a small body.
_HEAD_V0 = struct.Struct(">ii")
_HEAD_V1 = struct.Struct(">iiB")


def _response_head(spec: ApiVersionSpec) -> struct.Struct:
    return _HEAD_V1 if spec.response_header_type.__flexible__ else _HEAD_V0


def encode_response(spec: ApiVersionSpec, correlation_id: int, body: object) -> bytes:
    """A whole response frame (size prefix, header, body) as one buffer."""
    parts = response_parts(spec, correlation_id, body)
    return b"".join(parts)


def response_parts(
    spec: ApiVersionSpec, correlation_id: int, body: object, values: bool = False
) -> list[Any]:
    """A response frame as a list of buffers (record sets stay the store's chunks, uncopied).

    ``body`` is a built kio entity, or — with ``values`` — the mapping ``build`` would take
    (the encoder writes it without building anything).
    """
    head = _response_head(spec)
    parts: list[Any] = [b""]
    if values:
        encoder_for(spec.response_type)(parts, body)
    else:
        entity_encoder(spec.response_type)(parts, body)
    size = sum(map(len, parts)) + head.size - 4
    parts[0] = head.pack(size, correlation_id, 0) if head is _HEAD_V1 else head.pack(size, correlation_id)
    return parts


def encode_response_body(spec: ApiVersionSpec, body: object, values: bool = False) -> bytes:
    """The body alone, for answers that do not change between requests (cached by callers)."""
    parts: list[Any] = []
    if values:
        encoder_for(spec.response_type)(parts, body)
    else:
        entity_encoder(spec.response_type)(parts, body)
    return b"".join(parts)


def frame_response(spec: ApiVersionSpec, correlation_id: int, body: bytes) -> bytes:
    """A response frame around an already encoded body."""
    head = _response_head(spec)
    if head is _HEAD_V1:
        return head.pack(len(body) + 5, correlation_id, 0) + body
    return head.pack(len(body) + 4, correlation_id) + body


def encode_request(
    spec: ApiVersionSpec, correlation_id: int, body: object, client_id: str | None
) -> bytes:
    """A whole request frame, for the project's client and for tests."""
    header = spec.request_header_type(
        request_api_key=i16(spec.api_key),
        request_api_version=i16(spec.version),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )

    def write(buffer: io.BytesIO) -> None:
        spec.write_request_header(buffer, header)
        spec.write_request(buffer, body)

    return _frame(write)


class Buffers:
    """A bytes field's value as buffers whose concatenation is the value (a record batch's
    header and records): :func:`encode_request_parts` puts each in the frame uncopied.
    Only that function writes it; ``bytes(value)`` joins it."""

    __slots__ = ("parts", "size")

    def __init__(self, *parts: bytes | bytearray | memoryview) -> None:
        self.parts = parts
        self.size = sum(len(part) for part in parts)

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)


class _PartsWriter:
    """A write target for kio's writers that keeps large values (a Produce request's record
    batches) as parts of their own rather than copying them into one buffer."""

    __slots__ = ("parts", "small", "size")

    def __init__(self) -> None:
        self.small = bytearray(4)  # the frame's size, patched at the end
        self.parts: list[Any] = [self.small]
        self.size = 0

    def write(self, data: bytes | Buffers) -> int:
        n = len(data)
        self.size += n
        if data.__class__ is Buffers:
            for part in data.parts:
                if len(part) >= _SEPARATE_BUFFER:
                    self.parts.append(part)
                    self.small = bytearray()
                    self.parts.append(self.small)
                else:
                    self.small += part
        elif n >= _SEPARATE_PART:
            self.parts.append(data)
            self.small = bytearray()
            self.parts.append(self.small)
        else:
            self.small += data  # type: ignore[arg-type]  # bytes: `__class__ is` narrows one way only
        return n


_SEPARATE_PART = 16 * 1024
#: A part of :class:`Buffers` (a produced batch's large values) from this size on is written
#: from where it is rather than copied: an iovec costs less than copying 4 KB.
SEPARATE_BUFFER = _SEPARATE_BUFFER = 4 * 1024


def encode_request_parts(
    spec: ApiVersionSpec, correlation_id: int, body: object, client_id: str | None
) -> list[Any]:
    """:func:`encode_request` as a list of buffers whose concatenation is the frame: values of
    16 KiB or more (record batches) are the caller's own objects, uncopied."""
    header = spec.request_header_type(
        request_api_key=i16(spec.api_key),
        request_api_version=i16(spec.version),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    out = _PartsWriter()
    spec.write_request_header(out, header)
    spec.write_request(out, body)
    struct.pack_into(">i", out.parts[0], 0, out.size)
    return [part for part in out.parts if part]


def decode_response(spec: ApiVersionSpec, frame: bytes | memoryview) -> tuple[int, object]:
    """(correlation id, body) of a response frame's body."""
    header, offset = spec.read_response_header(frame, 0)
    body, _ = spec.read_response(frame, offset)
    return header.correlation_id, body
