"""The public API as users' type checkers see it (``py.typed``), held by mypy.

``check_public_api.py`` touches every public entry point with ``typing.assert_type`` and
``user_app.py`` is a small application (a broker, a producer, a consumer); both must pass
``mypy --strict`` with ``--disallow-any-expr`` (no ``Any`` reaching the user's code from our
signatures). ``make typecheck`` runs the same command.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
FILES = ["tests/type_tests/check_public_api.py", "tests/type_tests/user_app.py"]


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mypy", "--strict", "--disallow-any-expr", "--no-error-summary", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_the_public_api_type_checks_under_strict() -> None:
    result = _mypy(*FILES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_wrong_type_or_an_any_is_caught(tmp_path: Path) -> None:
    # Not vacuous: a wrong assertion, and an Any from a signature, each fail the same command.
    probe = HERE / "_probe_wrong_types.py"
    probe.write_text(
        "from typing import Any, assert_type\n"
        "from trikafka.testing import ThreadedBroker\n"
        "def f(b: ThreadedBroker) -> None:\n"
        "    assert_type(b.bootstrap_servers, int)\n"
        "def vague() -> Any: ...\n"
        "def g() -> None:\n"
        "    print(vague())\n"
    )
    try:
        result = _mypy(str(probe.relative_to(ROOT)))
    finally:
        probe.unlink()
    assert result.returncode == 1
    assert 'Expression is of type "str", not "int"' in result.stdout
    assert 'Expression has type "Any"' in result.stdout


def _signatures(tree: ast.Module, cls: str) -> dict[str, tuple[bool, str, str]]:
    """name -> (async, parameters with defaults as ``...``, return) of ``cls``'s methods."""
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    found = {}
    for f in node.body:
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
            args = f.args
            args.defaults = [ast.Constant(...) for _ in args.defaults]
            args.kw_defaults = [None if d is None else ast.Constant(...) for d in args.kw_defaults]
            found[f.name] = (
                isinstance(f, ast.AsyncFunctionDef), ast.unparse(args), ast.unparse(f.returns) if f.returns else ""
            )
    return found


def test_the_handles_stub_matches_broker_controls() -> None:
    # The thread-hosted handles' methods are made at import time from BrokerControls; the stub
    # that tells type checkers about them must say what BrokerControls says.
    from trikafka.testing.surface import CONTROL_METHODS, TOPIC_METHODS, WAIT_METHODS

    surface = _signatures(ast.parse((ROOT / "trikafka/testing/surface.py").read_text()), "BrokerControls")
    stub_tree = ast.parse((ROOT / "trikafka/testing/hosted_types.pyi").read_text())
    plain = _signatures(stub_tree, "HostedControls")
    coroutines = _signatures(stub_tree, "AsyncHostedControls")
    names = set(CONTROL_METHODS + WAIT_METHODS + TOPIC_METHODS)
    assert set(plain) == names
    assert set(coroutines) == names
    for name in names:
        _, parameters, returns = surface[name]
        assert plain[name] == (False, parameters, returns), name
        assert coroutines[name] == (True, parameters, returns), name


IGNORE = re.compile(r"# type: ignore\[[a-z-]+(?:, ?[a-z-]+)*\]  # \S")


def test_every_type_ignore_names_its_code_and_why() -> None:
    # mypy checks that each ignore is still needed (warn_unused_ignores) and names its code
    # (ignore-without-code); the reason, on the same line, is the house's rule.
    bare = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "trikafka").rglob("*.py*"))
        if path.suffix in (".py", ".pyi")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "# type: ignore" in line and not IGNORE.search(line)
    ]
    assert not bare, "\n".join(bare)
