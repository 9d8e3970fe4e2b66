"""The optional C extension (``_recordwalk.c``): the record walk, decoders and encoder.

One place decides whether it is used, so the broker's walk, the client's decoders and the
encoder switch together: not built (no compiler at install time) or ``TRIKAFKA_PURE_PYTHON``
set means every caller runs its pure-Python reference, with the same answers.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["native_extension"]


def native_extension() -> ModuleType | None:
    """``_recordwalk``, unless it is not built or ``TRIKAFKA_PURE_PYTHON`` asks for the
    pure-Python references."""
    if os.environ.get("TRIKAFKA_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from trikafka.protocol import _recordwalk
    except ImportError:  # no compiler at install time: the pure-Python references, same answers
        return None
    return _recordwalk
