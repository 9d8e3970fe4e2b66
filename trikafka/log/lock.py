"""The ``.lock`` file of a log directory: one broker per directory.

Why: two brokers on the same files append to the same segments at offsets each computes on
its own, and each one's recovery "repairs" the other's writes — silent data loss. Kafka holds
an exclusive lock on ``<log dir>/.lock`` for the broker's lifetime and refuses to start
without it; so do we. ``flock`` locks belong to the open file description, so the lock goes
away with the process however it ends (``kill -9`` included) and a stale file never blocks a
restart; two brokers in one process conflict too, as two processes do.

The holder writes its pid into the file, so the refusal can say who holds the directory.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_FILE", "LogDirLock", "LogDirLockedError"]

LOCK_FILE = ".lock"


class LogDirLockedError(OSError):
    """Another broker (another process, or this one) holds the directory's lock."""


class LogDirLock:
    """An exclusive ``flock`` on ``<directory>/.lock``, held until :meth:`release`."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / LOCK_FILE
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise LogDirLockedError(
                f"log dir {self.directory} is in use by another broker "
                f"({'pid ' + holder if holder else 'pid unknown'} holds {self.path}); "
                "stop it or use another log dir"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        """Give the directory up (closing the descriptor drops the lock)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _read_pid(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""
