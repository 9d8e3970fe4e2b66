"""``python -m trikafka`` as a child process, for tests that need a real broker process.

The broker prints a banner once every listener is bound (``  listening on
PLAINTEXT://127.0.0.1:<port>``); that line is the readiness signal, so no caller sleeps or
polls a port. One reader thread owns the child's output (stdout and stderr share the pipe)
from the first byte to EOF: it finds the banner, keeps every line for assertions and error
messages, and keeps the pipe drained so the broker never blocks writing a log line.
``stop()`` sends SIGTERM (a graceful stop), ``kill()`` SIGKILL (a crash).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["BrokerProcess", "BrokerProcessError", "broker_process"]

READY_TIMEOUT = 60
STOP_TIMEOUT = 20

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# The banner line, not the log line: rich's log handler puts time and level in front.
_BANNER = re.compile(r"^\s+listening on ([A-Za-z0-9_-]+)://([\d.]+):(\d+)\s*$")
_BANNER_END = re.compile(r"^\s+data: ")  # printed after the last listener
_CLUSTER = re.compile(r"broker \d+ ready \S+ cluster (\S+)")
_CONTROL = re.compile(r"^\s+control on (http://[\d.]+:\d+)\s*$")


class BrokerProcessError(RuntimeError):
    """The broker process did not start, or did not stop when asked."""


class BrokerProcess:
    def __init__(
        self,
        *extra_args: str,
        cwd: str | Path | None = None,
        preexec_fn: Callable[[], object] | None = None,
    ) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1", NO_COLOR="1")
        # No COLUMNS: into a pipe the broker writes whole, unwrapped lines whatever the width
        # (trikafka.output); the tests see the output a log file gets.
        env.pop("COLUMNS", None)
        # The child runs the trikafka this process imported (a checkout, not whatever an
        # editable install elsewhere points at), whatever its working directory.
        here = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        env.pop("FORCE_COLOR", None)
        self.args = [
            sys.executable,
            "-m",
            "trikafka",
            "--listeners",
            "PLAINTEXT://127.0.0.1:0",
            *extra_args,
        ]
        self.process = subprocess.Popen(
            self.args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            preexec_fn=preexec_fn,  # e.g. a low RLIMIT_NOFILE for resilience tests
        )
        self.host: str | None = None
        self.port: int | None = None
        self.cluster_id: str | None = None
        self.control_url: str | None = None  # with --control-listener
        #: listener name → (host, port), every listener of the banner (SSL, SASL_SSL, …).
        self.endpoints: dict[str, tuple[str, int]] = {}
        self._lines: list[str] = []
        self._lock = threading.Condition()
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._drain, name="broker-output", daemon=True)
        self._reader.start()

    @property
    def address(self) -> str:
        """``host:port`` of the PLAINTEXT listener (else the first one): a bootstrap server."""
        if self.port is None:
            raise BrokerProcessError("the broker is not ready")
        return f"{self.host}:{self.port}"

    bootstrap = address

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:  # until EOF: the child exited
            line = _ANSI.sub("", raw.decode("utf-8", "replace")).rstrip()
            with self._lock:
                self._lines.append(line)
                self._lock.notify_all()
            if self.cluster_id is None and (match := _CLUSTER.search(line)):
                self.cluster_id = match.group(1)
            if self.control_url is None and (match := _CONTROL.match(line)):
                self.control_url = match.group(1)
            if match := _BANNER.match(line):
                name, host, port = match.group(1), match.group(2), int(match.group(3))
                self.endpoints.setdefault(name, (host, port))
                if self.port is None and name == "PLAINTEXT":
                    self.host, self.port = host, port
            if self.endpoints and not self._ready.is_set() and _BANNER_END.match(line):
                if self.port is None:  # no PLAINTEXT listener: the first one
                    self.host, self.port = next(iter(self.endpoints.values()))
                self._ready.set()
        self._ready.set()  # wake a waiter: the process ended before (or after) the banner
        with self._lock:
            self._lock.notify_all()

    @property
    def output(self) -> str:
        with self._lock:
            return "\n".join(self._lines)

    def wait_for_output(self, text: str, timeout: float = READY_TIMEOUT, *, count: int = 1) -> str:
        """Block until ``count`` lines containing ``text`` were printed; return the last."""

        def found() -> str | None:
            lines = [line for line in self._lines if text in line]
            return lines[count - 1] if len(lines) >= count else None

        with self._lock:
            if not self._lock.wait_for(lambda: found() or self.process.poll() is not None, timeout):
                raise BrokerProcessError(f"no {text!r} within {timeout} s; output:\n{self.output}")
            line = found()
        if line is None:
            raise BrokerProcessError(f"exited before printing {text!r}; output:\n{self.output}")
        return line

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> BrokerProcess:
        if not self._ready.wait(timeout):
            self.kill()
            raise BrokerProcessError(f"no banner within {timeout} s; output:\n{self.output}")
        if self.port is None:
            self.kill()
            raise BrokerProcessError(
                f"broker exited ({self.process.returncode}) before its banner:\n{self.output}"
            )
        return self

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM, then the exit code; killed (and an error) if it does not stop in time."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise BrokerProcessError(
                f"broker ignored SIGTERM for {timeout} s; output:\n{self.output}"
            ) from None
        self._reader.join(timeout)
        return code

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to flush or clean up."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._reader.join(STOP_TIMEOUT)


@contextmanager
def broker_process(
    *extra_args: str,
    cwd: str | Path | None = None,
    preexec_fn: Callable[[], object] | None = None,
) -> Iterator[BrokerProcess]:
    """A ready broker process for the block; stopped (or killed) on exit."""
    broker = BrokerProcess(*extra_args, cwd=cwd, preexec_fn=preexec_fn)
    try:
        broker.wait_ready()
        yield broker
    finally:
        if broker.process.poll() is None:
            try:
                broker.stop()
            except BrokerProcessError:
                pass
