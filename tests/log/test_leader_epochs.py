"""The leader-epoch cache: Kafka's endOffsetFor rules, and following a log's batch headers."""

from __future__ import annotations

from trikafka.log.config import LogConfig
from trikafka.log.leader_epochs import LeaderEpochCache
from trikafka.log.memory import MemoryLog
from trikafka.protocol.records import build_batch


def _cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache()
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_end_offset_for_follows_kafkas_rules() -> None:
    cache = _cache((1, 0), (3, 10), (5, 25))
    assert cache.end_offset_for(5, 40) == (5, 40), "the latest epoch ends at the log end"
    assert cache.end_offset_for(3, 40) == (3, 25)
    assert cache.end_offset_for(4, 40) == (3, 25), "an epoch that never wrote: the one before it"
    assert cache.end_offset_for(0, 40) == (0, 0), "older than all: the first known start"
    assert cache.end_offset_for(6, 40) == (-1, -1)
    assert cache.end_offset_for(-1, 40) == (-1, -1)
    assert LeaderEpochCache().end_offset_for(0, 0) == (-1, -1)


def test_assign_ignores_stale_epochs_and_truncations_adjust() -> None:
    cache = _cache((2, 5), (1, 9), (2, 12))
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(2, 5)]
    cache.assign(4, 20)
    cache.truncate_from_start(8)
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(2, 8), (4, 20)]
    cache.truncate_from_end(20)
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(2, 8)]



def test_catch_up_reads_epochs_from_the_log() -> None:
    log = MemoryLog("t", 0, LogConfig(segment_bytes=200))
    for epoch in (0, 0, 2, 2, 7):
        log.append(build_batch([(b"k", b"v", [], 0), (b"k", b"w", [], 0)]), leader_epoch=epoch)
    cache = LeaderEpochCache()
    cache.catch_up(log)
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(0, 0), (2, 4), (7, 8)]
    log.append(build_batch([(b"k", b"x", [], 0)]), leader_epoch=9)
    cache.catch_up(log)
    assert cache.end_offset_for(7, log.log_end_offset) == (7, 10)
    assert cache.end_offset_for(9, log.log_end_offset) == (9, 11)
    log.delete_records_before(5)
    cache.catch_up(log)
    assert cache.entries[0].start_offset >= 4
