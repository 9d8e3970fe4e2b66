"""``python -m trikafka`` as a child process, for tests that need a real broker process.

The banner line ``listening on PLAINTEXT://host:port`` is the readiness signal: the helper
reads stderr until it appears (within a deadline), then keeps draining stderr in a thread so
the child never blocks on a full pipe. Stopping sends SIGTERM (graceful) or SIGKILL (a crash).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

__all__ = ["BrokerProcess", "broker_process"]

_LISTENING = re.compile(r"listening on PLAINTEXT://([\d.]+):(\d+)")


class BrokerProcess:
    def __init__(self, args: Sequence[str] = (), *, startup_timeout: float = 60.0) -> None:
        env = dict(os.environ, COLUMNS="300", PYTHONUNBUFFERED="1")
        self.args = [sys.executable, "-m", "trikafka", "--listeners", "PLAINTEXT://127.0.0.1:0", *args]
        self.process = subprocess.Popen(
            self.args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
        )
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.host = ""
        self.port = 0
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        if not self._ready.wait(startup_timeout):
            self.kill()
            raise RuntimeError("broker did not start:\n" + "".join(self.lines))
        if not self.port:
            raise RuntimeError("broker exited before listening:\n" + "".join(self.lines))

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            if not self.port:
                match = _LISTENING.search(line)
                if match:
                    self.host, self.port = match.group(1), int(match.group(2))
                    self._ready.set()
        self._ready.set()  # exited

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; returns the exit code (killing it if it does not stop)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self._reader.join(5)
        return code

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to flush or clean up."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        self._reader.join(5)


@contextmanager
def broker_process(*args: str, startup_timeout: float = 60.0) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(args, startup_timeout=startup_timeout)
    try:
        yield broker
    finally:
        if broker.process.poll() is None:
            try:
                broker.stop()
            except subprocess.TimeoutExpired:
                pass
