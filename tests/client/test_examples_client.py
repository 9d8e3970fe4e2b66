"""The client examples run as written, and docs/client.md shows them and every client config key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trikafka.client.config import client_config_keys
from trikafka.testing.process import broker_process

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.compat
def test_tcp_example_runs_against_a_broker_process():
    with broker_process("--in-memory") as broker:
        result = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "trio_producer.py"), broker.bootstrap],
            capture_output=True, text=True, timeout=60, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's trikafka
        )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split()
    assert lines[0] == "greetings" and len(result.stdout.splitlines()) == 3


def test_in_memory_example_passes():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:trikafka",
         str(ROOT / "examples" / "test_trio_producer.py")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert "1 passed" in result.stdout, result.stdout + result.stderr


def _code_lines(path: Path) -> list[str]:
    """The example's lines after its module docstring."""
    text = path.read_text()
    body = text[text.index('"""', 3) + 3 :]
    return [line.strip() for line in body.splitlines() if line.strip()]


def test_the_docs_show_both_shapes_and_every_client_key():
    """The producer and the consumer pipeline, each over TCP and in memory; every config key."""
    section = (ROOT / "docs" / "client.md").read_text()
    for example in ("trio_producer.py", "test_trio_producer.py", "test_trio_pipeline.py"):
        assert f'--8<-- "examples/{example}"' in section, f"docs/client.md does not include {example}"
    pipeline = (ROOT / "examples" / "trio_pipeline.py").read_text()
    loop = pipeline[pipeline.index("async def run_pipeline(") : pipeline.index("    return done\n")]
    for line in [text.strip() for text in loop.splitlines() if text.strip()]:
        assert line in section, f"docs/client.md lacks {line!r} of the pipeline example"
    # The client's keys are tabled on docs/client.md, or on docs/trio-client.md beside the
    # calls they bound (group.protocol, group.remote.assignor: KIP-848 membership).
    tables = section + (ROOT / "docs" / "trio-client.md").read_text()
    for key, _default, _roles, _doc in client_config_keys():
        assert f"| `{key}` |" in tables, f"docs/client.md's (or trio-client.md's) client config table lacks {key}"
