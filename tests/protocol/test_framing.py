"""FrameDecoder: size-delimited frames out of a byte stream cut anywhere.

Pure bytes, no trio. Hypothesis runs derandomized so CI sees the same examples every time.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trikafka.errors import FrameSizeError, InvalidRequestError
from trikafka.protocol.framing import NEED_DATA, SIZE_PREFIX, FrameDecoder, encode_frame

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None, max_examples=300)

frames_strategy = st.lists(st.binary(max_size=64), max_size=12)


def _drain(decoder: FrameDecoder) -> list[bytes]:
    out = []
    while (frame := decoder.next_frame()) is not NEED_DATA:
        if isinstance(frame, memoryview):
            # A large frame (its own buffer) or a small one sliced from received bytes.
            assert frame.readonly
            frame = frame.tobytes()
        assert isinstance(frame, bytes)
        out.append(frame)
    return out


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


def test_a_small_frame_read_whole_is_a_view_of_the_received_bytes_and_stays_valid():
    """No copy for frames a read brought whole; the view outlives later reads (it pins the
    immutable bytes, never a buffer the decoder writes again)."""
    decoder = FrameDecoder(max_size=1024)
    decoder.receive_data(encode_frame(b"first") + encode_frame(b"second") + b"\x00\x00")
    first = decoder.next_frame()
    assert isinstance(first, memoryview) and first.readonly
    second = decoder.next_frame()
    assert decoder.next_frame() is NEED_DATA  # half a prefix pending: assembled from here on
    decoder.receive_data(b"\x00\x05thi")
    decoder.receive_data(b"rd" + encode_frame(b"fourth"))
    third = decoder.next_frame()
    assert isinstance(third, bytes)  # it spanned three reads: copied out of the buffer
    assert [bytes(first), bytes(second), third] == [b"first", b"second", b"third"]
    assert bytes(decoder.next_frame()) == b"fourth"  # type: ignore[arg-type]
    assert decoder.buffered == 0


def test_encode_frame_is_a_big_endian_length_then_the_payload():
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"
    assert SIZE_PREFIX.size == 4


@DETERMINISTIC
@given(
    frames=frames_strategy,
    cuts=st.lists(st.integers(min_value=0), max_size=20),
    large_frame=st.sampled_from([0, 1, 8, 32, 64 * 1024]),
    receive_into=st.booleans(),
)
def test_frames_split_at_any_byte_reassemble_exactly(frames, cuts, large_frame, receive_into):
    """Small frames are cut from the shared buffer, large ones filled in their own — by
    copying chunks in or by receiving straight into ``unfilled()``; the stream is the same."""
    stream = b"".join(encode_frame(f) for f in frames)
    decoder = FrameDecoder(max_size=64, large_frame=large_frame)
    received: list[bytes] = []
    for chunk in _split(stream, cuts):
        view = decoder.unfilled() if receive_into else None
        if view is not None:
            take = min(len(view), len(chunk))
            view[:take] = chunk[:take]
            decoder.received_into(take)
            chunk = chunk[take:]
            received.extend(_drain(decoder))
        decoder.receive_data(chunk)
        received.extend(_drain(decoder))
    assert received == frames
    assert decoder.buffered == 0
    assert decoder.next_frame() is NEED_DATA


@DETERMINISTIC
@given(frames=frames_strategy, kind=st.sampled_from([bytes, bytearray, memoryview]))
def test_one_byte_at_a_time(frames, kind):
    stream = b"".join(encode_frame(f) for f in frames)
    decoder = FrameDecoder(max_size=64)
    received: list[bytes] = []
    for i in range(len(stream)):
        decoder.receive_data(kind(stream[i : i + 1]))
        received.extend(_drain(decoder))
    assert received == frames
    assert decoder.buffered == 0


@DETERMINISTIC
@given(frames=frames_strategy)
def test_whole_stream_in_one_chunk(frames):
    decoder = FrameDecoder(max_size=64)
    decoder.receive_data(b"".join(encode_frame(f) for f in frames))
    assert _drain(decoder) == frames


def test_frame_of_exactly_max_size_is_accepted():
    decoder = FrameDecoder(max_size=16)
    decoder.receive_data(encode_frame(b"x" * 16))
    assert decoder.next_frame() == b"x" * 16
    assert decoder.next_frame() is NEED_DATA


def test_empty_frame():
    decoder = FrameDecoder(max_size=16)
    decoder.receive_data(encode_frame(b"") + encode_frame(b"a"))
    assert _drain(decoder) == [b"", b"a"]


@DETERMINISTIC
@given(
    max_size=st.integers(min_value=0, max_value=2**20),
    size=st.one_of(
        st.integers(min_value=-(2**31), max_value=-1),
        st.integers(min_value=1, max_value=2**31 - 1),
    ),
)
def test_out_of_range_prefix_fails_as_soon_as_the_prefix_arrives(max_size, size):
    if 0 <= size <= max_size:
        size = max_size + 1 if max_size < 2**31 - 1 else -1
    prefix = struct.pack(">i", size)
    decoder = FrameDecoder(max_size=max_size)
    for byte in prefix[:3]:
        decoder.receive_data(bytes([byte]))
        assert decoder.next_frame() is NEED_DATA
    decoder.receive_data(prefix[3:])
    # No body byte has arrived: the size alone condemns the frame.
    with pytest.raises(FrameSizeError) as info:
        decoder.next_frame()
    assert isinstance(info.value, InvalidRequestError)
    assert str(size) in str(info.value)
    assert str(max_size) in str(info.value)


def test_max_size_plus_one_is_refused():
    decoder = FrameDecoder(max_size=16)
    decoder.receive_data(struct.pack(">i", 17))
    with pytest.raises(FrameSizeError):
        decoder.next_frame()


def test_negative_prefix_is_refused():
    decoder = FrameDecoder(max_size=16)
    decoder.receive_data(b"\xff\xff\xff\xff")
    with pytest.raises(FrameSizeError):
        decoder.next_frame()


def test_good_frames_before_a_bad_prefix_still_come_out():
    decoder = FrameDecoder(max_size=8)
    decoder.receive_data(encode_frame(b"ok") + struct.pack(">i", 9))
    assert decoder.next_frame() == b"ok"
    with pytest.raises(FrameSizeError):
        decoder.next_frame()


def test_huge_prefix_buffers_nothing_beyond_what_was_sent():
    """A hostile 2 GiB prefix costs four bytes, not two gigabytes."""
    decoder = FrameDecoder(max_size=100 * 1024 * 1024)
    decoder.receive_data(struct.pack(">i", 2**31 - 1))
    with pytest.raises(FrameSizeError):
        decoder.next_frame()
    assert decoder.buffered <= 4


def test_buffered_counts_bytes_not_yet_handed_out():
    decoder = FrameDecoder(max_size=16)
    assert decoder.buffered == 0
    decoder.receive_data(encode_frame(b"abc") + b"\x00\x00")
    assert decoder.buffered == 9
    assert decoder.next_frame() == b"abc"
    assert decoder.buffered == 2
    assert decoder.next_frame() is NEED_DATA
