"""Size-delimited frames: a 4-byte big-endian length, then that many bytes.

The decoder is fed whatever the transport delivered (``receive_data``) and hands out whole
frames (``next_frame``). Two rules carry Kafka's safety: the size is checked *before* any of
the body is buffered, so a hostile 2 GiB prefix costs nothing; and a consumed frame is cut
from the front of the buffer once, so feeding many small chunks never rescans what is there.
"""

from __future__ import annotations

import enum
import struct

from trikafka.errors import FrameSizeError

__all__ = ["NEED_DATA", "FrameDecoder", "encode_frame", "SIZE_PREFIX"]

SIZE_PREFIX = struct.Struct(">i")


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA = _Sentinel.NEED_DATA


def encode_frame(payload: bytes) -> bytes:
    return SIZE_PREFIX.pack(len(payload)) + payload


class FrameDecoder:
    """Splits a byte stream into frames of at most ``max_size`` bytes."""

    __slots__ = ("_buffer", "_start", "max_size", "_expected")

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._buffer = bytearray()
        self._start = 0  # bytes before this index are consumed, cut lazily
        self._expected: int | None = None  # body size of the frame being assembled

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out as frames."""
        return len(self._buffer) - self._start

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._start:
            # Cut consumed bytes once per receive, not once per frame.
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data

    def next_frame(self) -> bytes | _Sentinel:
        """Return the next whole frame's body, or ``NEED_DATA``.

        Raises :class:`FrameSizeError` as soon as a size prefix is out of range.
        """
        buf = self._buffer
        start = self._start
        if self._expected is None:
            if len(buf) - start < 4:
                return NEED_DATA
            (size,) = SIZE_PREFIX.unpack_from(buf, start)
            if size < 0 or size > self.max_size:
                raise FrameSizeError(
                    f"frame size {size} is outside 0..{self.max_size} (socket.request.max.bytes)"
                )
            self._expected = size
            start += 4
            self._start = start
        size = self._expected
        if len(buf) - start < size:
            return NEED_DATA
        frame = bytes(buf[start : start + size])
        self._start = start + size
        self._expected = None
        if self._start == len(buf):
            buf.clear()
            self._start = 0
        return frame
