"""Small JSON files the security layer keeps in the data directory, replaced atomically.

SCRAM credentials, ACLs, client quotas, client-metrics subscriptions, dynamic broker configs
and finalized feature levels are each one JSON document rewritten whole at every change:
written to a temporary file beside it, fsynced, renamed over the old one, and the directory
fsynced, so a crash leaves either the old file or the new one — never half of each — and the
rename itself survives a power cut. Readable by the
broker's user only (``0o600``): one of them holds salted credentials.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["fsync_directory", "write_json_atomically", "write_text_atomically"]


def write_json_atomically(path: Path, document: Any) -> None:
    """Replace ``path`` with ``document`` as JSON: temporary file, fsync, rename."""
    write_text_atomically(path, json.dumps(document, indent=1))


def write_text_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: temporary file, fsync, rename, directory fsync."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable (a no-op where the platform cannot
    open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
