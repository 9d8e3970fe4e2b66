"""The LogManager: every partition's log, and the periodic work that keeps them healthy.

Theory of operation
-------------------
The manager owns the logs of one broker. With ``log_dirs=None`` they are
:class:`~trikafka.log.memory.MemoryLog` s; otherwise :class:`~trikafka.log.file.FileLog` s in
``<log dir>/<topic>-<partition>``, a new partition going to the directory holding the fewest.

On construction it takes each directory's ``.lock`` (:mod:`trikafka.log.lock`: a second broker
on the same directory refuses to start) and registers what the directories hold (Kafka's
LogManager.loadLogs, minus the reading): it reads the two checkpoint files of each directory,
lists its partition directories, finishes the deletion of ``*-delete`` directories a previous
run left, and removes the clean-shutdown marker, so that a crash from now on is noticed at the
next start. Each partition is an :class:`~trikafka.log.unopened.UnopenedLog` holding its
recovery point and log start offset until its first use opens it (:meth:`get_log`; see
:mod:`trikafka.log.unopened`, and :mod:`trikafka.log.file` for what opening and recovery do),
so a start reads no segment and no index. The ``progress`` reporter hears after each
partition how many of the directory's partitions are registered (by default, a log line at
every tenth once there are ``PROGRESS_MIN_SEGMENTS``).

:meth:`LogManager.run` is the manager's lifetime. Its tasks wake on trio's clock:

* retention every ``log.retention.check.interval.ms`` (5 min): each log detaches what
  retention.ms / retention.bytes / the log start offset let go; the files are unlinked in a
  worker thread;
* flush every ``log.flush.scheduler.interval.ms`` (never, by default): logs whose flush.ms has
  passed are fsynced in a worker thread;
* the recovery-point checkpoint every ``log.flush.offset.checkpoint.interval.ms`` (1 min):
  logs that rolled a segment are flushed first (Kafka flushes a segment when it rolls), so the
  recovery point, and with it the next start's recovery work, keeps up; and the log start
  offset checkpoint every ``log.flush.start.offset.checkpoint.interval.ms`` (1 min).

Cancelling ``run`` is the way to stop: under a shielded cancel scope it flushes every log,
writes both checkpoints, closes the logs and leaves the clean-shutdown marker.

The logs' own methods are synchronous; only fsync, unlinking and checkpoint writes go to worker
threads, and those only touch state the event loop has let go of (duplicated descriptors,
detached segments, a prepared file body), so nothing needs a lock.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import shutil
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard

import attrs
import trio
from trio_util import AsyncValue

from trikafka.clock import Clock
from trikafka.log.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    RECOVERY_POINTS,
    START_OFFSETS,
    LogMaintenance,
    TopicPartition,
    delete_everything,
    read_checkpoint,
    write_checkpoint,
)
from trikafka.log.config import INT64_MAX, LogConfig
from trikafka.log.lock import LogDirLock
from trikafka.log.log import Log, wall_clock_ms
from trikafka.log.memory import BLOCKS, MemoryLog
from trikafka.log.open_files import OpenFiles
from trikafka.log.storage import SYSTEM_IO, FileIO, KafkaStorageError, storage_error
from trikafka.log.unopened import UnopenedLog

if TYPE_CHECKING:
    from trikafka.log.file import FileLog

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "LoadProgress",
    "PROGRESS_MIN_SEGMENTS",
    "LOG_START_OFFSET_CHECKPOINT",
    "LogManager",
    "LogManagerStatistics",
    "RECOVERY_POINT_CHECKPOINT",
    "is_file_log",
    "read_checkpoint",
    "write_checkpoint",
]

logger = logging.getLogger(__name__)


def is_file_log(log: Log) -> TypeGuard[FileLog]:
    """Whether ``log`` is a FileLog, without importing the file log when none was opened."""
    file = sys.modules.get("trikafka.log.file")
    return file is not None and isinstance(log, file.FileLog)


CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"

#: Below this many partitions in a directory, loading it is quick and says nothing while it runs.
PROGRESS_MIN_SEGMENTS = 500

#: ``(partitions loaded, partitions in the directory, the directory)``, after each partition.
LoadProgress = Callable[[int, int, str], None]


class _ProgressLines:
    """The default reporter: a log line at every tenth of the partitions, so a slow start on a
    big data directory is visible in a log file (a terminal gets a bar: ``progress=``)."""

    def __init__(self) -> None:
        self._next_tenth = 1

    def __call__(self, done: int, total: int, log_dir: str) -> None:
        if total < PROGRESS_MIN_SEGMENTS:
            return
        if done * 10 >= self._next_tenth * total:
            logger.info("loading logs in %s: %d of %d partitions (%d%%)", log_dir, done, total, done * 100 // total)
            self._next_tenth = done * 10 // total + 1


# --- the manager ---------------------------------------------------------------------------


@attrs.frozen
class LogManagerStatistics:
    """A snapshot of the manager's work so far, for metrics and for tests to wait on."""

    logs: int = 0
    #: Of ``logs``, those found at start and not used since (nothing of them read yet).
    unopened_logs: int = 0
    #: Logs found at start and opened (and recovered, after a crash) at their first use.
    logs_opened: int = 0
    retention_checks: int = 0
    segments_deleted: int = 0
    flushes: int = 0
    recovery_point_checkpoints: int = 0
    log_start_offset_checkpoints: int = 0


def _creation_error(what: str, exc: OSError) -> KafkaStorageError:
    """A storage error that names the limit when the process ran out of descriptors."""
    error = storage_error(what, exc)
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = "the system's open file table" if exc.errno == errno.ENFILE else f"RLIMIT_NOFILE {soft}"
        error = KafkaStorageError(f"{error}: the broker is at {limit}")
    return error


class _LogLoading:
    """Mixed into :class:`LogManager`: registering what the directories hold, and opening a
    partition at its first use (see the module docstring)."""

    # Provided by LogManager.
    default_config: LogConfig
    clock: Clock
    io: FileIO
    open_files: OpenFiles
    _logs: dict[TopicPartition, Log]
    _dir_of: dict[TopicPartition, Path]
    _unopened: int
    _placed: Callable[[TopicPartition, Path | None], None]
    _count: Callable[..., None]

    def _load_dir(self, log_dir: Path, progress: LoadProgress) -> None:
        from trikafka.log.file import parse_partition_dir_name  # only with a data dir

        log_dir.mkdir(parents=True, exist_ok=True)
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        partitions: list[tuple[str, TopicPartition]] = []
        with os.scandir(log_dir) as entries:  # d_type: no stat per entry
            for entry in sorted(entries, key=lambda e: e.name):
                if not entry.is_dir():
                    continue
                if entry.name.endswith(DELETE_DIR_SUFFIX):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    continue
                parsed = parse_partition_dir_name(entry.name)
                if parsed is not None:
                    partitions.append((entry.path, parsed))
        for done, (path, parsed) in enumerate(partitions, 1):
            if parsed in self._logs:
                raise RuntimeError(
                    f"partition {os.path.basename(path)} is in both {self._dir_of[parsed]} and {log_dir}"
                )
            self._logs[parsed] = UnopenedLog(  # type: ignore[assignment]  # a stand-in Log, opened on first use
                path,
                *parsed,
                self.default_config,
                recovery_point=recovery_points.get(parsed, 0),
                log_start_offset=start_offsets.get(parsed, 0),
                clean_shutdown=clean,
                opener=self._open_log,
            )
            self._unopened += 1
            self._placed(parsed, log_dir)
            progress(done, len(partitions), str(log_dir))
        # From here on a crash must be noticed at the next start.
        marker.unlink(missing_ok=True)

    def _open_log(self, unopened: UnopenedLog) -> Log:
        """Open a partition found at start, at its first use (UnopenedLog.open)."""
        from trikafka.log.file import FileLog  # only with a data dir

        key = (unopened.topic, unopened.partition)
        try:
            log = FileLog(
                unopened.directory,
                *key,
                unopened.config,
                clock=self.clock,
                recovery_point=unopened.recovery_point,
                log_start_offset=unopened.log_start_offset,
                clean_shutdown=unopened.clean_shutdown,
                io=self.io,
                open_files=self.open_files,
            )
        except OSError as exc:
            raise _creation_error(f"opening {unopened.name} in {unopened.directory.parent}", exc) from None
        if self._logs.get(key) is unopened:
            self._logs[key] = log
            self._unopened -= 1
        self._count(logs_opened=1)
        return log


class LogManager(_LogLoading, LogMaintenance):
    """All partition logs of a broker; see the module docstring."""

    def __init__(
        self,
        log_dirs: Sequence[str | os.PathLike[str]] | None = None,
        default_config: LogConfig | None = None,
        clock: Clock | None = None,
        *,
        retention_check_interval_ms: int = 300_000,
        flush_scheduler_interval_ms: int = INT64_MAX,
        flush_offset_checkpoint_interval_ms: int = 60_000,
        flush_start_offset_checkpoint_interval_ms: int = 60_000,
        io: FileIO = SYSTEM_IO,
        open_files_capacity: int | None = None,
        progress: LoadProgress | None = None,
    ) -> None:
        self.io = io  # the file logs' system calls (tests put a fault layer here)
        #: The bound on open segment files, shared by every file log (see open_files.py).
        self.open_files = OpenFiles(open_files_capacity)
        self.log_dirs = [Path(d) for d in log_dirs] if log_dirs else None
        self.default_config = default_config or LogConfig()
        self.clock = clock or wall_clock_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_scheduler_interval_ms = flush_scheduler_interval_ms
        self.flush_offset_checkpoint_interval_ms = flush_offset_checkpoint_interval_ms
        self.flush_start_offset_checkpoint_interval_ms = flush_start_offset_checkpoint_interval_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._dir_counts: dict[Path, int] = {d: 0 for d in self.log_dirs or ()}
        self._partitions_of: dict[str, set[int]] = {}  # topic → its partitions with a log
        self._unopened = 0  # UnopenedLogs in _logs
        self._topic_configs: dict[str, LogConfig] = {}
        self._doomed_dirs: list[Path] = []
        self._unrecovered_dirs: set[Path] = set()
        self._closed = False
        #: The latest :class:`LogManagerStatistics`, replaced (never mutated) as work
        #: completes, so a test can ``await statistics_value.wait_value(predicate)``.
        self.statistics_value: AsyncValue[LogManagerStatistics] = AsyncValue(LogManagerStatistics())
        # Every directory's .lock first: nothing is read or repaired under another broker.
        self._locks: list[LogDirLock] = []
        try:
            for log_dir in self.log_dirs or ():
                self._locks.append(LogDirLock(log_dir))
            for log_dir in self.log_dirs or ():
                self._load_dir(log_dir, progress or _ProgressLines())
        except BaseException:
            self._release_locks()
            raise

    def __repr__(self) -> str:
        where = ",".join(map(str, self.log_dirs)) if self.log_dirs else "memory"
        return f"<LogManager {where} logs={len(self._logs)}>"

    # --- the logs --------------------------------------------------------------------------

    @property
    def logs(self) -> Mapping[TopicPartition, Log]:
        """A snapshot of the logs by ``(topic, partition)``: those not used since the start are
        :class:`~trikafka.log.unopened.UnopenedLog` s, opened by what reads their records."""
        return self._logs.copy()

    def get_log(self, topic: str, partition: int) -> Log | None:
        """The partition's log, opened now (and recovered after a crash) if this is its first use."""
        log = self._logs.get((topic, partition))
        if type(log) is UnopenedLog:
            return log.open()
        return log

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, created empty if need be. A given ``config`` becomes the
        topic's (for every partition of it: Kafka's configs are per topic)."""
        if self._closed:
            raise RuntimeError("the log manager is closed")
        if config is not None and self._topic_configs.get(topic) != config:
            self.update_topic_config(topic, config)
        key = (topic, partition)
        log = self._logs.get(key)
        if log is not None:
            return log.open() if type(log) is UnopenedLog else log
        config = self._topic_configs.get(topic, self.default_config)
        if self.log_dirs is None:
            log = MemoryLog(topic, partition, config, clock=self.clock)
        else:
            counts = self._dir_counts
            log_dir = min(self.log_dirs, key=lambda d: counts[d])
            from trikafka.log.file import FileLog  # only with a data dir

            try:
                log = FileLog.open(
                    log_dir, topic, partition, config,
                    clock=self.clock, io=self.io, open_files=self.open_files,
                )
            except OSError as exc:
                raise _creation_error(f"creating {topic}-{partition} in {log_dir}", exc) from None
        self._logs[key] = log
        self._placed(key, log_dir if self.log_dirs is not None else None)
        return log

    def _placed(self, key: TopicPartition, log_dir: Path | None) -> None:
        self._partitions_of.setdefault(key[0], set()).add(key[1])
        if log_dir is not None:
            self._dir_of[key] = log_dir
            self._dir_counts[log_dir] += 1

    def create_logs(self, topic: str, partitions: Iterable[int], config: LogConfig | None = None) -> None:
        """Create the partitions' logs, all or none: CreateTopics and CreatePartitions fail
        whole (a :class:`KafkaStorageError` naming the limit hit) and leave nothing behind."""
        created: list[int] = []
        if config is not None and self._topic_configs.get(topic) != config:
            self.update_topic_config(topic, config)
        try:
            for partition in partitions:
                if (topic, partition) in self._logs:
                    continue  # a log found at start stays unopened until its first use
                self.get_or_create_log(topic, partition)
                created.append(partition)
        except KafkaStorageError as exc:
            logger.error("Cannot create partitions of %s: %s", topic, exc)
            for partition in created:
                self.delete_log(topic, partition)
            raise

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """Apply ``config`` to the topic's logs now and to its partitions created later."""
        self._topic_configs[topic] = config
        for partition in self._partitions_of.get(topic, ()):
            self._logs[(topic, partition)].config = config

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close and remove a partition's log; False if there was none.

        Files are renamed at once (``<topic>-<partition>.<id>-delete``, as Kafka does) and
        deleted later by :meth:`cleanup_logs` in a worker thread, or at the next start.
        """
        key = (topic, partition)
        log = self._logs.pop(key, None)
        if log is None:
            return False
        if type(log) is UnopenedLog:
            self._unopened -= 1
        log.close()
        partitions = self._partitions_of.get(topic)
        if partitions is not None:
            partitions.discard(partition)
            if not partitions:
                del self._partitions_of[topic]
        log_dir = self._dir_of.pop(key, None)
        if log_dir is not None:
            self._dir_counts[log_dir] -= 1
        if log_dir is not None and (type(log) is UnopenedLog or is_file_log(log)) and log.directory.is_dir():
            from trikafka.log.file import partition_dir_name

            doomed = log.directory.with_name(
                f"{partition_dir_name(topic, partition)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
            )
            log.directory.rename(doomed)
            self._doomed_dirs.append(doomed)
        return True

    def statistics(self) -> LogManagerStatistics:
        return attrs.evolve(self.statistics_value.value, logs=len(self._logs), unopened_logs=self._unopened)

    def _opened_logs(self) -> list[Log]:
        return [log for log in self._logs.values() if type(log) is not UnopenedLog]

    def _count(self, **increments: int) -> None:
        current = self.statistics_value.value
        self.statistics_value.value = attrs.evolve(
            current, **{k: getattr(current, k) + v for k, v in increments.items()}
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run periodic retention, flush and checkpoints until cancelled; then shut down."""
        try:
            with BLOCKS.in_use():
                async with trio.open_nursery() as nursery:
                    for interval, step in (
                        (self.retention_check_interval_ms, self.cleanup_logs),
                        (self.flush_scheduler_interval_ms, self.flush_dirty_logs),
                        (self.flush_offset_checkpoint_interval_ms, self.checkpoint_recovery_points),
                        (
                            self.flush_start_offset_checkpoint_interval_ms,
                            self.checkpoint_log_start_offsets,
                        ),
                    ):
                        nursery.start_soon(
                            self._every, interval, step, name=f"kafka-log-{step.__name__}"
                        )
                    task_status.started()
        finally:
            with trio.CancelScope(shield=True):
                await self.aclose()

    async def aclose(self) -> None:
        """Flush every log, write both checkpoints, close the logs, mark a clean shutdown."""
        if self._closed:
            return
        clean = True
        try:
            await self.flush_logs(self._opened_logs())
            await self._write_checkpoints(RECOVERY_POINTS, START_OFFSETS)
        except (OSError, KafkaStorageError) as exc:
            # A failing disk must not turn a stop into a crash: close what we can, leave no
            # clean-shutdown marker, and the next start recovers what was not made durable.
            logger.error("Stopping with a failing disk (the next start recovers): %s", exc)
            clean = False
        directories = self._finish_close()
        if directories:
            await self._slow(lambda: delete_everything((), directories))
        self._mark_clean(clean)

    def close(self) -> None:
        """:meth:`aclose` for code outside trio (scripts, synchronous tests)."""
        if self._closed:
            return
        for log in self._opened_logs():
            log.flush()
        if self.log_dirs is not None:
            self._checkpoint_writer(RECOVERY_POINTS, START_OFFSETS)()
        delete_everything((), self._finish_close())
        self._mark_clean()

    def _finish_close(self) -> list[Path]:
        # A log left unopened since a start after a crash was never recovered: its directory
        # gets no clean-shutdown marker, so the next start recovers it.
        self._unrecovered_dirs = {
            self._dir_of[key]
            for key, log in self._logs.items()
            if type(log) is UnopenedLog and not log.clean_shutdown
        }
        for log in self._logs.values():
            try:
                log.close()
            except KafkaStorageError as exc:
                logger.error("Closing %s: %s", log.name, exc)
        self._closed = True
        directories, self._doomed_dirs = self._doomed_dirs, []
        return directories

    def _mark_clean(self, clean: bool = True) -> None:
        try:
            for log_dir in self.log_dirs or ():
                if clean and log_dir not in self._unrecovered_dirs:
                    (log_dir / CLEAN_SHUTDOWN_FILE).touch()
        except OSError as exc:
            logger.error("Cannot mark a clean shutdown (the next start recovers): %s", exc)
        finally:
            self._release_locks()

    def _release_locks(self) -> None:
        for lock in self._locks:
            lock.release()
        self._locks = []
