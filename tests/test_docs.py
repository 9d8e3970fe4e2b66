"""The docs cannot rot: every ``python`` and shell block of ``docs/`` and ``README.md`` runs here.

The conventions (``docs/writing-docs.md``): each page gets a fresh broker process, shared by its
blocks in order; ``127.0.0.1:9092`` in a block becomes that broker's address, the commands' ``-b``
defaults to it (``TRIKAFKA_BOOTSTRAP_SERVERS``) and ``$CONTROL`` is its control listener. A block
preceded by ``<!-- fragment: why -->`` is not run; a Python block that defines ``test_*``
functions is run by pytest (the plugin loaded, ``trio_mode`` on), as a user's test file; a block
that only includes a file (``--8<-- "examples/x.py"``) must name a file the suite runs elsewhere.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from trikafka.testing.process import BrokerProcess

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
RUNNABLE = {"python": "python", "py": "python", "sh": "shell", "bash": "shell", "shell": "shell"}
FRAGMENT = re.compile(r"^<!--\s*fragment:\s*(?P<why>.+?)\s*-->\s*$")
INCLUDE = re.compile(r'^--8<--\s+"(?P<path>[^"]+)"\s*$')
DEV_BROKER = "127.0.0.1:9092"
TEST_FUNCTION = re.compile(r"^(async )?def test_", re.M)


@attrs.frozen
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    kind: str  # "python" or "shell"
    body: str
    fragment: str | None  # why it is not run

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def includes(self) -> list[str]:
        lines = [line for line in self.body.splitlines() if line.strip()]
        found = [INCLUDE.match(line) for line in lines]
        return [m["path"] for m in found if m] if lines and all(found) else []


def blocks_of(page: Path) -> list[Block]:
    """The runnable fenced blocks of a Markdown page, in order."""
    lines = page.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        fence = re.match(r"^(```+)\s*([\w+-]*)", lines[i])
        if not fence:
            i += 1
            continue
        end = next(
            (j for j in range(i + 1, len(lines)) if lines[j].startswith(fence[1]) and not lines[j].strip("`")),
            len(lines),
        )
        kind = RUNNABLE.get(fence[2].lower())
        if kind:
            before = FRAGMENT.match(lines[i - 1]) if i else None
            out.append(
                Block(page, i + 1, kind, "\n".join(lines[i + 1 : end]) + "\n", before["why"] if before else None)
            )
        i = end + 1
    return out


ALL = [block for page in PAGES for block in blocks_of(page)]
PAGES_TO_RUN = sorted({b.page for b in ALL if not b.fragment and not b.includes})


def test_the_collector_finds_the_blocks():
    assert len(ALL) >= 20 and any(b.fragment for b in ALL) and any(b.includes for b in ALL)
    assert len(PAGES_TO_RUN) >= 5


@pytest.mark.parametrize("block", [b for b in ALL if b.includes], ids=str)
def test_an_included_file_is_run_by_the_suite(block):
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py") if p.name != "test_docs.py")
    for path in block.includes:
        assert (ROOT / path).is_file(), f"{block}: {path} does not exist"
        assert Path(path).name in tests, f"{block}: no test runs {path}"


def _plugin_args() -> list[str]:
    """Load the pytest plugin by name where the installed metadata predates its entry point."""
    from importlib.metadata import entry_points

    return [] if entry_points(group="pytest11", name="trikafka") else ["-p", "trikafka.testing.pytest_plugin"]


def _env(broker: BrokerProcess, control: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["TRIKAFKA_BOOTSTRAP_SERVERS"] = broker.address
    env["CONTROL"] = control
    env["NO_COLOR"] = "1"
    return env


@pytest.mark.parametrize("page", PAGES_TO_RUN, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_blocks_of_a_page_run(page, tmp_path):
    broker = BrokerProcess("--in-memory", "--control-listener", "127.0.0.1:0", cwd=tmp_path)
    try:
        broker.wait_ready()
        control = re.search(r"http://[\d.]+:\d+", broker.wait_for_output("control interface on"))[0]
        env = _env(broker, control)
        for block in blocks_of(page):
            if block.fragment or block.includes:
                continue
            body = block.body.replace(DEV_BROKER, broker.address)
            if block.kind == "python":
                script = tmp_path / f"block_{block.line}.py"
                script.write_text(body)
                command = [sys.executable, str(script)]
                if TEST_FUNCTION.search(body):  # a test as a user writes it: run by pytest
                    script = script.rename(tmp_path / f"test_block_{block.line}.py")
                    command = [
                        sys.executable,
                        "-m",
                        "pytest",
                        "-q",
                        "-p",
                        "no:cacheprovider",
                        "-o",
                        "trio_mode=true",
                        *_plugin_args(),
                        str(script),
                    ]
            else:
                command = ["bash", "-e", "-o", "pipefail", "-c", body]
            result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
            assert result.returncode == 0 and "no tests ran" not in result.stdout, (
                f"{block} failed ({result.returncode}):\n{body}\n--- stdout\n{result.stdout}\n--- "
                f"stderr\n{result.stderr}"
            )
    finally:
        broker.stop(15)


def test_the_site_builds_strictly(tmp_path):
    """``mkdocs build --strict`` (what ``make docs`` runs): a broken link or anchor, a page on
    disk missing from the nav, a generated table or an API reference that fails, fails here."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    page = (tmp_path / "site" / "configuration" / "index.html").read_text()
    assert "transaction.max.timeout.ms" in page and "retention.ms" in page  # the generated tables
    assert "open_test_broker" in (tmp_path / "site" / "reference" / "testing" / "index.html").read_text()
