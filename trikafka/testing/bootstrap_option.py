"""``--kafka-bootstrap`` / ``TRIKAFKA_BOOTSTRAP``: the names, and why a test is skipped under them.

Shared by the pytest plugin (which must import nothing heavy) and the external cluster's
handle (:mod:`trikafka.testing.external`), so both say the same thing.
"""

from __future__ import annotations

__all__ = ["BOOTSTRAP_ENV", "BOOTSTRAP_OPTION", "external_reason"]

BOOTSTRAP_OPTION = "--kafka-bootstrap"
BOOTSTRAP_ENV = "TRIKAFKA_BOOTSTRAP"


def external_reason(what: str, bootstrap: str) -> str:
    """Why a test is skipped on an external cluster: ``what`` needs trikafka's own broker."""
    return (
        f"{what} needs trikafka's own broker; this run tests the external cluster {bootstrap} "
        f"({BOOTSTRAP_OPTION} / {BOOTSTRAP_ENV})"
    )
