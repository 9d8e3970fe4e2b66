"""The sparse offset and time indexes, alone."""

from __future__ import annotations

import struct

import pytest

from trikafka.log.index import IndexCorruptError, OffsetIndex, TimeIndex


def test_offset_index_finds_the_greatest_entry_at_or_below():
    index = OffsetIndex(100)
    assert index.lookup(100) == 0 and index.last_entry is None
    index.append(105, 4096)
    index.append(110, 8200)
    assert [index.lookup(o) for o in (99, 100, 104, 105, 109, 110, 10**9)] == [
        0,
        0,
        0,
        4096,
        4096,
        8200,
        8200,
    ]
    assert [index.lookup_position(p) for p in (0, 4095, 4096, 9000)] == [0, 0, 4096, 8200]
    assert index.entries() == [(105, 4096), (110, 8200)]
    with pytest.raises(ValueError):
        index.append(110, 9000)
    with pytest.raises(ValueError):
        index.append(111, 8200)


def test_offset_index_truncates_and_tracks_what_is_unwritten():
    index = OffsetIndex(0)
    for i in range(1, 5):
        index.append(10 * i, 100 * i)
    index.dirty_from = 4  # as after a flush
    index.truncate_to(25)
    assert index.entries() == [(10, 100), (20, 200)]
    assert index.dirty_from == 2
    index.clear()
    assert len(index) == 0


def test_offset_index_uses_kafkas_file_format():
    index = OffsetIndex(1000)
    index.append(1003, 4100)
    index.append(1010, 9000)
    data = index.to_bytes()
    assert data == struct.pack(">iiii", 3, 4100, 10, 9000)
    assert index.to_bytes(1) == struct.pack(">ii", 10, 9000)
    loaded = OffsetIndex.from_bytes(1000, data, log_size=10_000)
    assert loaded.entries() == index.entries()
    assert loaded.dirty_from == 2


@pytest.mark.parametrize(
    "data, log_size",
    [
        (b"\x00" * 7, 100),  # not whole entries
        (struct.pack(">iiii", 5, 100, 4, 200), 1000),  # offsets go back
        (struct.pack(">iiii", 5, 100, 6, 100), 1000),  # positions do not rise
        (struct.pack(">ii", 5, 5000), 1000),  # past the end of the log
        (struct.pack(">ii", -1, 0), 1000),
    ],
)
def test_offset_index_refuses_insane_files(data, log_size):
    with pytest.raises(IndexCorruptError):
        OffsetIndex.from_bytes(0, data, log_size)


def test_time_index_appends_only_rising_timestamps_and_looks_up_strictly_below():
    index = TimeIndex(50)
    index.maybe_append(1000, 52)
    index.maybe_append(1000, 55)  # not higher: skipped
    index.maybe_append(900, 56)  # lower: skipped
    index.maybe_append(2000, 60)
    index.maybe_append(-1, 61)  # no timestamp: skipped
    assert index.entries() == [(1000, 52), (2000, 60)]
    assert index.lookup(1000) is None, "nothing strictly below: scan from the start"
    assert index.lookup(1001) == (1000, 52)
    assert index.lookup(2000) == (1000, 52)
    assert index.lookup(2001) == (2000, 60)
    assert index.last_entry == (2000, 60)
    index.truncate_to(60)
    assert index.entries() == [(1000, 52)]


def test_time_index_file_format_and_sanity():
    index = TimeIndex(10)
    index.maybe_append(123, 11)
    index.maybe_append(456, 15)
    data = index.to_bytes()
    assert data == struct.pack(">qiqi", 123, 1, 456, 5)
    assert TimeIndex.from_bytes(10, data).entries() == index.entries()
    for bad in (data[:-1], struct.pack(">qiqi", 456, 1, 123, 5), struct.pack(">qiqi", 1, 5, 2, 4)):
        with pytest.raises(IndexCorruptError):
            TimeIndex.from_bytes(10, bad)
