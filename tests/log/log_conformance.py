"""The conformance suite every :class:`~trikafka.log.Log` backend must pass.

``check_log(make, clock)`` runs every check; ``CHECKS`` lists them so a test module can also
run them one by one (a failure then names the check). ``make(config=None)`` returns a fresh
empty log whose clock is ``clock`` (a ``FakeClock`` in milliseconds).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from trikafka.errors import CorruptRecordError, ErrorCode, InvalidRecordError, KafkaProtocolError
from trikafka.log import Log, LogConfig
from trikafka.protocol.records import (
    BatchHeader,
    Record,
    TimestampType,
    build_batch,
    iter_batches,
    iter_records,
)

__all__ = ["CHECKS", "FakeClock", "check_log", "batch", "decode", "headers_of"]


class FakeClock:
    """A clock in milliseconds that moves only when told to."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms


def batch(count: int = 1, *, timestamp: int = 0, size: int = 1, tag: bytes = b"") -> bytearray:
    """One batch of ``count`` records whose values are ``size`` bytes (plus ``tag``)."""
    return bytearray(
        build_batch([(None, tag + b"%d" % i + b"x" * size, [], timestamp) for i in range(count)])
    )


def headers_of(data: bytes) -> list[BatchHeader]:
    return list(iter_batches(data))


def decode(data: bytes) -> list[Record]:
    return [r for h in iter_batches(data) for r in iter_records(data, h)]


def _out_of_range(call: Callable[[], object]) -> None:
    with pytest.raises(KafkaProtocolError) as info:
        call()
    assert info.value.error_code == ErrorCode.offset_out_of_range


def check_dense_offsets(make, clock) -> None:
    log: Log = make()
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert (log.high_watermark.value, log.log_end_offset_value.value) == (0, 0)
    expected = 0
    for n in (1, 3, 2, 5):
        info = log.append(batch(n), leader_epoch=4)
        assert (info.first_offset, info.last_offset) == (expected, expected + n - 1)
        assert (info.log_append_time, info.log_start_offset) == (-1, 0)
        expected += n
        assert log.log_end_offset == log.high_watermark.value == expected
        assert log.log_end_offset_value.value == expected
    two = batch(2) + batch(3)  # one produce, two batches
    info = log.append(two, leader_epoch=5)
    assert (info.first_offset, info.last_offset) == (expected, expected + 4)
    if not getattr(log, "copies_appends", False):  # a caller's bytearray is patched in place
        assert [h.base_offset for h in headers_of(two)] == [expected, expected + 2]
    expected += 5
    data = log.read(0, 1 << 20).records
    assert [r.offset for r in decode(data)] == list(range(expected))
    assert [h.partition_leader_epoch for h in headers_of(data)] == [4, 4, 4, 4, 5, 5]


def check_read_at_any_offset(make, clock) -> None:
    log: Log = make(LogConfig(segment_bytes=700, index_interval_bytes=150))
    for i in range(60):
        log.append(batch(1 + i % 3, size=i % 17), leader_epoch=0)
    assert len(log.segments) > 3
    assert any(len(s.offset_index) for s in log.segments), "the sparse index is in use"
    for offset in range(log.log_end_offset):
        first = headers_of(log.read(offset, 1).records)
        assert len(first) == 1 and first[0].base_offset <= offset <= first[0].last_offset
        many = headers_of(log.read(offset, 1 << 20).records)
        assert many[0] == first[0]
        assert all(a.next_offset == b.base_offset for a, b in zip(many, many[1:], strict=False))
        segment = next(s for s in reversed(log.segments) if s.base_offset <= offset)
        assert many[-1].next_offset == segment.next_offset, "a read ends at its segment's end"


def check_max_bytes_and_min_one_batch(make, clock) -> None:
    log: Log = make()
    sizes = []
    for i in range(5):
        data = batch(2, size=10 * (i + 1))
        sizes.append(len(data))
        log.append(data, leader_epoch=0)
    one = log.read(0, sizes[0] - 1)
    assert [h.base_offset for h in headers_of(one.records)] == [0]  # KIP-74
    assert log.read(0, sizes[0] - 1, min_one_batch=False).chunks == ()
    assert log.read(0, 0).size == sizes[0]
    assert log.read(0, sizes[0] + sizes[1]).size == sizes[0] + sizes[1]
    assert log.read(0, sizes[0] + sizes[1] + sizes[2] - 1).size == sizes[0] + sizes[1]
    assert log.read(3, sizes[1] + sizes[2]).size == sizes[1] + sizes[2]  # from the batch of 3
    assert log.read(0, 1 << 20).size == sum(sizes)


def check_offset_out_of_range(make, clock) -> None:
    log: Log = make()
    empty = log.read(0, 100)
    assert (empty.chunks, empty.high_watermark, empty.log_start_offset) == ((), 0, 0)
    _out_of_range(lambda: log.read(1, 100))
    log.append(batch(3), leader_epoch=0)
    _out_of_range(lambda: log.read(-1, 100))
    _out_of_range(lambda: log.read(4, 100))
    at_end = log.read(3, 100)
    assert (at_end.chunks, at_end.high_watermark) == ((), 3)


def check_delete_records(make, clock) -> None:
    log: Log = make(LogConfig(segment_bytes=300, retention_ms=-1))
    for _ in range(12):
        log.append(batch(1), leader_epoch=0)
    assert len(log.segments) > 2
    assert log.delete_records_before(5) == 5
    assert log.log_start_offset == 5
    _out_of_range(lambda: log.read(4, 100))
    assert headers_of(log.read(5, 1).records)[0].base_offset == 5
    assert log.delete_records_before(2) == 5, "the log start offset never goes back"
    _out_of_range(lambda: log.delete_records_before(13))
    assert log.append(batch(1), leader_epoch=0).log_start_offset == 5
    size = log.size_in_bytes
    deleted = log.apply_retention(clock())
    assert deleted and all(s.next_offset <= 5 for s in deleted)
    assert log.size_in_bytes == size - sum(s.size for s in deleted)
    for segment in deleted:
        segment.store.delete()
    assert log.log_start_offset == 5 and log.segments[0].base_offset <= 5
    assert log.delete_records_before(log.log_end_offset) == 13
    assert log.read(13, 100).chunks == ()


def check_offset_for_timestamp(make, clock) -> None:
    log: Log = make(LogConfig(segment_bytes=250, index_interval_bytes=60))
    for ts in (100, 200, 200, 150, 300):
        log.append(batch(timestamp=ts), leader_epoch=0)
    multi = bytearray(
        build_batch([(None, b"a", [], 400), (None, b"b", [], 350), (None, b"c", [], 500)])
    )
    log.append(multi, leader_epoch=0)  # offsets 5, 6, 7
    assert len(log.segments) > 1
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(100) == (0, 100)
    assert log.offset_for_timestamp(150) == (1, 200)
    assert log.offset_for_timestamp(201) == (4, 300)
    assert log.offset_for_timestamp(360) == (5, 400)
    assert log.offset_for_timestamp(401) == (7, 500)
    assert log.offset_for_timestamp(501) is None
    assert (log.max_timestamp, log.offset_of_max_timestamp) == (500, 7)
    log.append(
        bytearray(build_batch([(None, b"d", [], 600), (None, b"e", [], 100)])), leader_epoch=0
    )
    assert (log.max_timestamp, log.offset_of_max_timestamp) == (600, 8), "the record, not the batch"
    log.delete_records_before(2)
    assert log.offset_for_timestamp(0) == (2, 200)
    log.delete_records_before(6)
    assert log.offset_for_timestamp(0) == (6, 350)


def check_log_append_time(make, clock) -> None:
    log: Log = make(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append(batch(2, timestamp=5), leader_epoch=0, log_append_time_ms=12345)
    assert info.log_append_time == 12345
    clock.now = 23456
    assert log.append(batch(1, timestamp=5), leader_epoch=0).log_append_time == 23456
    data = log.read(0, 1 << 20).records
    assert [h.timestamp_type for h in headers_of(data)] == [TimestampType.LOG_APPEND_TIME] * 2
    assert [r.timestamp for r in decode(data)] == [12345, 12345, 23456]
    assert log.offset_for_timestamp(20000) == (2, 23456)


def check_rejects_bad_batches(make, clock) -> None:
    log: Log = make(LogConfig(max_message_bytes=200))
    corrupt = batch(2)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append(batch(1) + corrupt, leader_epoch=0)
    with pytest.raises(InvalidRecordError):
        log.append(bytearray(), leader_epoch=0)
    with pytest.raises(KafkaProtocolError) as info:
        log.append(batch(1, size=300), leader_epoch=0)
    assert info.value.error_code == ErrorCode.message_too_large
    assert (log.log_end_offset, log.size_in_bytes) == (0, 0), "nothing of a refused produce"
    assert log.append(batch(1), leader_epoch=0).first_offset == 0


def check_segments_roll(make, clock) -> None:
    log: Log = make(LogConfig(segment_bytes=400, segment_ms=1000))
    size = len(batch(1))
    for _ in range(400 // size):
        log.append(batch(1), leader_epoch=0)
    assert len(log.segments) == 1
    log.append(batch(1), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 400 // size], "rolled by segment.bytes"
    clock.advance(999)
    log.append(batch(1), leader_epoch=0)
    assert len(log.segments) == 2
    clock.advance(2)
    log.append(batch(1), leader_epoch=0)
    assert len(log.segments) == 3, "rolled by segment.ms"
    assert [s.base_offset for s in log.segments][-1] == log.log_end_offset - 1
    with pytest.raises(KafkaProtocolError) as info:
        log.append(batch(1, size=500), leader_epoch=0)
    assert info.value.error_code == ErrorCode.record_list_too_large


def check_retention_by_time(make, clock) -> None:
    log: Log = make(LogConfig(segment_bytes=250, retention_ms=1000))
    for _ in range(12):
        log.append(batch(1, timestamp=int(clock())), leader_epoch=0)
        clock.advance(100)
    assert len(log.segments) >= 4
    assert log.apply_retention(clock()) == []  # the oldest segment is exactly 1000 ms old
    clock.advance(500)
    deleted = log.apply_retention(clock())
    assert deleted
    assert all(clock() - s.max_timestamp > 1000 for s in deleted)
    assert all(clock() - s.max_timestamp <= 1000 for s in log.segments[:1])
    assert log.log_start_offset == log.segments[0].base_offset
    assert decode(log.read(log.log_start_offset, 1).records)[0].offset == log.log_start_offset
    for segment in deleted:
        segment.store.delete()
    clock.advance(10**6)
    log.apply_retention(clock())
    assert len(log.segments) == 1, "never the active segment"
    assert log.log_start_offset == log.active_segment.base_offset
    assert log.log_end_offset == 12
    log.append(batch(1, timestamp=int(clock())), leader_epoch=0)  # rolls: the active was full
    assert [s.base_offset for s in log.apply_retention(clock())] == [9]
    assert (log.log_start_offset, log.log_end_offset) == (12, 13)
    assert log.apply_retention(clock()) == []


def check_retention_by_bytes(make, clock) -> None:
    log: Log = make(LogConfig(segment_bytes=300, retention_bytes=700, retention_ms=-1))
    for _ in range(20):
        log.append(batch(1), leader_epoch=0)
    before = log.size_in_bytes
    deleted = log.apply_retention(clock())
    assert deleted
    assert log.size_in_bytes == before - sum(s.size for s in deleted)
    assert log.size_in_bytes >= 700
    assert len(log.segments) == 1 or log.size_in_bytes - log.segments[0].size < 700
    assert log.log_start_offset == log.segments[0].base_offset
    unlimited = make(LogConfig(segment_bytes=300, retention_ms=-1, cleanup_policy="compact"))
    for _ in range(20):
        unlimited.append(batch(1), leader_epoch=0)
    assert unlimited.apply_retention(clock() + 10**12) == [], "compact-only topics keep all"


def check_truncate_fully(make, clock) -> None:
    log: Log = make(LogConfig(segment_bytes=200))
    for _ in range(6):
        log.append(batch(1), leader_epoch=0)
    log.truncate_fully()
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark.value) == (0, 0, 0)
    assert len(log.segments) == 1 and log.size_in_bytes == 0
    assert log.append(batch(2), leader_epoch=0).first_offset == 0
    log.truncate_fully(50)
    assert log.append(batch(1), leader_epoch=0).first_offset == 50
    assert log.log_start_offset == 50


def check_flush_and_close(make, clock) -> None:
    log: Log = make(LogConfig(flush_messages=3))
    log.append(batch(2), leader_epoch=0)
    assert log.recovery_point == 0
    log.append(batch(1), leader_epoch=0)
    assert log.recovery_point == 3, "flush.messages flushes inline"
    log.append(batch(1), leader_epoch=0)
    assert not log.needs_flush(clock()), "flush.ms (never) has not passed"
    log.roll()
    assert log.needs_flush(clock()), "a rolled segment awaits its flush"
    log.flush()
    assert log.recovery_point == log.log_end_offset and not log.needs_flush(clock())
    log.close()
    assert log.closed
    with pytest.raises(RuntimeError):
        log.append(batch(1), leader_epoch=0)


CHECKS = [
    check_dense_offsets,
    check_read_at_any_offset,
    check_max_bytes_and_min_one_batch,
    check_offset_out_of_range,
    check_delete_records,
    check_offset_for_timestamp,
    check_log_append_time,
    check_rejects_bad_batches,
    check_segments_roll,
    check_retention_by_time,
    check_retention_by_bytes,
    check_truncate_fully,
    check_flush_and_close,
]


def check_log(make, clock) -> None:
    """Run every check against the backend ``make`` builds."""
    for check in CHECKS:
        check(make, clock)
