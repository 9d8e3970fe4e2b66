"""Fixtures for the log tests: a fake millisecond clock and a factory for each backend.

Rules here, besides those of ``tests/conftest.py``: a log's "now" is a :class:`FakeClock`
the test advances by hand (never the wall clock), and every log a factory makes is closed
at the end of the test.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from trikafka.log import FileLog, Log, LogConfig, MemoryLog
from trikafka.log.memory import Arena

from .log_conformance import FakeClock

LogFactory = Callable[..., Log]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class _RequestBytesMemoryLog(MemoryLog):
    """Appends arrive as ``bytes``, as a Produce request's do: the log copies them (into its
    arena) rather than keeping the caller's ``bytearray``."""

    copies_appends = True

    def append(self, batches, **kwargs):  # noqa: ANN001, ANN003, ANN201
        return super().append(bytes(batches), **kwargs)


@pytest.fixture(params=["memory", "memory-arena", "file"])
def log_factory(request: pytest.FixtureRequest, tmp_path, clock, monkeypatch) -> Iterator[LogFactory]:
    """``make(config=None, *, topic="t", partition=0) -> Log`` for one backend, on ``clock``.

    ``memory-arena``: the memory log with every append copied into its arena, in blocks
    small enough that appends cross from one block to the next (the tests' batches are
    small; real ones reach the arena from 64 KiB).
    """
    made: list[Log] = []
    counter = itertools.count()
    if request.param == "memory-arena":
        monkeypatch.setattr(Arena, "smallest", 1)
        monkeypatch.setattr(Arena, "first", 256)
        monkeypatch.setattr(Arena, "largest", 1024)

    def make(config: LogConfig | None = None, *, topic: str = "t", partition: int = 0) -> Log:
        if request.param == "memory":
            log: Log = MemoryLog(topic, partition, config, clock=clock)
        elif request.param == "memory-arena":
            log = _RequestBytesMemoryLog(topic, partition, config, clock=clock)
        else:
            log = FileLog.open(
                tmp_path / f"d{next(counter)}", topic, partition, config, clock=clock
            )
        made.append(log)
        return log

    yield make
    for log in made:
        log.close()
