"""examples/trio_pipeline.py runs as written: against ``python -m trikafka``, and its MockClock test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trikafka.testing.process import broker_process

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))  # this checkout's trikafka, whatever is installed


@pytest.mark.compat
def test_pipeline_example_runs_against_a_broker_process(tmp_path):
    with broker_process("--in-memory", cwd=tmp_path) as broker:
        result = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "trio_pipeline.py"), "--bootstrap", broker.address,
             "--input", "words", "--output", "shouted", "--seed", "25", "--idle-timeout", "3"],
            capture_output=True, text=True, timeout=120, cwd=ROOT, env=ENV,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.strip() == "transformed 25 records from words to shouted"
        again = subprocess.run(  # everything was committed: a second run finds nothing to do
            [sys.executable, str(ROOT / "examples" / "trio_pipeline.py"), "--bootstrap", broker.address,
             "--idle-timeout", "2"],
            capture_output=True, text=True, timeout=120, cwd=ROOT, env=ENV,
        )
        assert again.stdout.strip() == "transformed 0 records from words to shouted", again.stderr


def test_pipeline_example_test_passes_in_virtual_time():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:trikafka",
            str(ROOT / "examples" / "test_trio_pipeline.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=ENV,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
