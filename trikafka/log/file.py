"""The file backend: Kafka's on-disk layout, and recovery after a crash.

Layout (byte-compatible with Kafka's, so its tools can read our files)::

    <log dir>/<topic>-<partition>/00000000000000000000.log        raw record batches
                                  00000000000000000000.index      relative offset, position
                                  00000000000000000000.timeindex  timestamp, relative offset

Theory of operation: recovery
-----------------------------
Appends are plain ``pwrite`` calls: the bytes reach the OS page cache, not the disk, until a
flush fsyncs them. The *recovery point* is the log end offset at the last completed flush; the
manager keeps it in ``recovery-point-offset-checkpoint``. Everything below it is known to be
on disk whole. So on open:

1. Files a previous run left half-done are removed: ``*.deleted`` (retention had detached the
   segment, the process died before the unlink), index files without a ``.log``.
2. Segments wholly below the recovery point are *loaded*: their persisted indexes are checked
   against the log and only the tail after the last index entry is scanned
   (:meth:`Segment.load`). A bad index file falls back to recovery of that segment.
3. The segment holding the recovery point and every later one are *recovered*: each batch is
   re-validated (sizes, magic, CRC-32C, rising offsets) and the indexes are rebuilt
   (:meth:`Segment.recover`). At the first torn or corrupt batch the segment is truncated and
   every later segment deleted: a log has no holes, and what follows a bad write cannot be
   trusted to be in order.
4. One warning line names the partition and how many bytes were cut.

After a clean shutdown (the manager's ``.kafka_cleanshutdown`` marker, as in Kafka) step 3 is
skipped: every segment was flushed and its indexes written by :meth:`Log.close`.

5. A partition that ever held a transactional batch has a ``trikafka-transactional`` marker
   file; for those the open and aborted transactions are rebuilt by scanning the batch
   headers (:meth:`Log.rebuild_transactions`), so the last stable offset and the aborted
   index are right from the first fetch.

The recovery point is not advanced by recovery: the kept bytes were read back from the page
cache, which says nothing about the disk. The next flush advances it.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from pathlib import Path
from typing import Any

from trikafka.clock import Clock
from trikafka.log.cleaner_files import complete_swaps
from trikafka.log.config import LogConfig
from trikafka.log.index import IndexCorruptError, OffsetIndex, TimeIndex
from trikafka.log.log import Log, wall_clock_ms
from trikafka.log.open_files import OpenFiles
from trikafka.log.segment import Segment, SegmentStore, SyncHandle
from trikafka.log.slices import FileSlice
from trikafka.log.storage import SYSTEM_IO, FileIO
from trikafka.log.unopened import LOG_SUFFIX, TRANSACTIONAL_MARKER

__all__ = [
    "FileLog",
    "FileStore",
    "partition_dir_name",
    "parse_partition_dir_name",
    "segment_file_name",
]

logger = logging.getLogger(__name__)

DELETED_SUFFIX = ".deleted"
_INDEX_SUFFIXES = (OffsetIndex.suffix, TimeIndex.suffix)
#: Parts per ``pwritev`` call: the system's limit on one call's buffers.
_IOV_MAX = max(os.sysconf("SC_IOV_MAX"), 16) if "SC_IOV_MAX" in getattr(os, "sysconf_names", {}) else 1024
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, ".cleaned", ".swap", ".tmp")


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    """Kafka's name: the base offset in 20 digits, zero-padded."""
    return f"{base_offset:020d}{suffix}"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` from ``<topic>-<partition>``, or None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class _FileSync:
    """Sync handle by path: the worker thread opens, fsyncs and closes each file itself, so a
    segment evicted from :class:`~trikafka.log.open_files.OpenFiles` or closed meanwhile
    pulls no descriptor from under it, and a flush of thousands of segments holds one
    descriptor at a time. (Linux fsync flushes the file, whichever descriptor asks.)"""

    __slots__ = ("_paths", "_io")

    def __init__(self, paths: list[Path], io: FileIO) -> None:
        self._paths = paths  # the .log, its index files, and the directory of a new segment
        self._io = io

    def sync(self) -> None:
        for path in self._paths:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:  # detached by retention meanwhile: nothing to keep
                continue
            try:
                self._io.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        pass


class FileStore:
    """A :class:`~trikafka.log.segment.SegmentStore` over ``<base>.log`` and its index files."""

    def __init__(
        self,
        directory: Path | str,
        base_offset: int,
        io: FileIO = SYSTEM_IO,
        open_files: OpenFiles | None = None,
        *,
        lazy: bool = False,
    ) -> None:
        self._directory: Path | str = directory  # a Path when first asked for (directory)
        self.base_offset = base_offset
        self.io = io
        self._paths: dict[str, Path] | None = None
        self._open_files = open_files
        self._fd = -1
        self._closed = False
        self._indexes_written = False
        #: Not on disk yet: the first segment of a new partition, whose directory and file
        #: appear with its first record (see FileLog).
        self._pending = lazy
        #: Created by this store (its name, and for a pending one its directory's, must be
        #: synced before it is durable).
        self._new = lazy or not self.paths[LOG_SUFFIX].exists()
        if lazy:
            self._size = 0
        elif self._new:
            self._size = 0
            self._descriptor()  # create the file now: the segment exists from here on
        else:
            self._size = os.stat(self.paths[LOG_SUFFIX]).st_size  # opened on first use

    @property
    def directory(self) -> Path:
        if not isinstance(self._directory, Path):
            self._directory = Path(self._directory)
        return self._directory

    @property
    def paths(self) -> dict[str, Path]:
        """Suffix (``.log``, ``.index``, ``.timeindex``) → the file's path (made on first use:
        a broker of many idle partitions builds none)."""
        if self._paths is None:
            self._paths = {
                suffix: self.directory / segment_file_name(self.base_offset, suffix)
                for suffix in (LOG_SUFFIX, *_INDEX_SUFFIXES)
            }
        return self._paths

    # Descriptors are opened lazily and may be closed for room by OpenFiles at any time
    # between two calls; every use asks for one afresh.

    def _open_fd(self) -> int:
        if self._pending:  # the partition's first record: its directory, then the file
            self.directory.mkdir(parents=True, exist_ok=True)
        self._fd = self.io.open(self.paths[LOG_SUFFIX], os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._pending = False
        return self._fd

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _descriptor(self) -> int:
        if self._closed:
            raise ValueError(f"segment file {self.paths[LOG_SUFFIX]} is closed")
        if self._open_files is not None:
            return self._open_files.fd(self)
        return self._fd if self._fd >= 0 else self._open_fd()

    @property
    def size(self) -> int:
        return self._size

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at the end; on failure nothing of it stays (see :mod:`.storage`)."""
        view = memoryview(data)
        position = self._size
        fd = self._descriptor()
        try:
            while view:
                written = self.io.pwrite(fd, view, position)
                view = view[written:]
                position += written
        except OSError:
            self._cut_partial_write(fd, position)
            raise
        self._size = position

    def append_parts(self, parts: list[bytearray | memoryview]) -> None:
        """Write ``parts`` at the end, in order, in as few ``pwritev`` calls as the kernel
        takes (a batch's patched header copy, then its records where the request holds
        them: no joined copy); on failure nothing of them stays, as with :meth:`append`."""
        position = self._size
        fd = self._descriptor()
        pending = [memoryview(part) for part in parts]
        first = 0  # pending[first:] is still to write
        try:
            while first < len(pending):
                written = self.io.pwritev(fd, pending[first : first + _IOV_MAX], position)
                position += written
                while first < len(pending) and written >= len(pending[first]):  # went out whole
                    written -= len(pending[first])
                    first += 1
                if written:
                    pending[first] = pending[first][written:]
        except OSError:
            self._cut_partial_write(fd, position)
            raise
        self._size = position

    def _cut_partial_write(self, fd: int, position: int) -> None:
        """A write failed at ``position``: cut off what of it reached the file, so the file
        ends where the log does."""
        if position != self._size:
            try:
                self.io.ftruncate(fd, self._size)
            except OSError:
                pass  # the next append overwrites from _size; recovery cuts a torn tail

    def read(self, position: int, size: int) -> list[bytes | memoryview]:
        return [self.pread(position, size)]

    @property
    def on_disk(self) -> bool:
        """Whether the segment's file exists (a new partition's appears with its first record)."""
        return not self._pending

    def slice(self, position: int, size: int) -> FileSlice:
        """A reference to ``[position, position + size)``, read only when sent (slices.py)."""
        size = max(min(size, self._size - position), 0)
        return FileSlice(os.dup(self._descriptor()), position, size)

    def pread(self, position: int, size: int) -> bytes:
        size = min(size, self._size - position)
        return os.pread(self._descriptor(), size, position) if size > 0 else b""

    def truncate(self, size: int) -> None:
        if self._pending and size == 0:
            return  # nothing on disk to cut
        self.io.ftruncate(self._descriptor(), size)
        self._size = size

    def load_indexes(self, base_offset: int) -> tuple[OffsetIndex, TimeIndex]:
        """Read the persisted indexes; :class:`IndexCorruptError` if missing or insane."""
        try:
            offset_data = self.paths[OffsetIndex.suffix].read_bytes()
            time_data = self.paths[TimeIndex.suffix].read_bytes()
        except FileNotFoundError as exc:
            raise IndexCorruptError(f"missing {exc.filename}") from None
        offsets = OffsetIndex.from_bytes(base_offset, offset_data, self._size)
        times = TimeIndex.from_bytes(base_offset, time_data)
        self._indexes_written = True
        return offsets, times

    def persist_indexes(self, offset_index: OffsetIndex, time_index: TimeIndex) -> None:
        if self._pending:
            return  # no records, so no index entries, and no directory to write them in
        for index in (offset_index, time_index):
            if self._indexes_written and index.dirty_from == len(index):
                continue
            fd = self.io.open(self.paths[index.suffix], os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                start = index.dirty_from
                self.io.pwrite(fd, index.to_bytes(start), start * index.entry_size)
                self.io.ftruncate(fd, len(index) * index.entry_size)
            finally:
                os.close(fd)
            index.dirty_from = len(index)
        self._indexes_written = True

    def sync_handle(self) -> SyncHandle | None:
        if self._closed or self._pending:
            return None
        paths = [self.paths[s] for s in (LOG_SUFFIX, *_INDEX_SUFFIXES)]
        if self._new:  # a new file's name is durable only once its directory is synced
            paths.append(self.directory)
            paths.append(self.directory.parent)  # and a new directory's, once its parent is
            self._new = False
        return _FileSync(paths, self.io)

    def close(self) -> None:
        self._closed = True
        if self._open_files is not None:
            self._open_files.forget(self)
        self._close_fd()

    def mark_deleted(self) -> None:
        self.close()
        for path in self.paths.values():
            try:
                path.rename(path.with_name(path.name + DELETED_SUFFIX))
            except FileNotFoundError:
                pass

    def delete(self) -> None:
        self.close()
        for path in self.paths.values():
            path.with_name(path.name + DELETED_SUFFIX).unlink(missing_ok=True)
            path.unlink(missing_ok=True)


class FileLog(Log):
    """A partition log in ``directory`` (``<log dir>/<topic>-<partition>``); see the module
    docstring for what opening it does."""

    _writes_parts = hasattr(os, "pwritev")  # a Produce request's records go to the file from where they are

    def __init__(
        self,
        directory: str | os.PathLike[str],
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        *,
        clock: Clock | None = None,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        io: FileIO = SYSTEM_IO,
        open_files: OpenFiles | None = None,
    ) -> None:
        self.io = io
        self.open_files = open_files
        # A str until a Path is asked for (directory): most partitions of a big broker never are.
        self._directory: Path | str = directory if isinstance(directory, Path) else os.fspath(directory)
        self.config = config or LogConfig()
        clock = clock or wall_clock_ms
        self.recovered_bytes_cut = 0
        # A partition without a directory is new: its directory and first segment are made
        # when its first record is appended (a broker of many idle partitions creates no
        # files for them; the topic store is what says the partition exists).
        self._lazy = not os.path.isdir(self._directory)
        segments = [] if self._lazy else self._load(topic, partition, clock, recovery_point, clean_shutdown)
        super().__init__(
            topic,
            partition,
            self.config,
            clock=clock,
            segments=segments,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
        )
        self._transactional = not self._lazy and (self.directory / TRANSACTIONAL_MARKER).exists()
        self._lazy = False  # later segments are created at once, as before
        if self._transactional:
            self.rebuild_transactions()

    def _note_transactional(self) -> None:
        if not self._transactional:
            self.directory.mkdir(parents=True, exist_ok=True)
            (self.directory / TRANSACTIONAL_MARKER).touch()
            self._transactional = True

    @classmethod
    def open(
        cls, log_dir: str | os.PathLike[str], topic: str, partition: int, config: LogConfig | None = None,
        **options: Any,
    ) -> FileLog:
        """Open (or create) ``topic``-``partition`` under the log directory ``log_dir``;
        ``options`` are the keyword arguments of :class:`FileLog` (``clock``, ``recovery_point``…)."""
        return cls(os.path.join(os.fspath(log_dir), partition_dir_name(topic, partition)), topic, partition, config,
                   **options)

    @property
    def directory(self) -> Path:
        """``<log dir>/<topic>-<partition>``."""
        if not isinstance(self._directory, Path):
            self._directory = Path(self._directory)
        return self._directory

    @property
    def on_disk(self) -> bool:
        """Whether the partition's directory exists (it appears with the first record)."""
        return not (len(self._segments) == 1 and not self._segments[0].store.on_disk)  # type: ignore[attr-defined]  # FileStores

    def _new_store(self, base_offset: int) -> SegmentStore:
        return FileStore(self._directory, base_offset, self.io, self.open_files, lazy=self._lazy)

    def _load(
        self,
        topic: str,
        partition: int,
        clock: Clock,
        recovery_point: int,
        clean_shutdown: bool,
    ) -> list[Segment]:
        bases = self._clean_directory()
        if not bases:
            return []
        now = clock()
        recover_from = (
            len(bases) if clean_shutdown else max(bisect_right(bases, recovery_point) - 1, 0)
        )
        segments: list[Segment] = []
        for i, base in enumerate(bases):
            store = FileStore(self.directory, base, self.io, self.open_files)
            segment: Segment | None = None
            if i < recover_from:
                try:
                    offsets, times = store.load_indexes(base)
                    segment = Segment(
                        base,
                        store,
                        index_interval_bytes=self.config.index_interval_bytes,
                        offset_index=offsets,
                        time_index=times,
                    )
                    segment.load()
                except IndexCorruptError as exc:
                    logger.info(
                        "Rebuilding indexes of %s-%d segment %d: %s", topic, partition, base, exc
                    )
                    segment = None
            recovered = segment is None
            if segment is None:
                segment = Segment(
                    base, store, index_interval_bytes=self.config.index_interval_bytes
                )
            segment.last_modified_ms = now
            segments.append(segment)
            if not recovered:
                continue
            min_offset = segments[-2].next_offset if len(segments) > 1 else base
            cut, why = segment.recover(min_offset)
            if why is not None:
                dropped = [FileStore(self.directory, b) for b in bases[i + 1 :]]
                cut += sum(s.size for s in dropped)
                for doomed in dropped:
                    doomed.delete()
                self.recovered_bytes_cut = cut
                logger.warning(
                    "Recovered partition %s-%d: cut %d bytes at offset %d (%s) in segment %s, "
                    "deleting %d later segment(s)",
                    topic,
                    partition,
                    cut,
                    segment.next_offset,
                    why,
                    segment_file_name(base),
                    len(dropped),
                )
                break
        return segments

    def _clean_directory(self) -> list[int]:
        """Remove leftovers of an interrupted run; return the segments' base offsets."""
        complete_swaps(self.directory)  # a committed log cleaning first (cleaner_files.py)
        bases: list[int] = []
        names = {p.name for p in self.directory.iterdir()}
        for name in names:
            stem, dot, suffix = name.partition(".")
            if name.endswith(_LEFTOVER_SUFFIXES):
                (self.directory / name).unlink(missing_ok=True)
            elif dot and f".{suffix}" == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
                bases.append(int(stem))
            elif dot and f".{suffix}" in _INDEX_SUFFIXES and f"{stem}{LOG_SUFFIX}" not in names:
                (self.directory / name).unlink(missing_ok=True)
        return sorted(bases)
