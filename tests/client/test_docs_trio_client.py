"""Every Python block of docs/trio-client.md runs (STYLE.md item 18: docs that run)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "trio-client.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def test_the_page_has_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_block_runs(index):
    """Each block in its own interpreter (each calls trio.run), bounded by a timeout."""
    run = subprocess.run([sys.executable, "-c", BLOCKS[index]], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 0, run.stderr
