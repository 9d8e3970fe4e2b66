"""A file-backed partition found at start and not used yet: its log is opened on first use.

Theory of operation
-------------------
At start the manager lists each log directory and reads its two checkpoint files, nothing
else: every ``<topic>-<partition>`` directory becomes an :class:`UnopenedLog` holding what the
checkpoints say of it (recovery point, log start offset) and whether the directory had the
clean-shutdown marker. Its segments, indexes and transaction marker are not read.

The first use opens it: :meth:`LogManager.get_log` (produce, fetch, list offsets, the
coordinators' loads ...) replaces it by the :class:`~trikafka.log.file.FileLog`, which loads
its segments, and after a crash recovers those past the recovery point before anything is
served from it (see :mod:`trikafka.log.file`). Code that walks every log (retention, flushes,
checkpoints, the cleaner, DescribeLogDirs, the transaction coordinator's recovery) may hold an
:class:`UnopenedLog`; what it can answer without reading the partition it answers (its
checkpointed offsets, its config, "nothing to flush"), and any other attribute opens the log
and is read from it (``__getattr__``), so a walk never sees a wrong value:

* retention lists the directory and opens the log only when it holds two segments or more
  (the active segment is never deleted, so one segment has nothing to let go);
* the transaction coordinator's recovery asks for open transactions: a partition that never
  held a transactional batch (no marker file) has none, and stays unopened.

A stop writes an unopened log's checkpointed offsets back unchanged. One left unopened since
a start after a crash was never recovered, so its directory gets no clean-shutdown marker and
the next start recovers it (and the logs opened since, from their recovery points).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trikafka.log.transactions import TransactionTracker

if TYPE_CHECKING:
    from trikafka.log.config import LogConfig
    from trikafka.log.log import Log
    from trikafka.log.segment import Segment

__all__ = ["UnopenedLog", "segment_count"]

LOG_SUFFIX = ".log"
#: Left in a partition's directory once it holds a transactional batch (file.py's step 5).
TRANSACTIONAL_MARKER = "trikafka-transactional"


def segment_count(directory: str) -> int:
    """How many segments the partition directory holds (a listing, no file read)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return 0
    return sum(1 for n in names if n.endswith(LOG_SUFFIX) and len(n) == 24 and n[:20].isdigit())


class UnopenedLog:
    """A partition's log not opened yet; see the module docstring."""

    __slots__ = (
        "topic",
        "partition",
        "config",
        "recovery_point",
        "clean_shutdown",
        "_directory",
        "_log_start_offset",
        "_opener",
        "_log",
        "_closed",
    )

    def __init__(
        self,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        recovery_point: int,
        log_start_offset: int,
        clean_shutdown: bool,
        opener: Callable[[UnopenedLog], Log],
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.config = config
        self.recovery_point = recovery_point
        self.clean_shutdown = clean_shutdown
        self._directory = directory
        self._log_start_offset = log_start_offset
        self._opener = opener
        self._log: Log | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<UnopenedLog {self.name} recovery_point={self.recovery_point}>"

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def directory(self) -> Path:
        return Path(self._directory)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset if self._log is None else self._log.log_start_offset

    @property
    def closed(self) -> bool:
        return self._closed if self._log is None else self._log.closed

    def open(self) -> Log:
        """The partition's log, opened (and recovered after a crash) now if need be."""
        if self._log is None:
            if self._closed:
                raise ValueError(f"log {self.name} is closed")
            self._log = self._opener(self)
        return self._log

    def __getattr__(self, name: str) -> Any:
        # Only for attributes not defined above: everything else needs the segments.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.open(), name)

    # --- what a walk over every log asks, answered without reading the partition ------------

    def needs_flush(self, now_ms: float) -> bool:
        return False if self._log is None else self._log.needs_flush(now_ms)

    def apply_retention(self, now_ms: float) -> list[Segment]:
        if self._log is None and segment_count(self._directory) < 2:
            return []  # never the active segment: one segment has nothing to let go
        return self.open().apply_retention(now_ms)

    @property
    def transactions(self) -> TransactionTracker:
        if self._log is None and not os.path.exists(os.path.join(self._directory, TRANSACTIONAL_MARKER)):
            return TransactionTracker()  # never held a transactional batch: nothing open
        return self.open().transactions

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
        self._closed = True
