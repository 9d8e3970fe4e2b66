"""File ranges instead of bytes: what a Fetch answer from a file log can hold.

Why: a Fetch answer used to be the bytes ``pread`` returned — up to ``fetch.max.bytes`` (50
MiB) per connection, held until a slow reader had taken all of it. Twenty slow readers on a
big topic drove the broker to a GiB of RSS. Kafka answers from a *reference* to the log
file (``FileRecords.slice``) and lets the kernel copy it to the socket (``sendfile``), so a
slow reader costs what its socket buffer holds.

A :class:`FileSlice` is that reference: a duplicated descriptor of the segment file, a
position and a size. Holding one allocates nothing; the bytes are read when they are sent,
either by the kernel (:meth:`FileSlice.sendfile`) or in bounded blocks
(:meth:`FileSlice.iter_blocks`). The descriptor is the slice's own, so the segment file may
be closed for room (:mod:`trikafka.log.open_files`) or deleted by retention meanwhile: POSIX
keeps an unlinked file's data for as long as a descriptor is open, as Kafka relies on too.
One descriptor per slice in flight, and a connection has one response in flight at a time.

``Log.read(..., file_slices=True)`` returns them (file logs; memory logs already answer with
views of the stored batches). Writing them to a socket is the connection writer's part.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["BLOCK_SIZE", "FileSlice", "materialize"]

BLOCK_SIZE = 256 * 1024  # a bounded read: what one send can take anyway


class FileSlice:
    """``size`` bytes of a file from ``position``, read only when sent."""

    __slots__ = ("_fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self._fd = fd  # owned: closed by close() (or when the slice is collected)
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"<FileSlice fd={self._fd} [{self.position}, {self.position + self.size})>"

    def read(self, offset: int = 0, size: int | None = None) -> bytes:
        """Bytes ``[offset, offset + size)`` of the slice (a copy: use sparingly)."""
        size = self.size - offset if size is None else min(size, self.size - offset)
        return os.pread(self._fd, size, self.position + offset) if size > 0 else b""

    def iter_blocks(self, block_size: int = BLOCK_SIZE) -> Iterator[bytes]:
        """The slice in blocks of at most ``block_size`` bytes, each read when asked for."""
        for offset in range(0, self.size, block_size):
            yield self.read(offset, block_size)

    def sendfile(self, out_fd: int, offset: int, count: int) -> int:
        """``os.sendfile`` of up to ``count`` bytes from ``offset``; returns bytes sent."""
        count = min(count, self.size - offset)
        if count <= 0:
            return 0
        return os.sendfile(out_fd, self._fd, self.position + offset, count)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()


def materialize(chunk: bytes | memoryview | FileSlice) -> bytes | memoryview:
    """A chunk as bytes (reading a :class:`FileSlice` whole): for code that needs them."""
    return chunk.read() if isinstance(chunk, FileSlice) else chunk
