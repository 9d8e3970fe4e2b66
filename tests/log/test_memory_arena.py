"""The memory log's arena: large appends copied once into populated blocks, kept as views.

The conformance suite runs the whole log contract over the arena (``memory-arena`` in
``conftest.py``); these tests pin what is the arena's own: which appends go there, how
blocks grow, and that a block is let go with the last chunk carved from it.
"""

from __future__ import annotations

import errno
import gc
import mmap
import weakref

from trikafka.log import LogConfig, MemoryLog
from trikafka.log.memory import Arena
from trikafka.protocol.records import build_batch, iter_batches, iter_records


def _batch(size: int, count: int = 4) -> bytes:
    return build_batch([(None, bytes([i]) * (size // count), [], 1_000 + i) for i in range(count)])


def _chunks(log: MemoryLog) -> list:
    return [chunk for segment in log.segments for chunk in segment.store._chunks]


def test_a_large_append_is_kept_in_the_arena_and_reads_back_patched():
    log = MemoryLog("t", 0, LogConfig())
    first = _batch(100_000)
    log.append(_batch(1_000), leader_epoch=0)  # below Arena.smallest: a bytearray
    log.append(first, leader_epoch=7)
    small, large = _chunks(log)
    assert type(small) is bytearray
    assert isinstance(large, memoryview) and isinstance(large.obj, mmap.mmap)
    data = b"".join(bytes(c) for c in log.read(4, 10_000_000).chunks)
    header = next(iter_batches(data))
    assert (header.base_offset, header.partition_leader_epoch) == (4, 7)  # patched in the arena
    assert [r.value for r in iter_records(data, header)] == [
        r.value for r in iter_records(first, next(iter_batches(first)))
    ]
    assert bytes(first[:8]) == bytes(8)  # the request's own bytes were never patched


def test_blocks_double_up_to_the_largest_and_a_huge_chunk_gets_its_own():
    arena = Arena()
    sizes = []
    last = None
    for _ in range(40):
        chunk = arena.copy(b"x" * 200_000)
        if chunk.obj is not last:
            last = chunk.obj
            sizes.append(len(chunk.obj))
    assert sizes[:4] == [Arena.first, 2 * Arena.first, 4 * Arena.first, 8 * Arena.first]
    assert max(sizes) == Arena.largest
    huge = arena.copy(b"y" * (Arena.largest + 1))
    assert len(huge.obj) == Arena.largest + 1 and bytes(huge[-1:]) == b"y"


def test_a_block_is_freed_with_the_last_chunk_carved_from_it():
    log = MemoryLog("t", 0, LogConfig(segment_bytes=300_000, retention_bytes=1, retention_ms=-1))
    log.append(_batch(150_000), leader_epoch=0)
    block = weakref.ref(_chunks(log)[0].obj)
    for _ in range(8):  # into later blocks (256 KiB, 512 KiB, ...), past it segment by segment
        log.append(_batch(150_000), leader_epoch=0)
    for segment in log.apply_retention(0):  # what the log manager does with what retention drops
        segment.store.delete()
    assert _chunks(log) and all(chunk.obj is not block() for chunk in _chunks(log))
    gc.collect()
    assert block() is None


def test_a_refused_mapping_falls_back_to_a_bytearray(monkeypatch):
    """vm.max_map_count reached or no memory to map: the append still lands, as before."""

    def refuse(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(mmap, "mmap", refuse)
    log = MemoryLog("t", 0, LogConfig())
    log.append(_batch(100_000), leader_epoch=0)
    (chunk,) = _chunks(log)
    assert type(chunk) is bytearray and log.log_end_offset == 4
