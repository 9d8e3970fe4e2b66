"""The file backend: Kafka's layout on disk, reopening, recovery after a crash."""

from __future__ import annotations

import logging
import os

import pytest

from trikafka.log import FileLog, LogConfig, MemoryLog
from trikafka.log.file import segment_file_name
from trikafka.log.storage import FileIO

from .log_conformance import batch, decode

SMALL = LogConfig(segment_bytes=400, index_interval_bytes=100)


def fill(log: FileLog, count: int = 30) -> list[bytes]:
    """Append ``count`` batches of 1-3 records; return the stored bytes of each batch."""
    for i in range(count):
        log.append(batch(1 + i % 3, timestamp=1000 + i, tag=b"%d-" % i), leader_epoch=2)
    return all_batches(log)


def all_batches(log: FileLog) -> list[bytes]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1).records
        out.append(data)
        offset = decode(data)[-1].offset + 1
    return out


def names(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_segments_roll_into_files_named_by_20_digit_base_offsets(tmp_path, clock):
    log = FileLog.open(tmp_path, "orders", 3, SMALL, clock=clock)
    assert log.directory == tmp_path / "orders-3"
    fill(log)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3 and bases[0] == 0
    log.close()
    expected = sorted(
        segment_file_name(b, suffix) for b in bases for suffix in (".log", ".index", ".timeindex")
    )
    assert names(log.directory) == expected
    assert segment_file_name(bases[1]) == f"{bases[1]:020d}.log"
    for segment in log.segments:
        on_disk = (log.directory / segment_file_name(segment.base_offset, ".log")).read_bytes()
        assert len(on_disk) == segment.size
        index = (log.directory / segment_file_name(segment.base_offset, ".index")).read_bytes()
        assert index == segment.offset_index.to_bytes()


def test_reopen_after_a_clean_close_restores_offsets_data_and_indexes(tmp_path, clock):
    log = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock)
    stored = fill(log)
    before = [
        (s.base_offset, s.next_offset, s.offset_index.entries(), s.max_timestamp)
        for s in log.segments
    ]
    end = log.log_end_offset
    by_time = log.offset_for_timestamp(1010)
    log.flush()
    log.close()
    for clean in (True, False):
        again = FileLog.open(
            tmp_path, "t", 0, SMALL, clock=clock, recovery_point=end, clean_shutdown=clean
        )
        after = [
            (s.base_offset, s.next_offset, s.offset_index.entries(), s.max_timestamp)
            for s in again.segments
        ]
        assert after == before
        assert again.log_end_offset == again.high_watermark.value == end
        assert again.recovered_bytes_cut == 0
        assert all_batches(again) == stored
        assert again.offset_for_timestamp(1010) == by_time
        again.close()
    again = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock)
    assert again.append(batch(1), leader_epoch=2).first_offset == end
    again.close()


def test_reopen_without_indexes_rebuilds_them(tmp_path, clock, caplog):
    log = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock)
    stored = fill(log)
    entries = [s.offset_index.entries() for s in log.segments]
    log.close()
    (log.directory / segment_file_name(0, ".index")).unlink()
    (log.directory / segment_file_name(log.segments[1].base_offset, ".index")).write_bytes(b"junk")
    with caplog.at_level(logging.INFO, logger="trikafka.log.file"):
        again = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock, clean_shutdown=True)
    assert [s.offset_index.entries() for s in again.segments] == entries
    assert all_batches(again) == stored
    assert sum("Rebuilding indexes" in r.message for r in caplog.records) == 2
    again.close()


def test_a_torn_tail_is_cut_at_the_last_whole_batch(tmp_path, clock, caplog):
    log = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock)
    stored = fill(log)
    log.close()
    active = log.directory / segment_file_name(log.segments[-1].base_offset)
    size = active.stat().st_size
    os.truncate(active, size - 5)
    with caplog.at_level(logging.WARNING, logger="trikafka.log"):
        again = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock)
    assert all_batches(again) == stored[:-1]
    assert again.log_end_offset == decode(stored[-2])[-1].offset + 1
    assert again.recovered_bytes_cut == len(stored[-1]) - 5
    (line,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "t-0" in line.getMessage() and f"cut {len(stored[-1]) - 5} bytes" in line.getMessage()
    assert active.stat().st_size == size - len(stored[-1])
    again.close()


def test_a_corrupt_byte_in_the_tail_truncates_there_and_deletes_later_segments(
    tmp_path, clock, caplog
):
    log = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock)
    stored = fill(log)
    victim = log.segments[-3]  # not the active one: later segments must go too
    later = log.segments[-2:]
    first_bad = victim.find_batch(victim.base_offset + 2)
    log.close()
    path = log.directory / segment_file_name(victim.base_offset)
    data = bytearray(path.read_bytes())
    data[first_bad.position + 70] ^= 0xFF  # inside the records, covered by the CRC
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="trikafka.log"):
        again = FileLog.open(
            tmp_path, "t", 0, SMALL, clock=clock, recovery_point=victim.base_offset
        )
    assert again.log_end_offset == first_bad.base_offset
    kept = [b for b in stored if decode(b)[0].offset < first_bad.base_offset]
    assert all_batches(again) == kept
    cut = victim.size - first_bad.position + sum(s.size for s in later)
    (line,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert f"cut {cut} bytes at offset {first_bad.base_offset}" in line.getMessage()
    assert "CRC" in line.getMessage()
    assert not any((again.directory / segment_file_name(s.base_offset)).exists() for s in later)
    assert again.append(batch(1), leader_epoch=3).first_offset == first_bad.base_offset
    again.close()


def test_segments_below_the_recovery_point_are_trusted(tmp_path, clock, caplog):
    """Like Kafka, only the segment holding the recovery point and later ones are re-read."""
    log = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock)
    fill(log)
    end = log.log_end_offset
    log.close()
    path = log.directory / segment_file_name(0)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    trusted = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock, recovery_point=end)
    assert trusted.log_end_offset == end and trusted.recovered_bytes_cut == 0
    trusted.close()
    with caplog.at_level(logging.WARNING, logger="trikafka.log"):
        checked = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock, recovery_point=0)
    assert len(checked.segments) == 1 and checked.log_end_offset < end
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    checked.close()


def test_garbage_after_the_last_batch_is_cut(tmp_path, clock):
    """A preallocated or half-written tail reads as zeros; zeros are not a batch."""
    log = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock)
    stored = fill(log, 3)
    log.close()
    with open(log.directory / segment_file_name(0), "ab") as f:
        f.write(b"\x00" * 100)
    again = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock)
    assert all_batches(again) == stored and again.recovered_bytes_cut == 100
    again.close()


def test_retention_detaches_at_once_and_deletes_later(tmp_path, clock):
    log = FileLog.open(
        tmp_path, "t", 0, LogConfig(segment_bytes=400, retention_bytes=0), clock=clock
    )
    fill(log)
    deleted = log.apply_retention(clock())
    assert deleted and len(log.segments) == 1
    leftovers = [n for n in names(log.directory) if n.endswith(".deleted")]
    assert segment_file_name(0, ".log.deleted") in leftovers
    # A crash now: a reopen forgets them.
    log.close()
    again = FileLog.open(tmp_path, "t", 0, clock=clock, log_start_offset=log.log_start_offset)
    assert not [n for n in names(again.directory) if n.endswith(".deleted")]
    assert again.log_start_offset == log.log_start_offset
    assert [s.base_offset for s in again.segments] == [log.active_segment.base_offset]
    for segment in deleted:
        segment.store.delete()  # harmless when already gone
    again.close()


def test_leftover_and_orphan_files_are_removed_on_open(tmp_path, clock):
    directory = tmp_path / "t-0"
    directory.mkdir()
    (directory / segment_file_name(40, ".index")).write_bytes(b"")
    (directory / segment_file_name(80, ".log.deleted")).write_bytes(b"x")
    (directory / "leader-epoch-checkpoint").write_text("0\n0\n")
    log = FileLog(directory, "t", 0, clock=clock)
    assert names(directory) == [segment_file_name(0), "leader-epoch-checkpoint"]
    log.close()


def test_truncate_fully_removes_the_files(tmp_path, clock):
    log = FileLog.open(tmp_path, "t", 0, SMALL, clock=clock)
    fill(log)
    log.truncate_fully(7)
    assert names(log.directory) == [segment_file_name(7)]
    log.close()
    again = FileLog.open(tmp_path, "t", 0, clock=clock)
    assert (again.log_start_offset, again.log_end_offset) == (7, 7)
    again.close()


class ShortWrites(FileIO):
    """Writes at most ``limit`` bytes per call, as a kernel may; counts the gathered calls."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.gathered = 0

    def pwritev(self, fd: int, parts, position: int) -> int:
        self.gathered += 1
        return os.pwrite(fd, b"".join(parts)[: self.limit], position)


@pytest.mark.parametrize("append_time", [False, True], ids=["create-time", "log-append-time"])
def test_large_batches_go_to_the_file_from_where_they_are(tmp_path, clock, append_time):
    """A request's read-only batches of a few KiB each are written without a copy of the
    whole: header copies and the records themselves, in parts, continued after short writes.
    What the file holds is what the memory log keeps, and it survives a reopen."""
    config = LogConfig(message_timestamp_type="LogAppendTime" if append_time else "CreateTime")
    requests = [
        b"".join(bytes(batch(3, timestamp=1000 + i, size=3_000, tag=b"%d-%d" % (i, j))) for j in range(2))
        for i in range(4)
    ]
    io = ShortWrites(limit=5_000)
    log = FileLog.open(tmp_path, "t", 0, config, clock=clock, io=io)
    kept = MemoryLog("t", 0, config, clock=clock)
    for data in requests:
        assert log.append(memoryview(data).toreadonly(), leader_epoch=3) == kept.append(
            bytearray(data), leader_epoch=3
        )
    assert io.gathered > len(requests)  # short writes were continued
    stored = all_batches(log)
    assert stored == all_batches(kept)
    assert [r.value[:4] for b in stored for r in decode(b)][:3] == [b"0-00", b"0-01", b"0-02"]
    log.flush()
    log.close()
    again = FileLog.open(tmp_path, "t", 0, config, clock=clock)
    assert again.recovered_bytes_cut == 0
    assert all_batches(again) == stored
    again.close()
