"""The LogManager: loading, checkpoints, deletion, and its periodic work on trio's clock."""

from __future__ import annotations

import logging

import pytest
import trio

from trikafka.errors import ConfigError
from trikafka.log import FileLog, LogConfig, LogManager, MemoryLog
from trikafka.log.manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
    write_checkpoint,
)

from .log_conformance import batch, decode

HOUR_MS = 3_600_000


def trio_clock_ms() -> float:
    return trio.current_time() * 1000


def test_checkpoint_files_use_kafkas_text_format(tmp_path):
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    write_checkpoint(path, {("b", 1): 20, ("a-b", 0): 7})
    assert path.read_text() == "0\n2\na-b 0 7\nb 1 20\n"
    assert read_checkpoint(path) == {("b", 1): 20, ("a-b", 0): 7}
    assert read_checkpoint(tmp_path / "missing") == {}
    write_checkpoint(path, {})
    assert path.read_text() == "0\n0\n"


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\nt 0 5\n", "0\n1\nt zero 5\n", ""])
def test_a_malformed_checkpoint_reads_as_empty_with_a_warning(tmp_path, caplog, text):
    path = tmp_path / "cp"
    path.write_text(text)
    with caplog.at_level(logging.WARNING):
        assert read_checkpoint(path) == {}
    assert len(caplog.records) == 1


def test_log_config_takes_kafka_keys_and_refuses_unknown_ones():
    config = LogConfig.from_properties({"retention.ms": "1000", "cleanup.policy": "compact,delete"})
    assert config.retention_ms == 1000 and config.cleanup_policy == ("compact", "delete")
    assert config.delete_enabled
    assert LogConfig.from_properties({"segment_bytes": 100}).segment_bytes == 100
    assert LogConfig().to_properties()["segment.bytes"] == "1073741824"
    with pytest.raises(ConfigError, match="retention.ms"):
        LogConfig.from_properties({"retention.msx": "1"})
    with pytest.raises(ConfigError):
        LogConfig(message_timestamp_type="Now")
    with pytest.raises(ConfigError):
        LogConfig.from_properties({"segment.bytes": "big"})


def test_memory_manager_creates_finds_and_deletes_logs():
    manager = LogManager()
    log = manager.get_or_create_log("t", 0)
    assert isinstance(log, MemoryLog)
    assert manager.get_or_create_log("t", 0) is log and manager.get_log("t", 0) is log
    assert manager.get_log("t", 1) is None
    config = LogConfig(retention_ms=5)
    other = manager.get_or_create_log("t", 1, config)
    assert other.config == log.config == config, "configs are per topic"
    assert set(manager.logs) == {("t", 0), ("t", 1)}
    assert manager.delete_log("t", 0) and not manager.delete_log("t", 0)
    assert log.closed and manager.get_log("t", 0) is None
    manager.close()
    with pytest.raises(RuntimeError):
        manager.get_or_create_log("t", 2)


def test_file_manager_spreads_logs_and_reloads_them(tmp_path, caplog):
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, LogConfig(segment_bytes=300))
    logs = [manager.get_or_create_log("t", p) for p in range(4)]
    assert all(isinstance(log, FileLog) for log in logs)
    for p, log in enumerate(logs):
        for _ in range(p + 5):
            log.append(batch(1), leader_epoch=0)
    assert sorted(len([e for e in d.iterdir() if e.is_dir()]) for d in dirs) == [2, 2]
    logs[1].delete_records_before(3)
    manager.close()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
        recovery = read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
        assert recovery == {tp: manager.get_log(*tp).log_end_offset for tp in recovery}
        assert len(recovery) == 2
    assert read_checkpoint(dirs[0] / LOG_START_OFFSET_CHECKPOINT).get(("t", 1), 3) == 3

    with caplog.at_level(logging.WARNING):
        again = LogManager(dirs, LogConfig(segment_bytes=300))
    assert not caplog.records, "a clean restart recovers nothing"
    assert set(again.logs) == {("t", p) for p in range(4)}
    for p in range(4):
        log = again.get_log("t", p)
        assert log.log_end_offset == p + 5 and log.recovery_point == p + 5
    assert again.get_log("t", 1).log_start_offset == 3
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs), "a crash must be noticed"
    again.close()


def test_an_unclean_restart_recovers_from_the_checkpoint(tmp_path):
    manager = LogManager([tmp_path], LogConfig(segment_bytes=300))
    log = manager.get_or_create_log("t", 0)
    for _ in range(10):
        log.append(batch(1), leader_epoch=0)
    manager.close()
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()  # as if the process had died
    active = log.directory / f"{log.active_segment.base_offset:020d}.log"
    with open(active, "ab") as f:
        f.write(b"\x00" * 30)
    again = LogManager([tmp_path], LogConfig(segment_bytes=300))
    reopened = again.get_log("t", 0)
    assert reopened.log_end_offset == 10 and reopened.recovered_bytes_cut == 30
    again.close()


def test_deleted_logs_are_renamed_then_removed(tmp_path):
    manager = LogManager([tmp_path])
    manager.get_or_create_log("gone", 0).append(batch(1), leader_epoch=0)
    manager.get_or_create_log("kept", 0).append(batch(1), leader_epoch=0)
    assert manager.delete_log("gone", 0)
    (doomed,) = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert doomed.name.startswith("gone-0.")
    manager.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["kept-0"]
    # A leftover from a crash is removed at the next start.
    (tmp_path / "x-0.abc-delete").mkdir()
    again = LogManager([tmp_path])
    assert set(again.logs) == {("kept", 0)}
    assert not (tmp_path / "x-0.abc-delete").exists()
    again.close()


async def test_run_applies_retention_when_the_virtual_clock_passes_retention_ms(autojump_clock):
    config = LogConfig(segment_bytes=200, retention_ms=HOUR_MS)
    manager = LogManager(None, config, clock=trio_clock_ms)
    log = manager.get_or_create_log("t", 0)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        for _ in range(10):
            log.append(batch(1, timestamp=int(trio_clock_ms())), leader_epoch=0)
            await trio.sleep(60)
        assert len(log.segments) > 3
        await trio.sleep(HOUR_MS / 1000 - 600)  # the oldest record is exactly an hour old
        assert log.log_start_offset == 0
        await trio.sleep(20 * 60)  # and now retention has run again
        assert log.log_start_offset > 0
        assert len(log.segments) == 1, "everything but the active segment has expired"
        assert decode(log.read(log.log_start_offset, 1).records)[0].offset == log.log_start_offset
        nursery.cancel_scope.cancel()
    assert log.closed


async def test_run_deletes_expired_segment_files_in_a_thread(tmp_path, autojump_clock):
    config = LogConfig(segment_bytes=200, retention_ms=1000)
    manager = LogManager([tmp_path], config, clock=trio_clock_ms, retention_check_interval_ms=5000)
    log = manager.get_or_create_log("t", 0)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        for _ in range(8):
            log.append(batch(1, timestamp=int(trio_clock_ms())), leader_epoch=0)
        first = log.directory / "00000000000000000000.log"
        assert first.exists()
        # Deletion runs in a worker thread: wait for the step to finish, not for a time.
        await manager.statistics_value.wait_value(lambda s: s.segments_deleted > 0)
        # (Under autojump a worker thread lets virtual time run on: only a lower bound holds.)
        assert trio.current_time() >= 5
        assert not first.exists()
        assert not [p for p in log.directory.iterdir() if p.name.endswith(".deleted")]
        nursery.cancel_scope.cancel()


async def test_run_checkpoints_periodically_and_shuts_down_cleanly(tmp_path, autojump_clock):
    # No retention: under autojump, virtual time runs on while a worker thread works.
    config = LogConfig(segment_bytes=200, retention_ms=-1)
    manager = LogManager([tmp_path], config, clock=trio_clock_ms)
    log = manager.get_or_create_log("t", 0)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        for _ in range(8):
            log.append(batch(1), leader_epoch=0)
        assert log.recovery_point == 0
        await manager.statistics_value.wait_value(lambda s: s.recovery_point_checkpoints == 1)
        assert trio.current_time() >= 60
        # The checkpoint flushed the rolled segments first, so the recovery point moved.
        assert log.recovery_point == 8
        assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 8}
        assert read_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT) == {("t", 0): 0}
        log.append(batch(2), leader_epoch=0)
        nursery.cancel_scope.cancel()
    assert log.closed and (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 10}


async def test_run_flushes_by_flush_ms(tmp_path, autojump_clock):
    config = LogConfig(flush_ms=1000)
    manager = LogManager([tmp_path], config, clock=trio_clock_ms, flush_scheduler_interval_ms=500)
    log = manager.get_or_create_log("t", 0)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        log.append(batch(3), leader_epoch=0)
        await manager.statistics_value.wait_value(lambda s: s.flushes == 1)
        assert trio.current_time() >= 1.0, "not before flush.ms has passed"
        assert log.recovery_point == 3
        nursery.cancel_scope.cancel()


async def test_fetchers_wait_on_the_high_watermark(autojump_clock):
    log = LogManager(clock=trio_clock_ms).get_or_create_log("t", 0)
    seen = []

    async def fetcher():
        with trio.fail_after(10):
            await log.high_watermark.wait_value(lambda hw: hw >= 3)
        seen.append(log.high_watermark.value)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fetcher)
        await trio.sleep(1)
        log.append(batch(2), leader_epoch=0)
        await trio.sleep(1)
        assert seen == []
        log.append(batch(2), leader_epoch=0)
    assert seen == [4]


def test_a_new_file_log_is_on_disk_only_from_its_first_record(tmp_path):
    manager = LogManager([tmp_path])
    log = manager.get_or_create_log("idle", 0)
    assert not log.on_disk and not (tmp_path / "idle-0").exists()
    log.flush()
    assert log.read(0, 1000).chunks == () and not (tmp_path / "idle-0").exists()
    log.append(batch(1), leader_epoch=0)
    assert log.on_disk and (tmp_path / "idle-0" / "00000000000000000000.log").stat().st_size > 0
    manager.get_or_create_log("never", 0)
    manager.get_or_create_log("dropped", 0)
    assert manager.delete_log("dropped", 0)
    manager.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["idle-0"]
    again = LogManager([tmp_path])
    assert again.get_log("idle", 0).log_end_offset == 1
    assert again.get_log("never", 0) is None  # the topic store, not the disk, knows it exists
    assert again.get_or_create_log("never", 0).log_end_offset == 0
    again.close()
