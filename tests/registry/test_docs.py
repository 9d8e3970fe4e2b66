"""docs/schema-registry.md's code runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_python_blocks_run():
    page = (ROOT / "docs" / "schema-registry.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert blocks
    for block in blocks:
        result = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert result.returncode == 0, result.stderr
        assert "['users-value'] {'name': 'ada'}" in result.stdout
