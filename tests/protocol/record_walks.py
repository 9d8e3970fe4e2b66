"""The two record walks, for tests that hold both to the same answers.

``python`` is the reference (``records._py_walk_records``); ``native`` is the C extension
(``trikafka/protocol/_recordwalk.c``), imported directly so that it is tested even when
``TRIKAFKA_PURE_PYTHON`` keeps the broker on the reference walk.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from trikafka.protocol import records

__all__ = ["WALKS", "Walk", "native", "outcome"]

Walk = Callable[[memoryview, int, int, int, int], None]


def _python() -> Walk:
    return records._py_walk_records


def native(name: str) -> Callable[..., object]:
    """``name`` from the C extension, imported directly so that it is tested even when
    ``TRIKAFKA_PURE_PYTHON`` keeps the broker and client on the references; the test fails
    when the extension is not built, and is skipped only where that variable asks for the
    references alone and the extension is missing (never in CI, which builds it)."""
    try:
        from trikafka.protocol import _recordwalk
    except ImportError as error:
        if os.environ.get("TRIKAFKA_PURE_PYTHON", "") not in ("", "0"):
            pytest.skip("TRIKAFKA_PURE_PYTHON is set and the native extension is not built")
        pytest.fail(
            f"the native extension is not built ({error}): `make install`, `pip install -e .` "
            "or, in a checkout, `python setup.py build_ext --inplace` builds it with a C "
            "compiler. Set TRIKAFKA_PURE_PYTHON=1 to test the pure-Python references alone."
        )
    return getattr(_recordwalk, name)


def _native() -> Walk:
    return native("walk_records")  # type: ignore[return-value]


#: name -> a function returning that walk (failing the test when it cannot be had).
WALKS: dict[str, Callable[[], Walk]] = {"python": _python, "native": _native}


def outcome(call: Callable[[], object]) -> tuple[str, str]:
    """("ok", "") or the exception's type name and message: what two walks must agree on."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - any difference between the walks counts
        return type(error).__name__, str(error)
    return "ok", ""
