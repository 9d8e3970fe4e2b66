"""The root logger outlives a test: what a test points it at must not outlive the test.

``cli.main`` points the root logger at the stderr pytest captured for the test; pytest closes
that stream when the test ends, and a line logged later — from a cluster's thread, from py4j
at exit — printed "--- Logging error ---" instead. tests/conftest.py puts the root logger back
after every test; the second test here fails without it.
"""

from __future__ import annotations

import logging

import pytest

from trikafka import cli

#: The two run in this order on one worker (``--dist loadgroup``): the second checks what the
#: first left behind.
pytestmark = pytest.mark.xdist_group("root-logger")


def test_the_cli_points_the_root_logger_at_this_tests_stderr(capsys) -> None:
    assert cli.main(["--brokers", "0", "--in-memory"]) == 2  # logging is set up before the config is read
    assert any(isinstance(h, logging.StreamHandler) for h in logging.getLogger().handlers)


def test_no_handler_of_an_earlier_test_is_left_on_the_root_logger() -> None:
    streams = [getattr(h, "stream", None) for h in logging.getLogger().handlers if type(h) is logging.StreamHandler]
    assert [s for s in streams if getattr(s, "closed", False)] == []
    assert not any(h.formatter is not None and "%(asctime)s %(levelname)s %(name)s" in (h.formatter._fmt or "")
                   for h in logging.getLogger().handlers)
