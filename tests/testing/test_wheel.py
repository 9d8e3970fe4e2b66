"""The plugin outside this repository: build the wheel, install it in a throwaway venv, and
run a user's test file that uses ``kafka_broker`` with confluent-kafka — no conftest.

The venv gets trikafka from the wheel only (``--no-deps``); the dependencies (trio, kio,
confluent-kafka, pytest, ...) come from this interpreter's site-packages through a ``.pth``
line, so nothing is downloaded but the build backend. The user's test prints where trikafka
was imported from, so a test that quietly used this checkout instead would fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

USER_TEST = '''
import trikafka
from confluent_kafka import Producer


def test_plugin_is_installed(kafka_broker):
    print("TRIKAFKA_FROM", trikafka.__file__)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce("outside", b"hello")
    assert producer.flush(30) == 0
    assert kafka_broker.wait_for_high_watermark("outside", 0, at_least=1) == 1


def test_injected_error_reaches_the_client(kafka_broker):
    kafka_broker.inject_error("Produce", "INVALID_REQUIRED_ACKS")
    errors = []
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce("outside", b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == 1 and errors[0] is not None
'''


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, timeout=180, **kwargs)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.mark.compat
def test_the_built_wheel_gives_a_throwaway_project_the_fixtures(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "trikafka", source / "trikafka", ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(wheels)])
    (wheel,) = wheels.glob("trikafka-*.whl")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)])
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    project = tmp_path / "project"
    project.mkdir()
    (project / "test_app.py").write_text(USER_TEST)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    result = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_app.py"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=project,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    imported_from = next(line for line in result.stdout.splitlines() if "TRIKAFKA_FROM" in line)
    assert str(venv) in imported_from, imported_from  # the wheel's trikafka, not this checkout
