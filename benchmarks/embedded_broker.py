"""trikafka embedded with ``open_broker()`` in a helper process: start-up time and request timings.

Two jobs, both things the CLI process does not expose over the wire:

``--startup``
    Time from before ``import trikafka`` to ``open_broker()`` being ready (every listener
    bound) inside this process, in a fresh interpreter, so it includes importing trio;
    prints ``{"ready_ms": .., "trio_import_ms": .., "trikafka_import_ms": ..,
    "open_broker_ms": ..}`` and exits. Interpreter start-up is not included: that is the CLI
    figure's job.

(default)
    Serve on 127.0.0.1 (an ephemeral port), print ``READY <host:port>``, then answer one
    command per stdin line: ``stats`` prints one JSON line with ``broker.statistics()``'s
    per-API counts and TotalTimeMs split (Kafka's names; every part's count and mean, so a
    caller can difference two snapshots). ``gc-start`` freezes what is alive (as the CLI
    does once it is up) and from then on times every garbage collection; ``gc-stop`` stops
    and prints ``{"0": [seconds, ...], "1": [...], "2": [...]}``, the pauses per generation
    (``benchmarks.gc_pressure``). EOF on stdin stops the broker gracefully.

The broker is the same code the CLI runs, with the same defaults and in-memory logs; only
the shell differs (no rich logging, no signal handling).
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # before anything of trikafka is imported

import json  # noqa: E402
import sys  # noqa: E402

__all__ = ["main"]


def _startup() -> int:
    import trio

    trio_imported = time.perf_counter()
    from trikafka import open_broker

    imported = time.perf_counter()
    opening = 0.0

    async def run() -> float:
        nonlocal opening
        opening = time.perf_counter()
        async with open_broker(listeners="PLAINTEXT://127.0.0.1:0"):
            return time.perf_counter()

    ready = trio.run(run)
    print(
        json.dumps(
            {
                "ready_ms": (ready - _T0) * 1000,
                "import_ms": (imported - _T0) * 1000,
                "trio_import_ms": (trio_imported - _T0) * 1000,
                "trikafka_import_ms": (imported - trio_imported) * 1000,
                "open_broker_ms": (ready - opening) * 1000,
            }
        )
    )
    return 0


def _request_stats(broker) -> dict:  # noqa: ANN001
    out: dict[str, dict] = {}
    for api, snapshot in broker.statistics().requests.items():
        entry: dict[str, float] = {"Requests": snapshot["Requests"]}
        for part, hist in snapshot.items():
            if part == "Requests":
                continue
            entry[part] = {"count": hist.count, "mean": hist.mean, "p50": hist.p50, "p99": hist.p99}
        out[api] = entry
    return out


class _CollectionTimer:
    """Every garbage collection's pause, per generation, while installed (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._started = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses[info["generation"]].append(time.perf_counter() - self._started)


def _serve() -> int:
    import gc

    import trio

    from trikafka import open_broker

    async def run() -> None:
        async with open_broker(listeners="PLAINTEXT://127.0.0.1:0") as broker:
            print(f"READY 127.0.0.1:{broker.port}", flush=True)
            while True:
                line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
                if not line:
                    return
                command = line.strip()
                if command == "stats":
                    print(json.dumps(_request_stats(broker)), flush=True)
                elif command == "gc-start":
                    gc.freeze()
                    gc.callbacks.append(timer := _CollectionTimer())
                    print("ok", flush=True)
                elif command == "gc-stop":
                    gc.callbacks.remove(timer)
                    print(json.dumps(timer.pauses), flush=True)
                else:
                    print(json.dumps({"error": f"unknown command {line.strip()!r}"}), flush=True)

    trio.run(run)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return _startup() if "--startup" in argv else _serve()


if __name__ == "__main__":
    sys.exit(main())
