"""PEP 562 re-exports for a package: each public name imported from its module when it is first
looked up, so that importing a package (``trikafka``, ``trikafka.testing``, ``trikafka.log``...)
costs nothing until one of its names is used."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, table: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: a name of ``table`` (name → module)
    is imported from its module at its first lookup and kept in ``namespace`` (the package's
    globals), so later lookups do not come back here."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
