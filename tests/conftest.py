"""Test rules, written where the tests live.

1. Time is trio's: deterministic tests take the ``autojump_clock`` fixture
   (``MockClock(autojump_threshold=0)``) and measure with ``trio.current_time()``. Never
   assert a wall-clock duration; never ``sleep`` to dodge a race — wait on the event.
2. Sockets bind 127.0.0.1 and port 0 only; every test that does real I/O runs under
   ``trio.fail_after`` (or a subprocess timeout) so a bug fails it instead of hanging it.
3. Fakes over mocks: the in-memory listener (``trikafka.testing``) and real clients. A test
   may replace a handler with one that waits on an event it controls; it never mocks the
   code under test.
4. Log lines are counted with ``caplog``, not awaited.
5. A test leaves the root logger as it found it (``restore_root_logger`` below): ``cli.main``
   points it at the stderr pytest captured for that test, a stream closed when the test ends,
   and a later line from any thread (a cluster's, py4j's at exit) would fail on it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from trikafka.protocol.registry import ApiRegistry


@pytest.fixture(scope="session")
def registry() -> ApiRegistry:
    return ApiRegistry()


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    """Put the root logger's handlers and level back after each test (rule 5)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep ``--dist loadgroup``'s groups together under pytest 9.2 (pytest-xdist#1386).

    pytest-xdist 3.8 tells its scheduler a test's ``xdist_group`` by appending ``@group`` to
    ``item._nodeid`` in each worker; since pytest 9.2 an item's ``nodeid`` is read from its
    structured ``item._id``, so the suffix was lost and every grouped test was scheduled alone
    (each worker built the module-scoped wheels and ran the bench harness again). The suffix is
    carried over here, after xdist's hook; where xdist wrote none (no groups, a fixed xdist) this
    does nothing. ``tests/test_xdist_groups.py`` checks that a group runs on one worker."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        legacy = item.__dict__.get("_nodeid")
        if isinstance(legacy, str) and legacy != item.nodeid and hasattr(item, "_id"):
            from _pytest.nodeid import NodeId  # pytest 9.2+, the only one where they differ

            item._id = NodeId.parse(legacy)


def pytest_configure(config: pytest.Config) -> None:
    """The plugin comes through its ``pytest11`` entry point once trikafka is installed with
    it; a checkout whose installed metadata predates the entry point loads it here."""
    if not config.pluginmanager.has_plugin("trikafka"):
        config.pluginmanager.import_plugin("trikafka.testing.pytest_plugin")
