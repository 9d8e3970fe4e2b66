"""The servers under test, each a process of its own on 127.0.0.1, started and stopped by PID.

``trikafka``  ``python -m trikafka --in-memory`` through ``trikafka.testing.process.BrokerProcess``
``trikafka-file``  the same with ``--data-dir`` on a temporary directory: the file log
``mock``      librdkafka's mock cluster (``benchmarks/mock_cluster.py``)
``ceiling``   the bare Trio frame server (``benchmarks/trio_ceiling.py``)
``card``      the same frames through the card's tree of tasks and channels
              (``benchmarks/trio_card_ceiling.py``): the ceiling of trikafka's shape

Every helper gets PR_SET_PDEATHSIG, so a harness killed mid-run does not leave servers
behind; a normal stop closes the helper's stdin (its "stop"), waits, then SIGTERM and
SIGKILL, always by the PID this module started.
"""

from __future__ import annotations

import ctypes
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from trikafka.testing.process import BrokerProcess

__all__ = [
    "CardCeilingTarget",
    "CeilingTarget",
    "EmbeddedTrikafkaTarget",
    "MockTarget",
    "ROOT",
    "Target",
    "TrikafkaFileTarget",
    "TrikafkaTarget",
    "api_versions_request",
    "make_target",
    "recv_frame",
    "request_response",
    "rss_kib",
]

ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # noqa: BLE001 - best effort; the harness still stops it by PID
        pass


def rss_kib(pid: int) -> int:
    """VmRSS of a process, in KiB, from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def api_versions_request(version: int) -> bytes:
    """An ApiVersions request frame: v3 (flexible, header v2) or v0–v2 (header v1)."""
    client_id = b"bench"
    header = struct.pack(">hhih", 18, version, 1, len(client_id)) + client_id
    if version >= 3:
        body = b"\x00" + b"\x06bench" + b"\x041.0" + b"\x00"  # tags; compact strings; tags
    else:
        body = b""
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def recv_frame(sock: socket.socket) -> bytes:
    """One whole response frame (size prefix included) from a blocking socket."""
    data = bytearray()
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a whole response frame")
        data += chunk
    return bytes(data)


def request_response(host: str, port: int, frame: bytes, timeout: float = 10.0) -> bytes:
    """Connect, send one frame, return the response frame (size prefix included)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(frame)
        return recv_frame(sock)


class Target:
    """A server under test. Subclasses start it in ``__init__`` and fill host, port, pid."""

    name = "?"
    label = "?"
    speaks_kafka = True
    api_versions_version = 3  # the highest ApiVersions version it answers properly

    host: str
    port: int
    pid: int
    startup_ms: float | None = None  # in-process start, where the server reports one

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def create_topic(self, name: str, partitions: int) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TrikafkaTarget(Target):
    name = "trikafka"
    label = "trikafka"

    def _storage_args(self) -> tuple[str, ...]:
        return ("--in-memory",)

    def __init__(self) -> None:
        self._broker = BrokerProcess(*self._storage_args(), "--log-level", "WARNING", cwd=ROOT)
        try:
            self._broker.wait_ready(READY_TIMEOUT)
        except BaseException:
            self._broker.kill()
            raise
        self.host, self.port = self._broker.host, self._broker.port
        self.pid = self._broker.process.pid
        self._admin = None

    def _admin_client(self):  # noqa: ANN202
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        return self._admin

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import NewTopic

        futures = self._admin_client().create_topics([NewTopic(name, partitions, 1)])
        futures[name].result(timeout=30)

    def stop(self) -> None:
        self._admin = None  # librdkafka handles close their connections first
        if self._broker.process.poll() is None:
            try:
                self._broker.stop(STOP_TIMEOUT)
            except Exception:  # noqa: BLE001 - killed by stop(); nothing more to do
                pass

    @property
    def output(self) -> str:
        return self._broker.output


class TrikafkaFileTarget(TrikafkaTarget):
    """The file log: segments on a temporary directory, removed when the target stops."""

    name = "trikafka-file"
    label = "trikafka (file log)"

    def _storage_args(self) -> tuple[str, ...]:
        self._data = tempfile.TemporaryDirectory(prefix="trikafka-bench-")
        return ("--data-dir", self._data.name)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self._data.cleanup()


class _HelperTarget(Target):
    """A ``python -m benchmarks.<module>`` helper that prints ``READY host:port [ms]``."""

    module = "?"

    def __init__(self) -> None:
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
            preexec_fn=_die_with_parent,
        )
        self.pid = self.process.pid
        try:
            line = self._readline(READY_TIMEOUT)
            words = line.split()
            if not words or words[0] != "READY":
                raise RuntimeError(f"{self.module} did not start: {line!r} {self.stderr_text()}")
            host, port = words[1].rsplit(":", 1)
            self.host, self.port = host, int(port)
            if len(words) > 2:
                self.startup_ms = float(words[2])
        except BaseException:
            self.stop()
            raise

    def _readline(self, timeout: float) -> str:
        import selectors

        assert self.process.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise TimeoutError(f"{self.module}: no answer within {timeout} s")
        return self.process.stdout.readline()

    def command(self, line: str, timeout: float = 30.0) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self._readline(timeout).strip()

    def stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")[-4000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
            except OSError:
                pass
            try:
                self.process.wait(STOP_TIMEOUT / 2)
            except subprocess.TimeoutExpired:
                self.process.terminate()
                try:
                    self.process.wait(STOP_TIMEOUT / 2)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()


class MockTarget(_HelperTarget):
    name = "mock"
    label = "librdkafka mock"
    module = "benchmarks.mock_cluster"
    api_versions_version = 2  # the mock answers v3 with UNSUPPORTED_VERSION

    def create_topic(self, name: str, partitions: int) -> None:
        answer = self.command(f"topic {name} {partitions}")
        if answer != "ok":
            raise RuntimeError(f"mock topic {name}: {answer}")


class EmbeddedTrikafkaTarget(_HelperTarget):
    """trikafka through ``open_broker()`` in a helper that reports ``broker.statistics()``."""

    name = "trikafka-embedded"
    label = "trikafka (embedded)"
    module = "benchmarks.embedded_broker"

    def statistics(self) -> dict:
        import json

        return json.loads(self.command("stats"))

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


class CeilingTarget(_HelperTarget):
    name = "ceiling"
    label = "Trio ceiling"
    module = "benchmarks.trio_ceiling"
    speaks_kafka = False

    def create_topic(self, name: str, partitions: int) -> None:
        """Any frame gets the fixed answer: there is nothing to create."""


class CardCeilingTarget(CeilingTarget):
    name = "card"
    label = "Trio card ceiling"
    module = "benchmarks.trio_card_ceiling"


_TARGETS = {
    cls.name: cls
    for cls in (TrikafkaTarget, TrikafkaFileTarget, MockTarget, CeilingTarget, CardCeilingTarget)
}


def make_target(name: str) -> Target:
    """Start the named target; returns once it accepts connections."""
    return _TARGETS[name]()
