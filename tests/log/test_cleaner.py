"""Log compaction: the cleaner's rules on memory and file logs, crash recovery of a swap, and
a hypothesis property — reading a compacted log from 0 gives each key's last value."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trikafka.log.cleaner import LogCleaner, clean_log
from trikafka.log.config import LogConfig
from trikafka.log.file import FileLog
from trikafka.log.memory import MemoryLog
from trikafka.protocol.batch_records import decode_records
from trikafka.protocol.compression import recompress_batches
from trikafka.protocol.record_builder import DELETE_HORIZON_BIT
from trikafka.protocol.records import build_batch, build_control_batch, iter_batches

DAY = 86_400_000


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _config(**extra) -> LogConfig:
    return LogConfig.from_properties({"cleanup.policy": "compact", "segment.bytes": "400", **extra})


def _log(kind: str, tmp_path, clock: Clock, **extra):
    if kind == "memory":
        return MemoryLog("t", 0, _config(**extra), clock=clock)
    return FileLog.open(tmp_path, "t", 0, _config(**extra), clock=clock)


def _put(log, key: bytes | None, value: bytes | None, timestamp: int = 0, codec: int = 0, **batch) -> None:
    data = build_batch([(key, value, [], timestamp)], **batch)
    if codec:
        data = bytes(recompress_batches(data, list(iter_batches(data)), codec))
    log.append(data, leader_epoch=0)


def _read_all(log) -> list[tuple[int, bytes | None, bytes | None]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        if not data:
            break
        for header in iter_batches(data, validate_records=False):
            if not header.is_control:
                out.extend((r.offset, r.key, r.value) for r in decode_records(data, header) if r.offset >= offset)
            offset = max(offset, header.next_offset)
    return out


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_cleaning_keeps_the_last_value_per_key_and_the_offsets(kind, tmp_path):
    clock = Clock()
    log = _log(kind, tmp_path, clock)
    for i in range(60):
        _put(log, b"k%d" % (i % 4), b"v%d" % i, codec=4 if i % 3 == 0 else 0)
    log.roll()
    _put(log, b"k0", b"active")  # the active segment is never cleaned
    size_before = log.size_in_bytes
    done = clean_log(log, 0, clock())
    assert done is not None
    plan, before, after = done
    assert plan.end == 60 and after < before
    assert log.size_in_bytes < size_before
    got = _read_all(log)
    assert got == [
        (56, b"k0", b"v56"),
        (57, b"k1", b"v57"),
        (58, b"k2", b"v58"),
        (59, b"k3", b"v59"),
        (60, b"k0", b"active"),
    ]
    assert log.log_end_offset == 61
    assert clean_log(log, plan.end, clock()) is None, "nothing dirty left"
    if kind == "file":
        log.close()
        reopened = FileLog.open(tmp_path, "t", 0, _config(), clock=clock)
        assert _read_all(reopened) == got
        reopened.close()


def test_tombstones_get_a_delete_horizon_then_go():
    clock = Clock()
    log = _log("memory", None, clock, **{"delete.retention.ms": str(DAY)})
    for i in range(20):
        _put(log, b"a", b"x%d" % i, timestamp=5)
    _put(log, b"b", b"keep")
    _put(log, b"a", None, timestamp=7)  # delete a
    log.roll()
    assert clean_log(log, 0, clock()) is not None
    assert [(k, v) for _, k, v in _read_all(log)] == [(b"b", b"keep"), (b"a", None)]
    tombstone_batch = [h for h in iter_batches(log.read(21, 1 << 20).records)][0]
    assert tombstone_batch.attributes & DELETE_HORIZON_BIT
    assert tombstone_batch.base_timestamp == int(clock()) + DAY
    # The record keeps its own timestamp: deltas are relative to the horizon.
    data = log.read(21, 1 << 20).records
    assert decode_records(data, tombstone_batch)[0].timestamp == 7
    # Before the horizon the tombstone survives a cleaning; after it, it goes.
    for now, expected in ((clock() + DAY - 1, [(b"b", b"keep"), (b"a", None)]), (clock() + DAY + 1, [(b"b", b"keep")])):
        for _ in range(12):
            _put(log, b"c", b"filler")
        log.roll()
        clock.now = now
        clean_log(log, 0, now)
        assert [(k, v) for _, k, v in _read_all(log) if k != b"c"] == expected


def test_min_ratio_min_lag_and_max_lag_decide_when():
    clock = Clock(10_000_000)
    log = _log("memory", None, clock, **{"min.cleanable.dirty.ratio": "0.99", "min.compaction.lag.ms": "1000"})
    for i in range(30):
        _put(log, b"k", b"%d" % i, timestamp=int(clock()))
    log.roll()
    assert clean_log(log, 0, clock()) is None, "younger than min.compaction.lag.ms"
    clock.now += 2000
    assert clean_log(log, 0, clock()) is not None, "all dirty: ratio 1.0"
    for i in range(30):
        _put(log, b"k", b"again%d" % i, timestamp=int(clock()))
    log.roll()
    clock.now += 2000
    # Dirty share now below 0.99 (the clean head counts): not cleaned...
    dirty_start = 29
    assert clean_log(log, dirty_start + 1, clock()) is None
    # ...unless max.compaction.lag.ms is exceeded.
    forced = LogConfig.from_properties({"max.compaction.lag.ms": "1500"}, base=log.config)
    log.config = forced
    done = clean_log(log, dirty_start + 1, clock())
    assert done is not None and done[0].forced


def test_aborted_transactions_are_removed_and_markers_kept():
    clock = Clock()
    log = _log("memory", None, clock)
    _put(log, b"k", b"committed", producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    log.append(build_control_batch(7, 0, commit=True), leader_epoch=0)
    _put(log, b"k", b"aborted", producer_id=8, producer_epoch=0, base_sequence=0, transactional=True)
    log.append(build_control_batch(8, 0, commit=False), leader_epoch=0)
    for i in range(10):
        _put(log, b"other%d" % i, b"v")
    log.roll()
    clean_log(log, 0, clock())
    values = [v for _, k, v in _read_all(log) if k == b"k"]
    assert values == [b"committed"], "the aborted write neither survives nor shadows the committed one"
    controls = [h for h in iter_batches(log.read(0, 1 << 20).records) if h.is_control]
    assert len(controls) == 2


def test_a_committed_swap_is_completed_at_start(tmp_path):
    """A crash between the ``.swap`` rename and its rename to ``.log``: the next start
    removes the segments the swap replaces and renames it."""
    clock = Clock()
    log = _log("file", tmp_path, clock)
    for i in range(40):
        _put(log, b"k%d" % (i % 2), b"v%d" % i)
    log.roll()
    from trikafka.log import cleaner

    plan = cleaner.plan_cleaning(log, 0, clock())
    results = cleaner.compute(log, plan, clock())
    directory = log.directory
    log.close()
    # The commit point, then the crash: the old segments are all still there.
    written = [r for r in results if r.cleaned_path is not None]
    first = written[-1]  # the group holding the last values
    swap = first.cleaned_path.with_name(first.cleaned_path.name.replace(".cleaned", ".swap"))
    first.cleaned_path.rename(swap)
    for other in written[:-1]:
        other.cleaned_path.rename(other.cleaned_path)  # left as .cleaned: an unfinished cleaning
    reopened = FileLog.open(tmp_path, "t", 0, _config(), clock=clock)
    got = _read_all(reopened)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)), "no offset twice"
    assert got[-2:] == [(38, b"k0", b"v38"), (39, b"k1", b"v39")]
    assert not list(directory.glob("*.swap")) and not list(directory.glob("*.cleaned"))
    reopened.close()


def test_the_broker_task_cleans_in_rounds():
    clock = Clock()

    class Manager:
        logs = {}
        log_dirs = None

    log = _log("memory", None, clock)
    Manager.logs = {("t", 0): log}
    for i in range(50):
        _put(log, b"k", b"%d" % i)
    log.roll()
    cleaner = LogCleaner(Manager(), backoff_ms=15000, clock=clock)
    assert cleaner.clean_once() == 1
    assert cleaner.clean_once() == 0
    stats = cleaner.statistics()
    assert stats.cleanings == 1 and stats.bytes_written < stats.bytes_read


_record = st.tuples(
    st.sampled_from([b"a", b"b", b"c", b"d", b"e"]), st.one_of(st.none(), st.binary(min_size=1, max_size=30))
)
appends = st.lists(
    st.tuples(st.lists(_record, min_size=1, max_size=4), st.sampled_from([0, 0, 4]), st.booleans()),
    min_size=1, max_size=60,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=appends, retention=st.sampled_from([0, 10**12]))
def test_property_reading_from_zero_gives_each_keys_last_value(steps, retention):
    """For any keyed appends (batches of values and tombstones, plain or compressed) with
    cleanings anywhere in between, the log read from 0 holds, for every key, its last value —
    or nothing once a tombstone's delete horizon has passed — in offset order; uncleaned
    records are never lost."""
    clock = Clock()
    log = _log("memory", None, clock, **{"delete.retention.ms": str(retention), "min.cleanable.dirty.ratio": "0"})
    last: dict[bytes, tuple[int, bytes | None]] = {}
    for batch, codec, clean_now in steps:
        for i, (key, value) in enumerate(batch):
            last[key] = (log.log_end_offset + i, value)
        data = build_batch([(k, v, [], 0) for k, v in batch])
        if codec:
            data = bytes(recompress_batches(data, list(iter_batches(data)), codec))
        log.append(data, leader_epoch=0)
        if clean_now:
            log.roll()
            clock.now += 1
            clean_log(log, 0, clock())
    log.roll()
    clock.now += 1
    clean_log(log, 0, clock())
    clock.now += 1
    clean_log(log, 0, clock())  # a second pass: horizons set by the first may have passed
    got = _read_all(log)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets))
    seen = {k: (o, v) for o, k, v in got}
    assert len(seen) == len(got), "one record per key after cleaning up to the end"
    for key, (offset, value) in last.items():
        if value is None and retention == 0:
            assert key not in seen or seen[key] == (offset, None)
        else:
            assert seen[key] == (offset, value)


def test_the_first_dirty_offset_survives_a_restart_in_cleaner_offset_checkpoint(tmp_path):
    from trikafka.log.cleaner import CLEANER_CHECKPOINT
    from trikafka.log.manager import LogManager, read_checkpoint

    clock = Clock()
    manager = LogManager([tmp_path], clock=clock)
    log = manager.get_or_create_log("t", 0, _config())
    for i in range(50):
        _put(log, b"k%d" % (i % 3), b"v%d" % i)
    log.roll()
    cleaner = LogCleaner(manager, backoff_ms=15000, clock=clock)
    assert cleaner.clean_once() == 1
    assert read_checkpoint(tmp_path / CLEANER_CHECKPOINT) == {("t", 0): 50}
    manager.close()
    manager = LogManager([tmp_path], clock=clock)
    restarted = LogCleaner(manager, backoff_ms=15000, clock=clock)
    assert restarted.first_dirty_offset(manager.get_log("t", 0)) == 50
    # A clean shutdown wrote the cleaned segments' indexes; the restart trusted and used them.
    assert _read_all(manager.get_log("t", 0)) == [(47, b"k2", b"v47"), (48, b"k0", b"v48"), (49, b"k1", b"v49")]
    assert manager.get_log("t", 0).read(48, 100).records[:8] != b""
    assert restarted.clean_once() == 0, "the clean head is not dirty again"
    manager.close()


def test_a_full_key_map_ends_the_round_early_and_the_next_rounds_finish():
    clock = Clock()

    class Manager:
        logs = {}
        log_dirs = None

    log = _log("memory", None, clock, **{"min.cleanable.dirty.ratio": "0"})
    Manager.logs = {("t", 0): log}
    for i in range(40):
        _put(log, b"k%d" % (i % 8), b"v%d" % i)
    log.roll()
    cleaner = LogCleaner(Manager(), backoff_ms=15000, clock=clock)
    cleaner.max_map_entries = 3  # log.cleaner.dedupe.buffer.size of three keys
    assert cleaner.clean_once() >= 3, "several rounds, each bounded by the map"
    assert cleaner.first_dirty_offset(log) == 40
    assert sorted(_read_all(log)) == [(32 + i, b"k%d" % i, b"v%d" % (32 + i)) for i in range(8)]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("kind", ["memory", "file"])
def test_records_dropped_from_inside_a_batch_keep_its_offsets_in_every_codec(kind, codec, tmp_path):
    """A batch of ten records of three keys keeps one record per key: the rewritten batch has
    the same base offset and last offset delta, three records, and reads back after a
    restart (recovery must accept a batch that holds fewer records than it spans)."""
    clock = Clock()
    log = _log(kind, tmp_path, clock)
    for j in range(6):
        data = build_batch([(b"k%d" % (i % 3), b"v%d" % (10 * j + i), [], 1000 + i) for i in range(10)])
        if codec:
            data = bytes(recompress_batches(data, list(iter_batches(data)), codec))
        log.append(data, leader_epoch=0)
    log.roll()
    assert clean_log(log, 0, clock()) is not None
    raw = log.read(0, 1 << 20).records
    (header,) = list(iter_batches(raw, validate_records=False))
    assert (header.base_offset, header.last_offset_delta, header.record_count, header.compression) == (50, 9, 3, codec)
    records = decode_records(raw, header)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (57, b"k1", b"v57", 1007), (58, b"k2", b"v58", 1008), (59, b"k0", b"v59", 1009)]
    if kind == "file":
        log.close()
        reopened = FileLog.open(tmp_path, "t", 0, _config(), clock=clock)
        assert [(o, k, v) for o, k, v in _read_all(reopened)] == [(r.offset, r.key, r.value) for r in records]
        reopened.close()
