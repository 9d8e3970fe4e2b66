"""The log cleaner's files, and finishing a swap a crash interrupted (Kafka's recovery rules).

A cleaning writes ``<base>.log.cleaned``; renaming it ``<base>.log.swap`` is the commit point;
then the replaced segments become ``.deleted`` and the swap becomes ``<base>.log``. At start,
before a partition's segments are listed (``FileLog``):

* a ``.cleaned`` file is an unfinished cleaning: it is removed (with the other leftovers);
* a ``.swap`` file is a committed one: every segment whose base offset lies in the swap's
  offset range ``[base, next offset)`` is removed — those are exactly the segments it
  replaces, since a cleaned segment holds a subset of their offsets — and the swap is renamed
  ``<base>.log``. Its indexes are rebuilt by the normal recovery of that segment.

The swap's next offset comes from walking its batch headers (base offset, length and last
offset delta of each batch; a torn tail ends the walk, and recovery then truncates it).

This module imports nothing from ``file.py`` (which calls it), so there is no cycle.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

__all__ = ["CLEANED_SUFFIX", "SWAP_SUFFIX", "complete_swaps", "fsync_directory"]

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_LOG = ".log"
_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")
_OFFSET_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA_AT = 23


def fsync_directory(directory: Path) -> None:
    """Make renames in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _next_offset(path: Path, base: int) -> int:
    next_offset = base
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        position = 0
        while position + _LAST_OFFSET_DELTA_AT + 4 <= size:
            f.seek(position)
            head = f.read(_LAST_OFFSET_DELTA_AT + 4)
            batch_base, length = _OFFSET_LENGTH.unpack_from(head)
            if length <= 0 or position + 12 + length > size:
                break
            (delta,) = struct.unpack_from(">i", head, _LAST_OFFSET_DELTA_AT)
            next_offset = batch_base + delta + 1
            position += 12 + length
    return next_offset


def complete_swaps(directory: Path) -> int:
    """Finish every committed swap in a partition directory; returns how many."""
    names = sorted(p.name for p in directory.iterdir())
    swaps = [n for n in names if n.endswith(_LOG + SWAP_SUFFIX) and n[:20].isdigit()]
    for name in swaps:
        base = int(name[:20])
        swap = directory / name
        end = max(_next_offset(swap, base), base + 1)
        for other in names:
            stem, dot, suffix = other.partition(".")
            if dot and f".{suffix}" in _SEGMENT_SUFFIXES and len(stem) == 20 and stem.isdigit():
                if base <= int(stem) < end:
                    (directory / other).unlink(missing_ok=True)
        swap.rename(directory / f"{base:020d}{_LOG}")
    if swaps:
        fsync_directory(directory)
    return len(swaps)
