"""The README's examples run as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_embedded_example_runs():
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "embedded.py")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("cluster ")
    assert "('127.0.0.1'," in result.stdout


def test_virtual_time_example_passes():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "examples" / "test_virtual_time.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def _plugin_args() -> list[str]:
    """Load the pytest plugin by name where the installed metadata predates its entry point."""
    from importlib.metadata import entry_points

    return [] if entry_points(group="pytest11", name="trikafka") else ["-p", "trikafka.testing.pytest_plugin"]


@pytest.mark.parametrize(
    "example",
    ["pytest_confluent_kafka.py", "pytest_kafka_python.py", "pytest_aiokafka.py", "pytest_trio_broker.py"],
)
def test_pytest_plugin_examples_pass(example):
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_plugin_args(), str(ROOT / "examples" / example)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout and "failed" not in result.stdout


def test_readme_shows_the_pytest_plugin_examples():
    readme = (ROOT / "README.md").read_text()
    for example in ("pytest_confluent_kafka.py", "pytest_aiokafka.py", "pytest_trio_broker.py"):
        body = (ROOT / "examples" / example).read_text().split('"""', 2)[2]
        for line in body.splitlines():
            if line.strip():
                assert line.strip() in readme, f"README's {example} differs: {line!r}"


def test_readme_shows_the_examples_and_every_config_key():
    from trikafka.config import config_keys

    readme = (ROOT / "README.md").read_text()
    embedded = (ROOT / "examples" / "embedded.py").read_text()
    for line in embedded.splitlines():
        if line.strip() and not line.startswith('"""') and "Embed a broker" not in line:
            assert line.strip() in readme, f"README's embedding example differs: {line!r}"
    # A key may be documented in README's table or in a page under docs/ (README is being
    # turned into a docs site; new keys are tabled on their feature's page meanwhile).
    pages = readme + "".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
    for key, _default, _doc in config_keys():
        assert f"| `{key}` |" in pages, f"neither README's configuration table nor docs/ lists {key}"
