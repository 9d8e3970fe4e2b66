"""``consume TOPIC``: records to stdout, as ``kcat -C``.

By default each record's value and a newline (kcat's default format); ``--format`` takes kcat's
tokens (:func:`render`), ``--json`` one JSON object per record. Diagnostics go to stderr, so
stdout carries only records.

Where to start (``--from``, kcat's ``-o``): ``beginning`` (the default, as kcat), ``end``, an
offset, ``-N`` (N before the end), or a timestamp: ``s@MS`` (kcat's), ``@MS`` or ISO 8601
(``2026-11-25T10:00:00Z``; no zone means UTC) — the first offset at or after it (ListOffsets).
Without ``--group`` the consumer assigns itself every partition (or ``-p``) and seeks; with
``--group`` it subscribes, and ``--from beginning|end`` is the group's ``auto.offset.reset``
for partitions without a committed offset (kcat ``-G`` does the same); positions are committed
as records are printed (auto-commit) and on exit.

``--decode`` turns each Confluent-framed value (magic byte 0, a 4-byte schema id) into JSON by
its writer's schema from the Schema Registry at ``--registry``.

``--count N`` stops after N records; ``-e``/``--exit`` stops once every partition reached the
end it had when the command started (its high watermark then); otherwise it follows until
interrupted.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import re
import struct
import sys
from typing import Any

import trio

from trikafka.client import TopicPartition, open_admin, open_consumer
from trikafka.commands.common import (
    EXIT_OK,
    Output,
    UsageError,
    add_connection_flags,
    client_settings,
)
from trikafka.commands.topics import partitions_of, watermarks

__all__ = ["parse_from", "record_json", "register", "render"]

_TOKEN = re.compile(rb"%[sSRkKThtpo%]|\\[nrt]|\\x[0-9a-fA-F]{2}")


def render(fmt: bytes, record: Any) -> bytes:
    """kcat's ``-f`` tokens: %s value, %S value length (-1: null), %R that length as a
    big-endian int32, %k key, %K key length, %T timestamp (ms), %h headers (n=v CSV), %t topic,
    %p partition, %o offset, %% and the escapes \\n \\r \\t \\xXX. No newline is added."""

    def one(match: re.Match[bytes]) -> bytes:
        token = match.group(0)
        if token == b"%s":
            return record.value or b""
        if token == b"%S":
            return b"-1" if record.value is None else str(len(record.value)).encode()
        if token == b"%R":
            return struct.pack(">i", -1 if record.value is None else len(record.value))
        if token == b"%k":
            return record.key or b""
        if token == b"%K":
            return b"-1" if record.key is None else str(len(record.key)).encode()
        if token == b"%T":
            return str(record.timestamp).encode()
        if token == b"%h":
            return b",".join(name.encode() + b"=" + (value or b"") for name, value in record.headers)
        if token == b"%t":
            return record.topic.encode()
        if token == b"%p":
            return str(record.partition).encode()
        if token == b"%o":
            return str(record.offset).encode()
        if token == b"%%":
            return b"%"
        if token.startswith(b"\\x"):
            return bytes([int(token[2:], 16)])
        return {b"\\n": b"\n", b"\\r": b"\r", b"\\t": b"\t"}[token]

    return _TOKEN.sub(one, fmt)


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def record_json(record: Any) -> dict[str, Any]:
    """One record as JSON: key, value and header values as UTF-8 text (``base64:…`` when not)."""
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": getattr(record.timestamp_type, "name", str(record.timestamp_type)),
        "key": _text(record.key),
        "value": _text(record.value),
        "headers": [[name, _text(value)] for name, value in record.headers],
    }


def parse_from(text: str) -> tuple[str, int]:
    """``--from`` → (kind, number): ("beginning"|"end", 0), ("offset", n), ("relative", -n),
    ("timestamp", ms)."""
    text = text.strip()
    if text in ("beginning", "end"):
        return text, 0
    if re.fullmatch(r"-?\d+", text):
        number = int(text)
        return ("relative" if number < 0 else "offset"), number
    for prefix in ("s@", "@"):
        if text.startswith(prefix) and text[len(prefix):].isdigit():
            return "timestamp", int(text[len(prefix):])
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--from {text!r}: give beginning, end, an offset, -N (from the end), s@MS or an ISO 8601 time"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return "timestamp", int(moment.timestamp() * 1000)


async def _starts(
    admin: Any, tps: list[TopicPartition], where: tuple[str, int]
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """(start offset, high watermark now) per partition."""
    marks = await watermarks(admin, tps)
    kind, number = where
    starts = {}
    if kind == "timestamp":
        found = await admin.list_offsets({tp: number for tp in tps})
    for tp in tps:
        low, high = marks[tp]
        if kind == "beginning":
            starts[tp] = low
        elif kind == "end":
            starts[tp] = high
        elif kind == "offset":
            starts[tp] = number
        elif kind == "relative":
            starts[tp] = max(low, high + number)
        else:
            starts[tp] = found[tp].offset if found[tp].offset >= 0 else high
    return starts, {tp: high for tp, (_, high) in marks.items()}


async def _plan(args: argparse.Namespace, where: tuple[str, int]) -> tuple[Any, list[TopicPartition], dict, dict]:
    """The topic, the partitions to read, where each starts and its end now (admin client)."""
    async with open_admin(**client_settings(args, "admin", shared_only=True)) as admin:
        info = (await partitions_of(admin, [args.topic]))[args.topic]
        chosen = sorted(info.partitions) if not args.partition else args.partition
        for p in chosen:
            if p not in info.partitions:
                raise UsageError(f"-p {p}: topic {args.topic!r} has partitions 0..{len(info.partitions) - 1}")
        tps = [TopicPartition(args.topic, p) for p in chosen]
        starts, ends = await _starts(admin, tps, where)
    return info, tps, starts, ends


async def _consume(args: argparse.Namespace, out: Output) -> int:
    where = parse_from(args.from_)
    if args.group and where[0] not in ("beginning", "end"):
        raise UsageError(
            "--group starts where the group committed (--from beginning|end only for partitions "
            "without a commit); reset a group with `groups reset-offsets`"
        )
    fmt = args.format.encode() if args.format is not None else None
    if args.count is not None and args.count < 1:
        raise UsageError("--count must be at least 1")
    decoder = _decoder(args, fmt)
    settings = client_settings(args, "consumer")
    with trio.fail_after(args.timeout * 2 + 1):  # finding the partitions is one-shot work
        info, tps, starts, ends = await _plan(args, where)
    done: set[TopicPartition] = set()
    if args.group:
        settings.setdefault("group.id", args.group)
        settings.setdefault("auto.offset.reset", "earliest" if where[0] == "beginning" else "latest")
    printed = 0
    stdout = sys.stdout.buffer
    async with open_consumer(**settings) as consumer:
        if args.group:
            consumer.subscribe([args.topic])
        else:
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, starts[tp])
            if args.exit:
                done = {tp for tp in tps if starts[tp] >= ends[tp]}
                for tp in sorted(done):
                    print(f"% Reached end of topic {tp.topic} [{tp.partition}] at offset {ends[tp]}", file=sys.stderr)
        while True:
            if args.exit and _finished(consumer, tps, done, args.group):
                break
            # No more than --count still wants: the group commits what was handed out.
            remaining = None if args.count is None else args.count - printed
            batches = await consumer.getmany(timeout_ms=500, max_records=remaining)
            for batch in batches.values():
                for record in batch:
                    if decoder is not None:
                        stdout.write(await _decoded(decoder, record, out.as_json))
                    elif out.as_json:
                        stdout.write(json.dumps(record_json(record)).encode() + b"\n")
                    elif fmt is not None:
                        stdout.write(render(fmt, record))
                    else:
                        stdout.write((record.value or b"") + b"\n")
                    printed += 1
                    if args.count is not None and printed >= args.count:
                        stdout.flush()
                        return EXIT_OK
            stdout.flush()
            if args.exit:
                for tp in consumer.assignment() - done:
                    if await consumer.position(tp) >= ends.get(tp, 0):
                        done.add(tp)
                        print(
                            f"% Reached end of topic {tp.topic} [{tp.partition}] at offset {ends[tp]}", file=sys.stderr
                        )
    stdout.flush()
    return EXIT_OK


def _decoder(args: argparse.Namespace, fmt: bytes | None) -> Any:
    """``--decode``: values by their schema from the registry (``--registry``)."""
    if not args.decode:
        return None
    if fmt is not None:
        raise UsageError("--decode prints each value as JSON: use it without --format")
    from trikafka.commands.registry_http import RecordDecoder, RegistryClient

    return RecordDecoder(RegistryClient(args.registry, args.timeout))


async def _decoded(decoder: Any, record: Any, as_json: bool) -> bytes:
    value = await decoder.decode(record.value)
    if as_json:
        return json.dumps({**record_json(record), "value": value}, default=str).encode() + b"\n"
    return json.dumps(value, default=str).encode() + b"\n"


def _finished(consumer: Any, tps: list[TopicPartition], done: set[TopicPartition], group: str | None) -> bool:
    if group:
        assignment = consumer.assignment()
        return bool(assignment) and assignment <= done
    return set(tps) <= done


def register(commands: Any) -> None:
    parser = commands.add_parser("consume", help="print records (values, --format, or --json)")
    parser.add_argument("topic")
    parser.add_argument("--from", dest="from_", default="beginning", metavar="WHERE",
                        help="beginning (default), end, OFFSET, -N (N before the end), s@MS, @MS or an ISO 8601 time")
    parser.add_argument(
        "-p", "--partition", type=int, action="append", default=[], metavar="N", help="only partition N (repeatable)"
    )
    parser.add_argument("-G", "--group", metavar="GROUP", help="consume as a member of GROUP (subscribe, commit)")
    parser.add_argument(
        "--format", "-F", metavar="FMT", help="kcat's tokens: %%s %%S %%R %%k %%K %%T %%h %%t %%p %%o, \\n \\t \\xXX"
    )
    parser.add_argument("--count", "-c", type=int, metavar="N", help="stop after N records")
    parser.add_argument(
        "-e", "--exit", action="store_true", help="stop at the end of every partition (the end it had at start)"
    )
    parser.add_argument(
        "--decode",
        action="store_true",
        help="decode Confluent-framed values (Avro, JSON Schema, Protobuf) by their schema, as JSON",
    )
    parser.add_argument(
        "--registry",
        default="http://127.0.0.1:8081",
        metavar="URL",
        help="the Schema Registry --decode asks (default http://127.0.0.1:8081)",
    )
    add_connection_flags(parser)
    parser.set_defaults(run=_consume, bounded=False)
