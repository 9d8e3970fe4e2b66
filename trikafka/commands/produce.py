"""``produce TOPIC``: one record per line of stdin or ``--file``, as ``kcat -P``.

``--key-sep SEP`` splits each line at the first SEP into key and value (kcat's ``-K``; a line
without SEP is a value without key). Empty lines are skipped. ``-H key=value`` adds a header to
every record; ``-p N`` sends to one partition (else the key's hash, or the sticky partitioner).

Input is read in 64 KiB chunks in a worker thread (a thread per line would cost more than the
produce), records are enqueued without waiting for each acknowledgement, and every outcome is
checked: the first failed record fails the command (exit 1) after what was sent is settled.
A ``--file`` read on a terminal shows a rich progress bar (on stderr) by bytes.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

import trio

from trikafka.client import RecordFuture, open_producer
from trikafka.commands.common import (
    EXIT_OK,
    Output,
    UsageError,
    add_connection_flags,
    client_settings,
    fail,
)

__all__ = ["read_lines", "register"]

CHUNK = 1 << 16


async def read_lines(stream: BinaryIO, on_bytes: Any = None) -> AsyncIterator[bytes]:
    """Lines of ``stream`` without their ``\\n`` (and a final line without one)."""
    tail = b""
    while True:
        chunk = await trio.to_thread.run_sync(stream.read1, CHUNK)  # type: ignore[attr-defined]  # a BufferedReader
        if not chunk:
            break
        if on_bytes is not None:
            on_bytes(len(chunk))
        lines = (tail + chunk).split(b"\n")
        tail = lines.pop()
        for line in lines:
            yield line
    if tail:
        yield tail


def _open_input(path: str | None) -> tuple[BinaryIO, int | None]:
    """The stream to read and, for a file, its size (for the progress bar)."""
    if path is None:
        return sys.stdin.buffer, None
    if not os.path.isfile(path):
        raise UsageError(f"--file: {path!r} is not a readable file")
    return open(path, "rb"), os.path.getsize(path)  # noqa: SIM115 — closed by the caller


async def _check_topic(producer: Any, topic: str) -> None:
    """Fail at once when the topic does not exist and will not be created: one Metadata that
    allows auto-creation answers UNKNOWN_TOPIC_OR_PARTITION only when the broker creates no
    topics (``auto.create.topics.enable=false``); a broker that creates it answers the topic (or
    LEADER_NOT_AVAILABLE while it is being made), which the producer then waits for as usual.
    Without this the producer would retry until ``max.block.ms`` and report a timeout, where
    ``consume`` says UNKNOWN_TOPIC_OR_PARTITION at once."""
    from trikafka.errors import ErrorCode

    client = producer.client
    client.cluster.add_interest([topic])
    await client.refresh_metadata()
    if client.cluster.topic_error(topic) == ErrorCode.unknown_topic_or_partition:
        raise fail(
            f"UNKNOWN_TOPIC_OR_PARTITION: topic {topic!r} does not exist (and the broker does not "
            f"create topics: auto.create.topics.enable=false)"
        )


def _progress() -> Any:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    return Progress(
        TextColumn("[bold]produce"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
        console=Console(stderr=True), transient=False,
    )


async def _produce(args: argparse.Namespace, out: Output) -> int:
    headers = []
    for item in args.header:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"-H takes KEY=VALUE, not {item!r}")
        headers.append((name, value.encode()))
    key_sep = args.key_sep.encode() if args.key_sep is not None else None
    if key_sep == b"":
        raise UsageError("--key-sep must not be empty")
    settings = client_settings(args, "producer")
    stream, total = await trio.to_thread.run_sync(_open_input, args.file)
    progress = _progress() if total is not None and sys.stderr.isatty() else None
    task = progress.add_task("produce", total=total) if progress else None
    records = size = 0
    last: dict[int, int] = {}
    pending: deque[RecordFuture] = deque()

    def settle() -> None:
        while pending and pending[0].done():
            future = pending.popleft()
            if future.error is not None:
                raise future.error
            meta = future.metadata
            if meta is not None:
                last[meta.partition] = max(last.get(meta.partition, -1), meta.offset)

    try:
        if progress:
            progress.start()
        async with open_producer(**settings) as producer:
            await _check_topic(producer, args.topic)
            async for line in read_lines(stream, (lambda n: progress.advance(task, n)) if progress else None):
                if not line:
                    continue
                key = None
                if key_sep is not None and key_sep in line:
                    key, line = line.split(key_sep, 1)
                pending.append(
                    await producer.enqueue(args.topic, line, key=key, headers=headers or None, partition=args.partition)
                )
                records += 1
                size += len(line) + (len(key) if key else 0)
                settle()
            await producer.flush()
            settle()
    finally:
        if progress:
            progress.stop()
        if args.file:
            stream.close()
    if out.as_json:
        out.json(
            {
                "topic": args.topic,
                "records": records,
                "bytes": size,
                "last_offsets": {str(p): o for p, o in sorted(last.items())},
            }
        )
    else:
        print(f"Produced {records} records ({size} bytes) to {args.topic}", file=sys.stderr)
    return EXIT_OK


def register(commands: Any) -> None:
    parser = commands.add_parser("produce", help="produce lines of stdin or a file as records")
    parser.add_argument("topic")
    parser.add_argument(
        "--file", "-f", metavar="PATH", help="read lines from PATH instead of stdin (a progress bar on a terminal)"
    )
    parser.add_argument("--key-sep", "-K", metavar="SEP", help="split each line into KEY SEP VALUE at the first SEP")
    parser.add_argument(
        "-H", "--header", action="append", default=[], metavar="KEY=VALUE", help="a header on every record (repeatable)"
    )
    parser.add_argument("-p", "--partition", type=int, metavar="N", help="produce to partition N only")
    add_connection_flags(parser)
    parser.set_defaults(run=_produce, bounded=False)
