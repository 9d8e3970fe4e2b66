"""pytest-xdist: ``pytest -n 2`` on a suite with function-, module- and session-scoped broker
fixtures and the mark (``xdist_suite.py``, the file docs/testing/index.md shows) passes, and
each worker has brokers of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.compat

SUITE = Path(__file__).with_name("xdist_suite.py")

#: A conftest beside the suite that writes down, after each test, which worker ran it and the
#: address of every broker it used (one line each).
WHO_SERVED = '''
import os
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.environ["XDIST_REPORT"], "a") as out:
        for name in ("session_broker", "module_broker", "kafka_broker"):
            handle = item.funcargs.get(name)
            if handle is not None:
                out.write(f"{worker} {name} {item.module.__name__} {handle.bootstrap_servers}\\n")
    yield
'''


def test_two_workers_each_with_their_own_brokers(tmp_path):
    shutil.copy(SUITE, tmp_path / "test_suite.py")
    shutil.copy(SUITE, tmp_path / "test_suite_again.py")  # a second module: a second module broker
    (tmp_path / "conftest.py").write_text(WHO_SERVED)
    report = tmp_path / "served.txt"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "."],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "XDIST_REPORT": str(report)},
    )
    assert run.returncode == 0 and "12 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    rows = [line.split() for line in report.read_text().splitlines()]
    assert {worker for worker, *_ in rows} == {"gw0", "gw1"}
    by_worker: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for worker, name, module, address in rows:
        by_worker[worker][name if name == "kafka_broker" else f"{name}:{module}"].add(address)
    # Each module defines its own session_broker fixture (a copy of one file), so a worker that
    # runs tests of both has one session broker per definition: one per (worker, module), and
    # no worker ever uses another worker's.
    session = {(worker, name): addresses for worker, fixtures in by_worker.items()
               for name, addresses in fixtures.items() if name.startswith("session_broker")}
    assert all(len(addresses) == 1 for addresses in session.values()), session
    workers_of: dict[str, set[str]] = defaultdict(set)
    for (worker, _), addresses in session.items():
        for address in addresses:
            workers_of[address].add(worker)
    assert all(len(workers) == 1 for workers in workers_of.values()), session
    # One broker per (worker, module); a fresh kafka_broker for each of the 4 tests that ask.
    for fixtures in by_worker.values():
        assert all(len(a) == 1 for name, a in fixtures.items() if name.startswith("module_broker")), fixtures
    function = [address for worker, name, _, address in rows if name == "kafka_broker"]
    assert len(function) == 4  # each fresh: the suite's test sees its record first
