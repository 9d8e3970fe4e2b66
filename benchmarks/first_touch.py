"""What new memory costs this machine: ``python -m benchmarks.first_touch``.

Not part of ``make bench`` (no broker): it measures the floor under the "server CPU per GB
produced" rows. A broker that keeps what it is sent touches new memory for every byte: the
in-memory log keeps the producer's batches in new anonymous memory, the file log writes them
into new page-cache pages. What that costs is the machine's, not the broker's, and on a VM it
can dwarf everything else: under Firecracker with virtio-balloon free page reporting, a page
the guest freed and reported is given back to the host, and the first write to it again is a
fault the host serves (its cost shows as the guest's system time, inside the copy).

Three figures, each CPU seconds (user + system) of this process per GB written, one per step
of ``--step-mib``:

``new page cache``  ``os.pwrite`` of ``--chunk-kib`` blocks at the end of a new file, as the
                    file log appends (its default is 1 MiB: librdkafka's batches)
``cached pages``    the same blocks written again over the file's start: pages already in the
                    page cache, the cost of the write itself
``new anonymous``   ``bytearray`` copies of the block, kept, as the in-memory log kept batches
``arena``           copies into the in-memory log's :class:`~trikafka.log.memory.Arena`, kept:
                    blocks mapped with ``MAP_POPULATE``, as the log now keeps batches of 64 KiB
                    and more (the same pages, faulted in one go instead of one by one)

Run it twice: right after other work has freed memory (warm: the pages are still the
guest's) and after ~20 s idle (cold: freed memory has been reported back to the host). The
file is created in ``--dir`` (default: the system's temporary directory, where ``make bench``
puts the file log) and removed at the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
from collections.abc import Callable

from trikafka.log.memory import Arena

__all__ = ["main"]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _steps(write: Callable[[], None], blocks: int, steps: int, block_size: int) -> list[float]:
    """CPU seconds per GB of each step of ``blocks`` calls to ``write``."""
    out = []
    for _ in range(steps):
        before = _cpu()
        for _ in range(blocks):
            write()
        out.append((_cpu() - before) / (blocks * block_size / 1e9))
    return out


def _show(name: str, figures: list[float]) -> None:
    each = " ".join(f"{f:.2f}" for f in figures)
    print(
        f"{name:<16} {statistics.median(figures):5.2f} s/GB median "
        f"({min(figures):.2f}–{max(figures):.2f}); per step: {each}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.first_touch")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--step-mib", type=int, default=200)
    parser.add_argument("--chunk-kib", type=int, default=1024)
    parser.add_argument("--dir", default=None, help="where the file goes (default: temp dir)")
    args = parser.parse_args(argv)
    block = os.urandom(args.chunk_kib * 1024)
    blocks = max(1, args.step_mib * 1024 * 1024 // len(block))
    print(
        f"{args.steps} steps of {blocks} × {len(block) // 1024} KiB; "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )

    # Anonymous memory first, kept to the end: the file's pages, freed when it is removed,
    # would otherwise be the warm memory it gets.
    kept: list[bytearray | memoryview] = []
    _show("new anonymous", _steps(lambda: kept.append(bytearray(block)), blocks, args.steps, len(block)))
    arena = Arena()
    _show("arena", _steps(lambda: kept.append(arena.copy(block)), blocks, args.steps, len(block)))
    with tempfile.TemporaryDirectory(prefix="first-touch-", dir=args.dir) as directory:
        fd = os.open(os.path.join(directory, "segment.log"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            end = 0

            def append() -> None:
                nonlocal end
                end += os.pwrite(fd, block, end)

            _show("new page cache", _steps(append, blocks, args.steps, len(block)))
            position = 0

            def overwrite() -> None:
                nonlocal position
                os.pwrite(fd, block, position)
                position = (position + len(block)) % (blocks * len(block))

            _show("cached pages", _steps(overwrite, blocks, args.steps, len(block)))
        finally:
            os.close(fd)
    kept.clear()


if __name__ == "__main__":
    main()
