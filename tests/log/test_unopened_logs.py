"""Logs opened on first use: a start reads the checkpoints and lists the log directory, nothing
of a partition; the first use opens it (recovering it past its recovery point after a crash);
retention, checkpoints and a stop work over logs that were never opened."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from trikafka.log import FileLog, LogConfig, LogManager
from trikafka.log.manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
)
from trikafka.log.unopened import UnopenedLog

from .log_conformance import batch, decode

HOUR_MS = 3_600_000
_touched: list[tuple[str, str]] | None = None


def _audit(event: str, args: tuple) -> None:
    if _touched is not None and event in ("open", "os.listdir", "os.scandir") and args and args[0] is not None:
        _touched.append((event, str(args[0])))


sys.addaudithook(_audit)  # for the life of the test process; records only inside touched()


@contextmanager
def touched(root: Path) -> Iterator[list[tuple[str, str]]]:
    """Every file opened and directory listed under ``root`` meanwhile (Python's audit events:
    ``open`` covers ``open`` and ``os.open``)."""
    global _touched
    seen: list[tuple[str, str]] = []
    _touched = seen
    try:
        yield seen
    finally:
        _touched = None
    seen[:] = [(event, path) for event, path in seen if path.startswith(str(root))]


def _fill(log_dir: Path, partitions: int = 3, records: int = 12) -> dict[int, list[bytes]]:
    manager = LogManager([log_dir], LogConfig(segment_bytes=300))
    values = {}
    for p in range(partitions):
        log = manager.get_or_create_log("t", p)
        for i in range(records + p):
            log.append(batch(1, tag=b"p%d-%d-" % (p, i)), leader_epoch=0)
        assert len(log.segments) > 2
        values[p] = _read_all(log)
        assert len(values[p]) == records + p
    manager.close()
    return values


def _read_all(log) -> list[bytes]:  # noqa: ANN001
    values: list[bytes] = []
    while len(values) < log.log_end_offset:
        values += [r.value for r in decode(log.read(len(values), 1 << 20).records)]
    return values


def test_a_clean_restart_reads_the_checkpoints_and_nothing_of_a_partition_until_its_first_use(tmp_path):
    log_dir = tmp_path / "data"
    values = _fill(log_dir)
    with touched(log_dir) as seen:
        manager = LogManager([log_dir], LogConfig(segment_bytes=300))
    assert sorted(Path(path).name for _, path in seen) == sorted(
        [".lock", "data", LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT]
    ), "a start reads the checkpoints and lists the directory, nothing inside a partition"
    stats = manager.statistics()
    assert (stats.logs, stats.unopened_logs, stats.logs_opened) == (3, 3, 0)
    assert all(type(log) is UnopenedLog for log in manager.logs.values())
    # What a walk over every log asks is answered without opening: offsets for the checkpoints,
    # open transactions (none: no marker), flush (nothing to do), retention (none configured).
    assert manager.logs[("t", 2)].recovery_point == 14
    assert manager.logs[("t", 2)].transactions.ongoing == {}
    trio.run(manager.checkpoint_recovery_points)
    assert manager.statistics().unopened_logs == 3
    assert read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 12, ("t", 1): 13, ("t", 2): 14}

    with touched(log_dir) as seen:
        log = manager.get_log("t", 1)
    assert isinstance(log, FileLog) and manager.get_log("t", 1) is log
    assert {Path(path).relative_to(log_dir).parts[0] for _, path in seen} == {"t-1"}, "only the one used is read"
    assert _read_all(log) == values[1]
    stats = manager.statistics()
    assert (stats.unopened_logs, stats.logs_opened) == (2, 1)
    manager.close()
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()

    again = LogManager([log_dir], LogConfig(segment_bytes=300))  # reads exactly what was there
    assert {p: _read_all(again.get_log("t", p)) for p in range(3)} == values
    again.close()


def test_after_a_crash_each_partition_is_recovered_past_its_checkpoint_at_first_use(tmp_path, caplog):
    log_dir = tmp_path / "data"
    values = _fill(log_dir)
    (log_dir / CLEAN_SHUTDOWN_FILE).unlink()  # as if the process had died
    for p in (0, 1):
        active = max((log_dir / f"t-{p}").glob("*.log"))
        with open(active, "ab") as f:
            f.write(b"\x00" * 30)  # a torn write past the recovery point
    with caplog.at_level(logging.WARNING, logger="trikafka.log"):
        manager = LogManager([log_dir], LogConfig(segment_bytes=300))
        assert not caplog.records, "nothing is recovered before it is used"
        log = manager.get_log("t", 0)
    assert log.recovered_bytes_cut == 30 and _read_all(log) == values[0]
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["Recovered partition t-0"]
    manager.close()
    # t-1 was never opened, so never recovered: its directory gets no clean-shutdown marker.
    assert not (log_dir / CLEAN_SHUTDOWN_FILE).exists()

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="trikafka.log"):
        again = LogManager([log_dir], LogConfig(segment_bytes=300))
        recovered = again.get_log("t", 1)
        assert again.get_log("t", 0).recovered_bytes_cut == 0, "flushed whole at the last stop"
    assert recovered.recovered_bytes_cut == 30 and _read_all(recovered) == values[1]
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["Recovered partition t-1"]
    assert _read_all(again.get_log("t", 2)) == values[2]
    again.close()
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()


async def test_retention_runs_over_logs_not_opened_yet(tmp_path):
    log_dir = tmp_path / "data"
    now = [1_000.0]
    config = LogConfig(segment_bytes=300, retention_ms=HOUR_MS)
    manager = LogManager([log_dir], config, clock=lambda: now[0])
    old = manager.get_or_create_log("old", 0)
    for i in range(12):
        old.append(batch(1, timestamp=1_000, tag=b"%d-" % i), leader_epoch=0)
    manager.get_or_create_log("one", 0).append(batch(1, timestamp=1_000), leader_epoch=0)
    segments = len(old.segments)
    last_base = old.active_segment.base_offset
    manager.close()

    now[0] += 2 * HOUR_MS
    again = LogManager([log_dir], config, clock=lambda: now[0])
    assert again.statistics().unopened_logs == 2
    assert await again.cleanup_logs() == segments - 1, "every segment but the active one expired"
    log = again.get_log("old", 0)
    assert log.log_start_offset == last_base and len(log.segments) == 1
    assert sorted(p.name for p in (log_dir / "old-0").glob("*.log")) == [f"{last_base:020d}.log"]
    assert type(again.logs[("one", 0)]) is UnopenedLog, "one segment: nothing to delete, not opened"
    assert again.statistics().logs_opened == 1
    await again.aclose()
    assert read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)[("old", 0)] == last_base


def test_a_partition_not_opened_yet_is_deleted_whole(tmp_path):
    log_dir = tmp_path / "data"
    _fill(log_dir, partitions=2)
    manager = LogManager([log_dir], LogConfig(segment_bytes=300))
    assert manager.delete_log("t", 0)
    assert manager.get_log("t", 0) is None
    manager.close()
    assert sorted(p.name for p in log_dir.iterdir() if p.is_dir()) == ["t-1"]
    assert LogManager([log_dir]).statistics().logs == 1
