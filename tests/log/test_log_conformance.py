"""Both backends pass the same conformance suite (``log_conformance.check_log``)."""

from __future__ import annotations

import pytest

from .log_conformance import CHECKS, check_log


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_conformance(check, log_factory, clock):
    check(log_factory, clock)


def test_whole_suite_on_one_backend_instance_factory(log_factory, clock):
    """The suite as one body, as another backend would run it."""
    check_log(log_factory, clock)
