"""The examples run as written, and the docs show them (docs/testing/, docs/embedding.md)."""

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
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(ROOT / "examples" / "test_virtual_time.py"),
        ],
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
    [
        "pytest_confluent_kafka.py", "pytest_kafka_python.py", "pytest_aiokafka.py", "pytest_trio_broker.py",
        "pytest_any_cluster.py",
    ],  # fmt: skip
)
def test_pytest_plugin_examples_pass(example):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *_plugin_args(),
            str(ROOT / "examples" / example),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout and "failed" not in result.stdout


def test_the_docs_show_the_pytest_plugin_examples():
    """Each client family's page includes its example file whole (pymdownx.snippets), so what
    the page shows is what the test above runs."""
    pages = {"pytest_confluent_kafka.py": "confluent-kafka.md", "pytest_kafka_python.py": "kafka-python.md",
             "pytest_aiokafka.py": "aiokafka.md", "pytest_trio_broker.py": "trio.md",
             "pytest_any_cluster.py": "external-cluster.md"}
    for example, page in pages.items():
        assert f'--8<-- "examples/{example}"' in (ROOT / "docs" / "testing" / page).read_text(), page


def test_the_docs_show_the_examples_and_every_config_key():
    import importlib.util

    from trikafka.config import config_keys

    assert '--8<-- "examples/embedded.py"' in (ROOT / "docs" / "embedding.md").read_text()
    assert '--8<-- "examples/test_virtual_time.py"' in (ROOT / "docs" / "embedding.md").read_text()
    spec = importlib.util.spec_from_file_location("generated", ROOT / "docs" / "hooks" / "generated.py")
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    page = generated.expand((ROOT / "docs" / "configuration.md").read_text())
    for key, _default, _doc in config_keys():
        assert f"| `{key}` |" in page, f"the configuration reference lacks {key}"
