"""One version number: pyproject.toml's ``version``, read back from the installed metadata by
``trikafka.__version__``, ``trikafka --version`` and the start-up banner, without importing
importlib.metadata (a broker's start would pay for it; tests/test_startup_imports.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import trikafka
from trikafka import _version
from trikafka.cli import main

ROOT = Path(__file__).resolve().parent.parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_package_says_pyprojects_version():
    assert trikafka.__version__ == VERSION


def test_version_flag_prints_it_and_exits_0(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"trikafka {VERSION}\n"


def test_python_m_trikafka_version_reads_no_importlib_metadata(tmp_path):
    code = (
        "import runpy, sys\n"
        "try:\n"
        "    runpy.run_module('trikafka', run_name='__main__', alter_sys=True)\n"
        "finally:\n"
        "    print('importlib.metadata' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"trikafka {VERSION}", "False"]


def _dist_info(entry: Path, name: str, version: str) -> None:
    (entry / name).mkdir(parents=True)
    (entry / name / "METADATA").write_text(
        f"Metadata-Version: 2.4\nName: x\nVersion: {version}\nSummary: s\n\nVersion: not a header\n"
    )


def test_the_first_trikafka_dist_info_along_sys_path_wins(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    _dist_info(first, "trikafka_extras-9.9.dist-info", "9.9")  # another project
    _dist_info(first, "trikafka-2.0.0.dist-info", "2.0.0")
    _dist_info(second, "trikafka-1.0.0.dist-info", "1.0.0")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(tmp_path / "first"), str(second)])
    assert _version.installed_version() == "2.0.0"
    monkeypatch.setattr(sys, "path", [str(second), str(first)])
    assert _version.installed_version() == "1.0.0"


def test_without_metadata_the_version_says_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert _version.installed_version() == _version.UNKNOWN
