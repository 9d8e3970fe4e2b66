"""``trikafka.__version__``: the installed distribution's version, from its metadata.

The one source of the version number is ``version`` in pyproject.toml; building or installing
the package writes it into the distribution's metadata (``trikafka-X.Y.Z.dist-info/METADATA``),
which is what this module reads — so a wheel, an sdist, ``pip install .`` and an editable
install all say the version they were built with.

``importlib.metadata.version("trikafka")`` would give the same answer, but importing
``importlib.metadata`` (email, zipfile, csv, ...) costs a broker process 10-30 ms before its
first answer, and the start-up banner prints the version. So the metadata is found the way
importlib.metadata finds it — the first ``trikafka-*.dist-info`` along ``sys.path`` — with
importlib.metadata itself only when that finds none (an egg, a zip import, ...).
"""

from __future__ import annotations

import os
import sys

__all__ = ["UNKNOWN", "__version__", "installed_version"]

#: When no metadata is found: the package runs from a source tree that was never installed.
UNKNOWN = "0+unknown"

_DIST = "trikafka"


def _dist_info_version(entry: str) -> str | None:
    try:
        names = os.listdir(entry or ".")
    except OSError:  # not a directory (a zip, a missing entry)
        return None
    for name in names:
        stem, dot, suffix = name.rpartition(".")
        if not dot or suffix != "dist-info":
            continue
        project = stem.partition("-")[0]
        if project.lower().replace(".", "_").replace("-", "_") != _DIST:
            continue
        try:
            with open(os.path.join(entry or ".", name, "METADATA"), encoding="utf-8") as metadata:
                for line in metadata:
                    if not line.strip():  # the end of the headers
                        break
                    key, sep, value = line.partition(":")
                    if sep and key.strip().lower() == "version":
                        return value.strip()
        except OSError:
            continue
    return None


def installed_version() -> str:
    """The version in the metadata of the ``trikafka`` distribution Python would import."""
    for entry in sys.path:
        found = _dist_info_version(entry)
        if found:
            return found
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(_DIST)
    except PackageNotFoundError:
        return UNKNOWN


__version__ = installed_version()
