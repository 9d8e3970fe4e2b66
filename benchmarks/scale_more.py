"""The scale section's other curves: idle connections, group size, fetch sessions."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["more_curves"]


def more_curves(max_partitions: int | None, log: Callable[[str], None], only: tuple[str, ...]) -> list[dict]:
    return []
