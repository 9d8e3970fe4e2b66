"""The code style holds in the suite: ``ruff check`` with pyproject's rules, lines up to 120 columns.

Long lines are wrapped (``tools/e501.py`` reformats what a formatter can), never folded; the
500-line file and 300-line class limits of ``test_layers.py`` are met by splitting code.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).parent / "ruff"
PATHS = [name for name in ("trikafka", "tests", "examples", "benchmarks", "tools") if (ROOT / name).is_dir()]


def _ruff_check(*args: str, source: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(RUFF), "check", "--no-cache", "--output-format", "concise", *args]
    return subprocess.run(command, cwd=ROOT, input=source, capture_output=True, text=True, timeout=300)


def test_ruff_check_is_clean():
    result = _ruff_check(*PATHS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_line_of_121_columns_is_refused_and_one_of_120_passes():
    # Not vacuous: the project's own configuration (found from ROOT) flags E501 past 120.
    fits = 'TEXT = "' + "x" * (120 - len('TEXT = ""')) + '"\n'
    assert len(fits.rstrip("\n")) == 120
    too_long = fits.replace('"x', '"xx', 1)
    passed = _ruff_check("--stdin-filename", "tests/_probe.py", "-", source=fits)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    refused = _ruff_check("--stdin-filename", "tests/_probe.py", "-", source=too_long)
    assert refused.returncode == 1 and "E501" in refused.stdout, refused.stdout + refused.stderr
