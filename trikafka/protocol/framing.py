"""Size-delimited frames: a 4-byte big-endian length, then that many bytes.

The decoder is fed whatever the transport delivered (``receive_data``) and hands out whole
frames (``next_frame``). Two rules carry Kafka's safety: the size is checked *before* any of
the body is buffered, so a hostile 2 GiB prefix costs nothing; and a consumed frame is cut
from the front of the buffer once, so feeding many small chunks never rescans what is there.
A large frame's buffer grows with the bytes that actually arrive, never from the prefix alone:
a client that declares 100 MB and sends four bytes costs kilobytes.
"""

from __future__ import annotations

import enum
import struct
from typing import Literal, TypeAlias

from trikafka.errors import FrameSizeError

__all__ = ["NEED_DATA", "NeedData", "FrameDecoder", "encode_frame", "SIZE_PREFIX", "FIRST_CHUNK", "MAX_GROWTH"]

SIZE_PREFIX = struct.Struct(">i")

#: A large frame's first buffer, before any of its body has arrived.
FIRST_CHUNK = 64 * 1024
#: A growing large frame's buffer at most doubles, and never by more than this at a time.
MAX_GROWTH = 1024 * 1024
_ZEROS = memoryview(bytes(MAX_GROWTH))


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA = _Sentinel.NEED_DATA
#: The type of ``NEED_DATA``, for signatures that may return it.
NeedData: TypeAlias = Literal[_Sentinel.NEED_DATA]


def encode_frame(payload: bytes) -> bytes:
    return SIZE_PREFIX.pack(len(payload)) + payload


class FrameDecoder:
    """Splits a byte stream into frames of at most ``max_size`` bytes.

    Small frames are handed out as read-only memoryviews of the ``bytes`` the transport
    delivered, when a read brought them whole (the common case: a request, or several
    pipelined ones, per read): no copy at all, and nothing to cut later. Only a frame split
    across reads is assembled in an accumulating buffer and copied out as ``bytes``. A view
    of immutable ``bytes`` stays valid as long as anyone holds it. A frame
    of ``large_frame`` bytes or more (a produce of big batches) is assembled in a buffer of
    its own that the transport's bytes are copied into once — or received into directly
    through :meth:`unfilled` — and handed out as a read-only memoryview, **valid until the
    next call to** :meth:`next_frame`: the buffer is reused for the next large frame (up to
    ``keep_spare`` bytes). A prefix alone allocates at most ``FIRST_CHUNK`` — or, once this
    connection has sent a large frame whole (it holds a spare), at most ``keep_spare``, the
    most it may hold anyway: a fresh buffer grows as the body arrives, doubling at most and
    by at most ``MAX_GROWTH`` at a time, in place where the allocator can (a view handed out
    by :meth:`unfilled` must be dropped before the next call, else the growth copies). Why: on this VM first-touching
    fresh memory costs ~0.4 ms per MiB in page faults, and accumulating a 1 MiB produce,
    slicing it out and copying it again touched three fresh MiB per request — half the
    broker's CPU under a 10 KB-message produce load. Reuse is safe because a connection asks
    for its next frame only once the request's response is written (the mute cycle): a
    Produce request's record batches are views of this buffer until then
    (:func:`trikafka.protocol.guard.check_request` lifts them), and the log copies them.
    """

    __slots__ = (
        "_buffer", "_start", "max_size", "_expected", "_large", "_size", "_filled", "_spare",
        "large_frame", "keep_spare", "trust_sizes", "__weakref__",
    )

    def __init__(
        self,
        max_size: int,
        large_frame: int = 64 * 1024,
        keep_spare: int = 4 * 1024 * 1024,
        *,
        trust_sizes: bool = False,
    ) -> None:
        self.max_size = max_size
        #: A client reading its broker's answers takes a large frame's declared size at its
        #: word and allocates the buffer whole (no growth steps, each a copy); the broker
        #: never does for its clients' frames.
        self.trust_sizes = trust_sizes
        self.large_frame = large_frame
        self.keep_spare = keep_spare
        #: Unconsumed bytes: the transport's own ``bytes`` while whole frames are sliced from
        #: them, else a ``bytearray`` accumulating a frame that spans reads.
        self._buffer: bytes | bytearray = b""
        self._start = 0  # bytes before this index are consumed, cut lazily
        self._expected: int | None = None  # body size of the small frame being assembled
        #: The large frame's buffer: the spare (at least ``_size`` long), or a fresh one that
        #: grows to ``_size`` as bytes arrive.
        self._large: bytearray | None = None
        self._size = 0  # the large frame's body size, from its prefix
        self._filled = 0
        self._spare: bytearray | None = None  # the last large frame's buffer, for reuse

    @property
    def pending_size(self) -> int:
        """The declared size of a frame whose prefix is read and whose body is not complete
        (the bytes a request memory pool reserves for it); 0 when there is none."""
        if self._large is not None:
            return self._size
        expected = self._expected
        return 0 if expected is None else expected

    @property
    def allocated(self) -> int:
        """Bytes of buffers this decoder holds (the spare, a growing large frame, pending bytes)."""
        spare = self._spare
        large = self._large
        held = 0 if spare is None else len(spare)
        if large is not None and large is not spare:
            held += len(large)
        return held + len(self._buffer)

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out as frames."""
        return len(self._buffer) - self._start + self._filled

    def has_frame(self) -> bool:
        """Whether a whole frame is buffered, so that :meth:`next_frame` would hand one out
        without another read. A size prefix out of range also answers True: the next call
        raises at once, with nothing more to read (the connection writes what it holds first)."""
        if self._large is not None:
            return self._filled == self._size
        available = len(self._buffer) - self._start
        size = self._expected
        if size is None:
            if available < 4:
                return False
            (size,) = SIZE_PREFIX.unpack_from(self._buffer, self._start)
            available -= 4
            if size < 0 or size > self.max_size:
                return True
        return size <= available

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        large = self._large
        if large is not None:
            filled = self._filled
            take = min(len(data), self._size - filled)
            if filled + take > len(large):
                large = self._grow(filled + take)
            large[filled : filled + take] = data[:take] if take < len(data) else data
            self._filled = filled + take
            if take == len(data):
                return
            data = memoryview(data)[take:]  # the next frame's first bytes
        buf = self._buffer
        start = self._start
        if start == len(buf):
            # Nothing pending: keep the transport's bytes as they are (frames are sliced out).
            self._buffer = data if data.__class__ is bytes else bytes(data)
            self._start = 0
            return
        if buf.__class__ is bytes:
            # A frame spans reads: from here it is assembled in a buffer of our own.
            with memoryview(buf) as view:
                pending = bytearray(view[start:])
            pending += data
            self._buffer = pending
        else:
            if start:
                # Cut consumed bytes once per receive, not once per frame.
                del buf[:start]  # type: ignore[union-attr]  # a bytearray: a bytes buffer took the branch above
            buf += data
        self._start = 0

    def unfilled(self) -> memoryview | None:
        """Where the large frame being assembled receives its next bytes; else None.

        At most what the buffer holds now (grown first if it is full): the caller drops this
        view before it calls again, so the buffer can grow in place.
        """
        large = self._large
        if large is None:
            return None
        filled = self._filled
        if filled == len(large) and filled < self._size:
            large = self._grow(filled + 1)
        return memoryview(large)[filled : self._size]

    def received_into(self, count: int) -> None:
        """``count`` bytes were written into :meth:`unfilled`'s view."""
        self._filled += count

    def next_frame(self) -> bytes | memoryview | _Sentinel:
        """Return the next whole frame's body, or ``NEED_DATA``.

        Raises :class:`FrameSizeError` as soon as a size prefix is out of range.
        """
        large = self._large
        if large is not None:
            size = self._size
            if self._filled < size:
                return NEED_DATA
            self._large = None
            self._filled = 0
            if large is not self._spare and size <= self.keep_spare:
                self._spare = large  # grown to exactly ``size``: the next large frame reuses it
            return memoryview(large)[:size].toreadonly()
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
            start += 4
            self._start = start
            if size >= self.large_frame:
                self._begin_large(size)
                return self.next_frame()
            self._expected = size
        size = self._expected
        if len(buf) - start < size:
            return NEED_DATA
        end = start + size
        if buf.__class__ is bytes:
            frame: bytes | memoryview = memoryview(buf)[start:end]
        else:
            # Copied out: a view would pin the bytearray against the next receive's resize.
            with memoryview(buf) as view:
                frame = bytes(view[start:end])
        self._expected = None
        if end == len(buf):
            self._buffer = b""  # drops the transport's bytes: only the frames' views hold them
            self._start = 0
        else:
            self._start = end
        return frame

    def _begin_large(self, size: int) -> None:
        buf = self._buffer
        start = self._start
        have = min(len(buf) - start, size)
        spare = self._spare
        if spare is not None and len(spare) >= size:
            large = spare  # already held: taking it costs nothing
        elif (spare is not None or self.trust_sizes) and size <= self.keep_spare:
            # This client has sent a large frame whole before (hence the spare): a frame up
            # to keep_spare is taken at once, as the spare itself would be — no growth steps
            # on the produce path. It replaces the spare when complete.
            large = bytearray(size)
            self._spare = None
        elif self.trust_sizes:
            large = bytearray(size)
        else:
            # Sized from what is here, not from the prefix: a declared size is only a claim.
            large = bytearray(min(size, max(have, FIRST_CHUNK)))
        with memoryview(buf) as view:
            large[:have] = view[start : start + have]
        self._start = start + have
        self._large = large
        self._size = size
        self._filled = have

    def _grow(self, at_least: int) -> bytearray:
        """Make the large frame's buffer hold ``at_least`` bytes: doubled at most, by at most
        MAX_GROWTH, never past the frame's size; in place unless a view of it is alive."""
        large = self._large
        assert large is not None
        current = len(large)
        target = min(self._size, max(at_least, min(2 * current, current + MAX_GROWTH)))
        try:
            while len(large) < target:
                large += _ZEROS[: target - len(large)]
        except BufferError:  # someone holds a view of it: copy what was received
            grown = bytearray(target)
            grown[: self._filled] = memoryview(large)[: self._filled]
            self._large = large = grown
        return large
