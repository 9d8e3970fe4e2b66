"""Build and drive ``benchmarks/loadgen.c``, the C load generator for tiny requests.

The binary lives in ``benchmarks/build/`` (ignored by git). ``ensure_built()`` compiles it with
gcc when it is missing or older than its source, so ``make bench``, ``make test`` and a bare
``python -m benchmarks`` all work on a fresh clone.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

__all__ = ["BINARY", "SOURCE", "LoadgenError", "check", "ensure_built", "run"]

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "loadgen.c"
BINARY = HERE / "build" / "loadgen"


class LoadgenError(RuntimeError):
    """The load generator could not be built or did not produce a result."""


def ensure_built() -> Path:
    if BINARY.exists() and BINARY.stat().st_mtime >= SOURCE.stat().st_mtime:
        return BINARY
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise LoadgenError("gcc (or cc) is needed to build benchmarks/loadgen.c")
    BINARY.parent.mkdir(parents=True, exist_ok=True)
    built = subprocess.run(
        [compiler, "-O2", "-Wall", "-o", str(BINARY), str(SOURCE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if built.returncode != 0:
        raise LoadgenError(f"building loadgen failed:\n{built.stderr}")
    return BINARY


def _args(
    port: int, api: str, *, host: str, version: int | None, topic: str | None
) -> list[str]:
    args = [str(ensure_built()), "--host", host, "--port", str(port), "--api", api]
    if version is not None:
        args += ["--version", str(version)]
    if topic is not None:
        args += ["--topic", topic]
    return args


def run(
    port: int,
    api: str,
    *,
    connections: int,
    seconds: float,
    warmup: float,
    depth: int = 8,
    host: str = "127.0.0.1",
    version: int | None = None,
    topic: str | None = None,
) -> dict:
    """One load run; returns loadgen's JSON line (``rate`` is responses per second)."""
    args = _args(port, api, host=host, version=version, topic=topic) + [
        "--connections", str(connections),
        "--depth", str(depth),
        "--seconds", str(seconds),
        "--warmup", str(warmup),
    ]
    # loadgen bounds itself (15 s to connect, then warm-up + seconds + 5 s); this is a backstop.
    done = subprocess.run(args, capture_output=True, text=True, timeout=seconds + warmup + 40)
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise LoadgenError(f"loadgen gave no result (exit {done.returncode}): {done.stderr}")
    result = json.loads(lines[-1])
    if result["errors"] or result["connected"] != connections:
        raise LoadgenError(f"loadgen: connections failed: {result} {done.stderr}")
    return result


def check(
    port: int, api: str, *, host: str = "127.0.0.1", version: int | None = None,
    topic: str | None = None,
) -> bytes:
    """One request, the whole response frame (size prefix included)."""
    done = subprocess.run(
        _args(port, api, host=host, version=version, topic=topic) + ["--check"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if done.returncode != 0:
        raise LoadgenError(f"loadgen --check failed: {done.stderr}")
    return bytes.fromhex(done.stdout.strip())
