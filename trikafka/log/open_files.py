"""A bound on the segment files a broker holds open.

Why: a descriptor per segment is a descriptor per partition at least, and the process's
``RLIMIT_NOFILE`` (1,024 by default on many systems) is shared with every client socket. A
CreateTopics of 1,500 partitions used to die on EMFILE and take the broker down with it.
Kafka leans on a huge ulimit; we bound the number instead, so the limit only costs reopening.

:class:`OpenFiles` is a least-recently-used set of open segment files (``.log``; index files
are opened only for the moment they are written). A store asks for its descriptor on each
use; the one asked for goes to the back, and when the set is full the front one (an idle
partition's, or an old segment's) is closed. Appends and fetches keep a busy partition's
active segment at the back, so it stays open; a cold one reopens on its next use, which is a
single ``open`` call. Opening is lazy: a broker starting with thousands of partitions opens
only the segments recovery or a client touches.

If ``open`` still fails with EMFILE/ENFILE (sockets took the rest), half the set is closed
and the open tried once more before the error goes to the caller, where it becomes a
KAFKA_STORAGE_ERROR for that partition only.
"""

from __future__ import annotations

import errno
import resource
from collections import OrderedDict
from typing import Protocol

__all__ = ["OpenFiles", "default_capacity"]

_EXHAUSTED = {errno.EMFILE, errno.ENFILE}
MIN_CAPACITY = 16


class _Closable(Protocol):
    def _open_fd(self) -> int: ...

    def _close_fd(self) -> None: ...


def default_capacity() -> int:
    """Half the soft ``RLIMIT_NOFILE`` (the other half is for sockets and the rest)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 16
    return max(MIN_CAPACITY, soft // 2)


class OpenFiles:
    """At most ``capacity`` segment files open at once, least recently used closed first."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = max(1, capacity if capacity is not None else default_capacity())
        self._open: OrderedDict[_Closable, int] = OrderedDict()
        self.opened = 0  # opens so far (tests and statistics)
        self.closed_for_room = 0  # LRU evictions so far

    def __len__(self) -> int:
        return len(self._open)

    def fd(self, store: _Closable) -> int:
        """``store``'s descriptor, opened (and something else closed) if need be."""
        fd = self._open.get(store)
        if fd is not None:
            self._open.move_to_end(store)
            return fd
        while len(self._open) >= self.capacity:
            self._evict_one()
        try:
            fd = store._open_fd()
        except OSError as exc:
            if exc.errno not in _EXHAUSTED or not self._open:
                raise
            for _ in range((len(self._open) + 1) // 2):
                self._evict_one()
            fd = store._open_fd()
        self.opened += 1
        self._open[store] = fd
        return fd

    def forget(self, store: _Closable) -> None:
        """``store`` closed its descriptor itself (closed or deleted)."""
        self._open.pop(store, None)

    def _evict_one(self) -> None:
        victim, _ = self._open.popitem(last=False)
        victim._close_fd()
        self.closed_for_room += 1
