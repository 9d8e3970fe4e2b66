"""A port that is taken fails the start with one line naming it, before anything is said to
have started (the listeners, metrics.port's HTTP server, the control listener)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _start_with(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trikafka", "--in-memory", *args],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.parametrize("which", ["listener", "metrics.port", "control listener"])
@pytest.mark.parametrize("brokers", [1, 2])
def test_a_taken_port_is_named_and_nothing_started_before(tmp_path, which, brokers):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        listeners = f"PLAINTEXT://127.0.0.1:{port if which == 'listener' else 0}"
        args = [
            "--listeners",
            listeners,
            "--brokers",
            str(brokers),
            "--override",
            f"metrics.port={port if which == 'metrics.port' else 0}",
        ]
        if which == "control listener":
            args += ["--control-listener", f"127.0.0.1:{port}"]
        result = _start_with(tmp_path, *args)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("trikafka: cannot start: [Errno 98] Address already in use"), last
    assert f"127.0.0.1:{port}" in last
    assert "Traceback" not in result.stderr
    for claim in ("listening on", "started", " ready", "HTTP served at", "control interface on"):
        assert claim not in result.stderr, f"{claim!r} logged before the start failed:\n{result.stderr}"
