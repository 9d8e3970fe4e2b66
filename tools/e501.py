"""Reformat, statement by statement, what ruff's E501 flags; nothing else in a file changes.

    python tools/e501.py trikafka tests benchmarks examples tools

For each flagged line it finds the smallest statement holding it (only the header of a ``def``,
``class``, ``if``...: never the body), range-formats that with ``ruff format`` at the project's
line length, and keeps the result only when nothing outside the statement changed and every
line of it now fits. The lines it leaves (long strings, comments, docstrings) are listed for
wrapping by hand. (``--range N:N`` would mean line N, column N to the end of the file.)
"""

from __future__ import annotations

import ast
import collections
import json
import subprocess
import sys
from pathlib import Path

RUFF = str(Path(sys.executable).parent / "ruff")
LINE_LENGTH = 120
COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def flagged(paths: list[str]) -> dict[str, set[int]]:
    """File → the rows ruff's E501 flags."""
    command = [RUFF, "check", "--select", "E501", "--line-length", str(LINE_LENGTH), "--output-format", "json", *paths]
    out = subprocess.run(command, capture_output=True, text=True).stdout
    rows: dict[str, set[int]] = collections.defaultdict(set)
    for diagnostic in json.loads(out or "[]"):
        rows[diagnostic["filename"]].add(diagnostic["location"]["row"])
    return rows


def statement_span(tree: ast.AST, row: int) -> tuple[int, int] | None:
    """The first and last line of the smallest statement (or decorator, or compound header)
    holding ``row``."""
    best = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or not node.lineno <= row <= node.end_lineno:
            continue
        start, end = node.lineno, node.end_lineno
        if isinstance(node, COMPOUND) and row < node.lineno:
            decorators = [d for d in node.decorator_list if d.lineno <= row <= d.end_lineno]
            if not decorators:
                continue
            start, end = decorators[0].lineno, decorators[0].end_lineno
        elif isinstance(getattr(node, "body", None), list) and node.body:
            if row >= node.body[0].lineno:
                continue  # a statement of the body holds it
            end = node.body[0].lineno - 1
        if best is None or end - start < best[1] - best[0]:
            best = (start, end)
    return best


def reformat(path: str, row: int) -> bool:
    """Range-format the statement holding ``row``; True when kept."""
    source = Path(path).read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    span = statement_span(ast.parse(source), row)
    if span is None:
        return False
    start, end = span
    last = lines[end - 1].rstrip("\n")
    command = [RUFF, "format", "--line-length", str(LINE_LENGTH), "--range", f"{start}:1-{end}:{len(last) + 1}",
               "--stdin-filename", path, "-"]
    result = subprocess.run(command, input=source, capture_output=True, text=True)
    if result.returncode != 0:
        return False
    new = result.stdout.splitlines(keepends=True)
    tail = len(lines) - end
    middle = new[start - 1 : len(new) - tail]
    unchanged_outside = new[: start - 1] == lines[: start - 1] and new[len(new) - tail :] == lines[end:]
    fits = all(len(line.rstrip("\n")) <= LINE_LENGTH for line in middle)
    if not unchanged_outside or not fits or middle == lines[start - 1 : end]:
        return False
    Path(path).write_text(result.stdout, encoding="utf-8")
    return True


def main(paths: list[str]) -> None:
    kept, left = 0, []
    for path, rows in flagged(paths).items():
        for row in sorted(rows, reverse=True):  # bottom up: earlier rows keep their numbers
            if reformat(path, row):
                kept += 1
            else:
                left.append(f"{path}:{row}")
    print(f"{kept} statement(s) reformatted; {len(left)} line(s) to wrap by hand", file=sys.stderr)
    print("\n".join(left))


if __name__ == "__main__":
    main(sys.argv[1:] or ["trikafka", "tests", "benchmarks", "examples", "tools"])
