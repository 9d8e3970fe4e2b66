"""Raw frames for tests that speak bytes: write requests and read answers without a client.

Useful where a test must control exactly what is on the wire — pipelining, bad frames,
unsupported versions.
"""

from __future__ import annotations

import trio
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from trikafka.protocol.framing import NEED_DATA, FrameDecoder
from trikafka.protocol.headers import decode_response, encode_request
from trikafka.protocol.registry import ApiRegistry

__all__ = ["api_versions_frame", "api_versions_response", "read_frames", "read_until_closed"]

REGISTRY = ApiRegistry()
API_VERSIONS_V3 = REGISTRY.require(18, 3)


def api_versions_frame(correlation_id: int) -> bytes:
    body = ApiVersionsRequest(client_software_name="test", client_software_version="1")
    return encode_request(API_VERSIONS_V3, correlation_id, body, "raw")


async def read_frames(stream: trio.abc.Stream, count: int) -> list[bytes]:
    decoder = FrameDecoder(2**31 - 1)
    frames: list[bytes] = []
    while len(frames) < count:
        frame = decoder.next_frame()
        if frame is NEED_DATA:
            data = await stream.receive_some(65536)
            assert data, f"connection closed after {len(frames)} of {count} frames"
            decoder.receive_data(data)
        else:
            frames.append(bytes(frame))  # the decoder hands out views (some of a reused buffer)
    return frames


async def read_until_closed(stream: trio.abc.Stream) -> bytes:
    """Everything the broker writes until it closes the connection."""
    received = bytearray()
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return bytes(received)
        received += data


def api_versions_response(frame: bytes) -> tuple[int, object]:
    """(correlation id, ApiVersionsResponse v3) of a response frame."""
    return decode_response(API_VERSIONS_V3, frame)
