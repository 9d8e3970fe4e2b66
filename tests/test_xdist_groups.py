"""``--dist loadgroup`` keeps an ``xdist_group`` on one worker, as ``make check`` and ``make test``
rely on (a module's costly fixture built once; tests that check what an earlier one left).

A throwaway suite with this suite's conftest hook, under ``pytest -n 2 --dist loadgroup``:
two modules' tests in one group, and ungrouped tests beside them for the other worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONFTEST = 'pytest_plugins = ["tests.conftest"]  # this suite\'s hooks\n'

GROUPED = '''
import os

import pytest

pytestmark = pytest.mark.xdist_group("shared")


@pytest.mark.parametrize("n", range(4))
def test_grouped(n):
    with open(os.environ["WORKERS_REPORT"], "a") as out:
        out.write(f"{os.environ['PYTEST_XDIST_WORKER']} {__name__} {n}\\n")
'''

FREE = '''
import pytest


@pytest.mark.parametrize("n", range(8))
def test_free(n):
    pass
'''


def test_a_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_first.py").write_text(GROUPED)
    (tmp_path / "test_second.py").write_text(GROUPED)
    (tmp_path / "test_free.py").write_text(FREE)
    report = tmp_path / "workers.txt"
    env = {**os.environ, "WORKERS_REPORT": str(report)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "."],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env,
    )
    assert run.returncode == 0 and "16 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    rows = [line.split() for line in report.read_text().splitlines()]
    assert len(rows) == 8
    assert len({worker for worker, _, _ in rows}) == 1, rows
