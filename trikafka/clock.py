"""The broker's one wall clock: epoch milliseconds that advance with trio's clock.

Timestamps (LogAppendTime, retention, segment.ms, offset expiry) need epoch time, but every
timeout must follow trio's clock so that a ``MockClock`` test can move it. :func:`now_ms` reads
trio's clock and adds an offset to the epoch fixed the first time it is read in a trio run (a
``RunVar``: each ``trio.run`` — each test — gets its own, and every broker in one run shares
it). Outside trio (building a broker, a standalone log in plain Python) it is ``time.time()``.

Every part that needs "now" in milliseconds takes a :data:`Clock` and defaults to this one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

__all__ = ["Clock", "now_ms"]

#: A source of "now" in epoch milliseconds.
Clock = Callable[[], float]

_EPOCH_OFFSET_MS: trio.lowlevel.RunVar[float] = trio.lowlevel.RunVar("trikafka_epoch_offset_ms")


def now_ms() -> float:
    """Epoch milliseconds following trio's clock (wall time outside trio)."""
    try:
        now = trio.current_time()
    except RuntimeError:  # not inside trio.run
        return time.time() * 1000
    try:
        offset = _EPOCH_OFFSET_MS.get()
    except LookupError:
        offset = time.time() * 1000 - now * 1000
        _EPOCH_OFFSET_MS.set(offset)
    return offset + now * 1000
