"""Checkpoint files and the log manager's periodic work.

Split from :mod:`trikafka.log.manager` by responsibility. The checkpoint files are Kafka's
(``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``: a version line, a
count line, then ``topic partition offset`` lines), replaced atomically and durably.
:class:`LogMaintenance` is the periodic work the manager mixes in — retention, flushes and
checkpoints — each step's disk work in a worker thread, and a failing disk reported as one
line per attempt, never a dead task.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from trikafka.log.config import INT64_MAX
from trikafka.log.log import Log
from trikafka.log.memory import BLOCKS
from trikafka.log.segment import Segment
from trikafka.log.storage import FileIO, KafkaStorageError, storage_error

if TYPE_CHECKING:
    from trikafka.clock import Clock

__all__ = [
    "LOG_START_OFFSET_CHECKPOINT",
    "LogMaintenance",
    "RECOVERY_POINT_CHECKPOINT",
    "TopicPartition",
    "delete_everything",
    "format_checkpoint",
    "read_checkpoint",
    "write_checkpoint",
]

logger = logging.getLogger("trikafka.log.manager")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
_CHECKPOINT_VERSION = 0

TopicPartition = tuple[str, int]
RECOVERY_POINTS = (RECOVERY_POINT_CHECKPOINT, "recovery_point")
#: From this many segments to fsync, one ``syncfs`` per log dir does it instead (a stop after
#: recovering 1,500 partitions took 4,500 fsyncs, over 20 s here).
BULK_SYNC_SEGMENTS = 256
START_OFFSETS = (LOG_START_OFFSET_CHECKPOINT, "log_start_offset")


def format_checkpoint(entries: Mapping[TopicPartition, int]) -> str:
    """Kafka's text format: version line, count line, then ``topic partition offset`` lines."""
    lines = [str(_CHECKPOINT_VERSION), str(len(entries))]
    lines += [
        f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(entries.items())
    ]
    return "\n".join(lines) + "\n"


def write_checkpoint(path: str | os.PathLike[str], entries: Mapping[TopicPartition, int]) -> None:
    """Replace the checkpoint at ``path`` atomically and durably (temp file, fsync, rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(format_checkpoint(entries))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read_checkpoint(path: str | os.PathLike[str]) -> dict[TopicPartition, int]:
    """Parse a checkpoint file; a missing or malformed one reads as empty (with a warning for
    the latter): the cost is recovering more than needed, never losing data."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != _CHECKPOINT_VERSION:
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        entries: dict[TopicPartition, int] = {}
        for line in lines[2:]:
            if not line.strip():
                continue
            topic, partition, offset = line.split()
            entries[(topic, int(partition))] = int(offset)
        if len(entries) != count:
            raise ValueError(f"{len(entries)} entries where {count} were announced")
    except (ValueError, IndexError) as exc:
        logger.warning("Ignoring malformed checkpoint file %s: %s", path, exc)
        return {}
    return entries


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def delete_everything(segments: Iterable[Segment], directories: Iterable[Path]) -> None:
    for segment in segments:
        segment.store.delete()
    for directory in directories:
        shutil.rmtree(directory, ignore_errors=True)


class LogMaintenance:
    """Mixed into :class:`~trikafka.log.manager.LogManager`; see the module docstring."""

    # Provided by LogManager.
    log_dirs: list[Path] | None
    clock: Clock
    _logs: dict[TopicPartition, Log]
    _dir_of: dict[TopicPartition, Path]
    _doomed_dirs: list[Path]
    _count: Callable[..., None]
    io: FileIO

    async def _slow(self, fn: Callable[[], object]) -> None:
        """Run disk work off the event loop (nothing slow to do for memory logs)."""
        if self.log_dirs is None:
            fn()
        else:
            await trio.to_thread.run_sync(fn)

    async def cleanup_logs(self) -> int:
        """Apply retention to every log now; return how many segments were deleted."""
        now = self.clock()
        doomed: list[Segment] = []
        for log in list(self._logs.values()):
            doomed += log.apply_retention(now)
        directories, self._doomed_dirs = self._doomed_dirs, []
        if doomed or directories:
            await self._slow(lambda: delete_everything(doomed, directories))
        if doomed:
            logger.info("Retention deleted %d segment(s)", len(doomed))
        BLOCKS.trim()  # memory logs: blocks let go of an interval ago and not reused since
        self._count(retention_checks=1, segments_deleted=len(doomed))
        return len(doomed)

    async def flush_logs(self, logs: Iterable[Log]) -> None:
        """Flush ``logs``: index writes here, every fsync in one worker thread.

        A log whose fsync failed stays dirty (retried next time); the first error is raised
        once every log has had its turn.
        """
        jobs = []
        unprepared: list[tuple[Log, KafkaStorageError]] = []
        for log in logs:
            if log.closed:
                continue
            try:
                jobs.append((log, log.prepare_flush()))
            except KafkaStorageError as exc:  # its index files could not be written
                unprepared.append((log, exc))
        if not jobs and not unprepared:
            return
        errors: list[OSError | None] = []  # one per job that ran, in order
        segments = sum(len(job.handles) for _, job in jobs)

        def run_all() -> None:
            if segments >= BULK_SYNC_SEGMENTS:
                try:
                    synced = self._sync_filesystems()
                except OSError as exc:  # nothing is known durable: every job failed
                    errors.extend(exc for _ in jobs)
                    return
                if synced:
                    for _, job in jobs:  # one syncfs per log dir made all of them durable
                        job.handles = []
                        errors.append(None)
                    return
            for _, job in jobs:
                try:
                    job.run()
                except OSError as exc:
                    errors.append(exc)
                else:
                    errors.append(None)

        try:
            if jobs:
                await self._slow(run_all)
        finally:
            for i, (log, job) in enumerate(jobs):
                log.complete_flush(job, ok=i < len(errors) and errors[i] is None)
        self._count(flushes=sum(error is None for error in errors))
        failed: list[tuple[Log, OSError | KafkaStorageError]] = [
            (log, error) for (log, _), error in zip(jobs, errors, strict=False) if error is not None
        ]
        failed += unprepared
        if failed:
            names = ", ".join(log.name for log, _ in failed[:5])
            first = failed[0][1]
            if isinstance(first, KafkaStorageError):
                raise KafkaStorageError(f"flush of {len(failed)} log(s) ({names}): {first}")
            raise storage_error(f"flush of {len(failed)} log(s) ({names})", first)

    def _sync_filesystems(self) -> bool:
        """``syncfs`` each log dir's filesystem (in the worker thread); False where the
        system has no syncfs, so the caller fsyncs file by file. An I/O error raises."""
        for log_dir in self.log_dirs or ():
            fd = os.open(log_dir, os.O_RDONLY | os.O_CLOEXEC)
            try:
                self.io.syncfs(fd)
            except OSError as exc:
                if exc.errno == errno.ENOSYS:
                    return False
                raise
            finally:
                os.close(fd)
        return True

    async def flush_log(self, log: Log) -> None:
        """Flush one log with its fsyncs in a worker thread."""
        await self.flush_logs([log])

    async def flush_dirty_logs(self) -> None:
        """Flush the logs whose flush.ms has passed or that rolled a segment."""
        now = self.clock()
        await self.flush_logs([log for log in self._logs.values() if log.needs_flush(now)])

    def _checkpoints(self, attribute: str) -> dict[Path, dict[TopicPartition, int]]:
        per_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs or ()}
        for key, log in self._logs.items():
            per_dir[self._dir_of[key]][key] = getattr(log, attribute)
        return per_dir

    def _checkpoint_writer(self, *which: tuple[str, str]) -> Callable[[], None]:
        """Snapshot checkpoint contents now (on the event loop); the returned function writes
        them (in a worker thread)."""
        contents = [(name, self._checkpoints(attribute)) for name, attribute in which]

        def write() -> None:
            for file_name, per_dir in contents:
                for log_dir, entries in per_dir.items():
                    write_checkpoint(log_dir / file_name, entries)

        return write

    async def _write_checkpoints(self, *which: tuple[str, str]) -> None:
        if self.log_dirs is not None:
            await self._slow(self._checkpoint_writer(*which))

    async def checkpoint_recovery_points(self) -> None:
        await self.flush_dirty_logs()
        await self._write_checkpoints(RECOVERY_POINTS)
        self._count(recovery_point_checkpoints=1)

    async def checkpoint_log_start_offsets(self) -> None:
        await self._write_checkpoints(START_OFFSETS)
        self._count(log_start_offset_checkpoints=1)

    async def _every(self, interval_ms: int, step: Callable[[], Awaitable[object]]) -> None:
        if interval_ms >= INT64_MAX:
            return  # Kafka's "never"
        while True:
            await trio.sleep(interval_ms / 1000)
            try:
                await step()
            except (OSError, KafkaStorageError) as exc:
                # A full or failing disk: one line, and try again next time; bugs still raise.
                logger.error("Log maintenance step %s failed: %s", step.__name__, exc)
