"""The system calls under the file backend, and what their failures become.

Theory of operation: a failing disk
-----------------------------------
A disk fills (ENOSPC), fails (EIO) or turns read-only (EROFS) under a running broker. Kafka's
answer to a client is KAFKA_STORAGE_ERROR, a retriable error: the producer backs off and
retries, and nothing it was told is written was lost. Ours is the same, per partition:

* An append that fails leaves the partition exactly as it was: the segment file is truncated
  back to its previous end (a partial ``pwrite`` leaves no half batch behind) and nothing in
  memory moved — log end offset, indexes, max timestamp, producer state — because the
  segment records a batch only after its bytes were written.
* The failure is a :class:`KafkaStorageError`, which the Produce handler answers like any
  per-partition error, and which is logged as one line, never a traceback.
* There is no "offline" state to leave: the next produce simply tries again, so appends
  resume the moment the disk takes writes again. (Kafka marks the whole log directory
  offline after an I/O error and needs a restart; with one broker and no replica to fail
  over to, retrying per request keeps the partition available when the cause was a full
  disk, and costs one failed ``pwrite`` per request while the disk is truly gone.)
* A failed fsync leaves its segments dirty, so the next flush retries them; the recovery
  point does not move past data that was not made durable.

:class:`FileIO` is the seam: the file backend makes every write-side system call through
one, so tests put a fault layer under a real log (``tests/resilience``) that raises ENOSPC,
EIO or EROFS on demand, including after a partial write.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os

from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["FileIO", "KafkaStorageError", "SYSTEM_IO", "storage_error"]


class KafkaStorageError(KafkaProtocolError):
    """The disk refused: answered as KAFKA_STORAGE_ERROR (retriable), logged as one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.kafka_storage_error)


def storage_error(what: str, exc: OSError) -> KafkaStorageError:
    """``exc`` as the error a client is answered with, saying what failed and why."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    where = f" ({exc.filename})" if exc.filename else ""
    return KafkaStorageError(f"{what} failed: {reason}{where}")


class FileIO:
    """The system calls the file backend writes through (``os`` itself by default)."""

    def open(self, path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
        return os.open(path, flags, mode)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, position: int) -> int:
        return os.pwrite(fd, data, position)

    def pwritev(self, fd: int, parts: list[memoryview], position: int) -> int:
        """``parts`` written at ``position`` in one call: how many bytes went out (maybe
        fewer than all, as with ``pwrite``)."""
        return os.pwritev(fd, parts, position)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def syncfs(self, fd: int) -> None:
        """Linux ``syncfs``: everything dirty on ``fd``'s filesystem, in one call (ENOSYS
        elsewhere). Thousands of per-file fsyncs after a recovery took longer than a stop may."""
        libc = _libc()
        if libc is None or not hasattr(libc, "syncfs"):
            raise OSError(errno.ENOSYS, "syncfs is not available")
        if libc.syncfs(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, loaded on the first ``syncfs``: finding it runs ``ldconfig -p`` in a
    child process, which a broker without a data directory never needs to pay at start."""
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    except OSError:  # pragma: no cover - no C library to load
        return None

SYSTEM_IO = FileIO()
