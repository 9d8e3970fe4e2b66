"""The memory log's arena: large appends copied once into populated blocks, kept as views.

The conformance suite runs the whole log contract over the arena (``memory-arena`` in
``conftest.py``); these tests pin what is the arena's own: which appends go there, how
blocks grow, that a block is let go with the last chunk carved from it, and that blocks
let go of wait in the pool for the next arena while a log manager runs.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import mmap
import weakref

import pytest
import trio

from trikafka.log import LogConfig, LogManager, MemoryLog
from trikafka.log import memory as memory_module
from trikafka.log.memory import BLOCKS, Arena, BlockPool
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
    assert isinstance(large, memoryview) and isinstance(large.obj, ctypes.Array)  # the block
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


def _resident_pages(block: ctypes.Array) -> int:
    """Pages of ``block`` in memory (Linux ``mincore``; smaps would merge neighbouring
    mappings into one region)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
    pages = -(-len(block) // mmap.PAGESIZE)
    vector = ctypes.create_string_buffer(pages)
    assert libc.mincore(ctypes.addressof(block), len(block), vector) == 0, ctypes.get_errno()
    return sum(byte & 1 for byte in vector.raw)


def test_a_block_is_populated_as_it_is_used():
    """Only what was copied into a block is resident: its unused end costs no memory (a
    partition's last block is mostly empty). Bounds, not exact counts: where transparent
    huge pages of several sizes are on, the kernel faults in up to a folio at a time."""
    assert memory_module._MADV_POPULATE_WRITE is not None  # Linux 5.14+: CI has it
    arena = Arena()
    chunk = arena.copy(b"x" * 100_000)
    assert len(chunk.obj) == Arena.first
    whole = Arena.first // mmap.PAGESIZE
    assert -(-100_000 // mmap.PAGESIZE) <= _resident_pages(chunk.obj) <= whole // 2
    more = arena.copy(b"y" * 100_000)
    assert more.obj is chunk.obj
    assert _resident_pages(chunk.obj) >= -(-200_000 // mmap.PAGESIZE)
    assert bytes(chunk[-1:]) + bytes(more[:1]) == b"xy"


def test_without_populate_write_a_block_is_mapped_populated(monkeypatch):
    """A kernel before 5.14: each block is mapped with MAP_POPULATE, all of it at once."""
    monkeypatch.setattr(memory_module, "_MADV_POPULATE_WRITE", None)
    chunk = Arena().copy(b"x" * 100_000)
    assert _resident_pages(chunk.obj) == Arena.first // mmap.PAGESIZE


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 4 KiB, so that a few appends fill several; a pool of its own in BLOCKS."""
    monkeypatch.setattr(Arena, "smallest", 1)
    monkeypatch.setattr(Arena, "first", 4096)
    monkeypatch.setattr(Arena, "largest", 4096)
    monkeypatch.setattr(BLOCKS, "limit", BLOCKS.limit)
    BLOCKS.clear()
    yield
    BLOCKS.clear()


def _fill_blocks(arena: Arena, blocks: int) -> list[memoryview]:
    return [arena.copy(bytes([i]) * 4096) for i in range(blocks)]


def test_a_block_let_go_is_the_next_arenas_while_a_log_manager_runs(small_blocks):
    with BLOCKS.in_use():
        chunks = _fill_blocks(Arena(), 3)
        addresses = {ctypes.addressof(chunk.obj) for chunk in chunks}
        del chunks
        assert BLOCKS.size == 3 * 4096
        again = _fill_blocks(Arena(), 3)
        assert {ctypes.addressof(chunk.obj) for chunk in again} == addresses
        assert [bytes(chunk[:1]) for chunk in again] == [b"\0", b"\1", b"\2"]  # copied over
        assert BLOCKS.size == 0
    # The last user out: a block let go of now is unmapped, not kept.
    del again
    assert BLOCKS.size == 0


def test_a_block_from_the_pool_is_not_populated_again(small_blocks, monkeypatch):
    """Its pages are in place from its last use: no ``madvise`` over resident memory."""
    populates: list[int] = []
    populate = Arena._populate
    monkeypatch.setattr(Arena, "_populate", lambda self, end: populates.append(end) or populate(self, end))
    with BLOCKS.in_use():
        chunks = _fill_blocks(Arena(), 2)
        new_blocks = len(populates)
        del chunks
        again = _fill_blocks(Arena(), 2)
        assert [bytes(chunk[:1]) for chunk in again] == [b"\0", b"\1"]
        assert len(populates) == new_blocks  # none for the two blocks reused
    assert new_blocks == (2 if memory_module._MADV_POPULATE_WRITE is not None else 0)


def test_a_block_waits_one_trim_unused_and_goes_at_the_next(small_blocks):
    with BLOCKS.in_use():
        chunk = Arena().copy(b"x" * 4096)
        del chunk
        assert BLOCKS.size == 4096
        BLOCKS.trim()  # came back within this interval: kept one more
        assert BLOCKS.size == 4096
        BLOCKS.trim()
        assert BLOCKS.size == 0


def test_the_pool_keeps_no_more_than_its_limit(small_blocks):
    BLOCKS.limit = 2 * 4096
    with BLOCKS.in_use():
        chunks = _fill_blocks(Arena(), 5)
        del chunks
        assert BLOCKS.size == 2 * 4096


def test_only_full_size_blocks_wait():
    pool = BlockPool()
    with pool.in_use():
        pool.give_back(mmap.mmap(-1, Arena.largest // 2))
        assert pool.size == 0
        block = mmap.mmap(-1, Arena.largest)
        pool.give_back(block)
        assert pool.take(Arena.largest // 2) is None and pool.size == 0  # another size: gone
        assert block.closed


async def test_retention_under_a_running_log_manager_hands_its_blocks_to_new_appends(
    small_blocks, autojump_clock
):
    """The cycle the pool is for: retention lets go of segments, the next appends reuse
    their blocks instead of mapping new memory."""
    config = LogConfig(segment_bytes=3 * 4096, retention_bytes=0, retention_ms=-1)
    manager = LogManager(None, config, clock=lambda: trio.current_time() * 1000)
    manager.retention_check_interval_ms = 1_000
    log = manager.get_or_create_log("t", 0)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        for _ in range(6):
            log.append(_batch(4096 - 70, count=1), leader_epoch=0)
        first = {ctypes.addressof(chunk.obj) for chunk in _chunks(log)}
        await trio.sleep(1.5)  # one retention check: all but the active segment goes
        waiting = BLOCKS.size
        assert log.log_start_offset > 0 and waiting >= 3 * 4096
        for _ in range(3):
            log.append(_batch(4096 - 70, count=1), leader_epoch=0)
        assert BLOCKS.size == waiting - 3 * 4096
        assert {ctypes.addressof(chunk.obj) for chunk in _chunks(log)[-3:]} <= first
        nursery.cancel_scope.cancel()
    assert BLOCKS.size == 0  # the manager stopped: nothing kept
