"""The control interface over HTTP: the shell script a non-Python suite would write, run
against ``python -m trikafka --control-listener 127.0.0.1:0``; and its request parser."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from trikafka.testing.control import HttpError, parse_head
from trikafka.testing.process import broker_process

SCRIPT = Path(__file__).with_name("control_test.sh")


@pytest.mark.compat
def test_control_interface_from_a_shell_script(tmp_path):
    assert shutil.which("curl") and shutil.which("kcat"), "curl and kcat are test dependencies"
    with broker_process("--in-memory", "--control-listener", "127.0.0.1:0", cwd=tmp_path) as broker:
        assert broker.control_url is not None, broker.output
        result = subprocess.run(
            ["sh", str(SCRIPT), broker.control_url, broker.address],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert broker.stop() == 0
    assert result.returncode == 0, result.stdout + result.stderr + "\n--- broker:\n" + broker.output
    assert "control interface OK" in result.stdout
    assert "injected error Produce" in broker.output  # the broker's log names the fault


def test_parse_head():
    request = parse_head(b"GET /wait/group-state/?group=g&state=Stable HTTP/1.1\r\nHost: x\r\nContent-Length: 0")
    assert (request.method, request.path) == ("GET", "/wait/group-state")
    assert request.query == {"group": "g", "state": "Stable"}
    assert request.headers["host"] == "x" and request.content_length == 0


@pytest.mark.parametrize(
    ("head", "message"),
    [
        (b"GET /\r\n", "malformed request line"),
        (b"GET / SPDY/3\r\n", "unsupported protocol"),
        (b"GET / HTTP/1.1\r\nno colon", "malformed header"),
    ],
)
def test_parse_head_refuses_garbage(head, message):
    with pytest.raises(HttpError, match=message) as caught:
        parse_head(head)
    assert caught.value.status == 400


CLUSTER_SCRIPT = Path(__file__).with_name("cluster_control_test.sh")


@pytest.mark.compat
def test_cluster_controls_from_a_shell_script(tmp_path):
    """Stop and start a broker, move a leader and a coordinator, shrink and expand an ISR and
    set a round-trip time over HTTP, with kcat seeing each (issue 32, item 3)."""
    assert shutil.which("curl") and shutil.which("kcat"), "curl and kcat are test dependencies"
    args = (
        "--brokers", "3", "--in-memory", "--control-listener", "127.0.0.1:0",
        "--override", "default.replication.factor=3", "--override", "min.insync.replicas=2",
        "--override", "offsets.topic.replication.factor=3",
    )  # fmt: skip
    with broker_process(*args, cwd=tmp_path) as broker:
        assert broker.control_url is not None, broker.output
        result = subprocess.run(
            ["sh", str(CLUSTER_SCRIPT), broker.control_url], capture_output=True, text=True, timeout=300
        )
        assert broker.stop() == 0
    assert result.returncode == 0, result.stdout + result.stderr + "\n--- broker:\n" + broker.output
    assert "cluster controls OK" in result.stdout
    assert re.search(r"broker \d stopped", broker.output) and re.search(r"broker \d started", broker.output)
