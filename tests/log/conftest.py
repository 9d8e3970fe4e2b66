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

from .log_conformance import FakeClock

LogFactory = Callable[..., Log]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", "file"])
def log_factory(request: pytest.FixtureRequest, tmp_path, clock) -> Iterator[LogFactory]:
    """``make(config=None, *, topic="t", partition=0) -> Log`` for one backend, on ``clock``."""
    made: list[Log] = []
    counter = itertools.count()

    def make(config: LogConfig | None = None, *, topic: str = "t", partition: int = 0) -> Log:
        if request.param == "memory":
            log: Log = MemoryLog(topic, partition, config, clock=clock)
        else:
            log = FileLog.open(
                tmp_path / f"d{next(counter)}", topic, partition, config, clock=clock
            )
        made.append(log)
        return log

    yield make
    for log in made:
        log.close()
