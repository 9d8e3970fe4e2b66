"""What the compat test modules share: bounded waits and the external tools they drive."""

from __future__ import annotations

import shutil
import time

__all__ = ["KCAT", "NODE", "TIMEOUT", "Deadline"]

TIMEOUT = 30  # seconds: any one client operation, subprocess, consume loop or wait for a state
KCAT = shutil.which("kcat") or "/usr/bin/kcat"
NODE = shutil.which("node") or "node"


class Deadline:
    """A wall-clock budget for waiting on an external process or client."""

    def __init__(self, seconds: float = TIMEOUT) -> None:
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def __bool__(self) -> bool:
        return self.remaining() > 0
