"""What every command shares: the connection flags, one error line, exit codes, output.

Exit codes are the contract scripts rely on: 0 done, 1 the cluster refused or could not be
reached (any Kafka error, unknown topic, timeout, unreachable broker), 2 the command line is
wrong (argparse's own code for usage errors; a bad ``-X`` key or value is one too). Errors are
one line on stderr, ``trikafka: <what>``, never a traceback: a command fails like ``kcat``
does, not like a Python program.

Client settings come as ``-X key=value`` with the Java client's key names, checked by
:class:`~trikafka.client.ClientConfig` for the command's client role before anything is sent,
so ``-X linger.ms=abc`` names the key and what it takes. ``--timeout`` bounds everything a
one-shot command waits for (reaching the cluster, every call), on trio's clock; following
commands (``consume`` without ``-e``/``--count``, ``top``) run until interrupted.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import trio

from trikafka.client import ClientConfig, KafkaError
from trikafka.errors import ConfigError

__all__ = [
    "EXIT_KAFKA",
    "EXIT_OK",
    "EXIT_USAGE",
    "CommandError",
    "Output",
    "UsageError",
    "add_connection_flags",
    "client_settings",
    "plain_table",
    "fail",
    "run_command",
]

EXIT_OK = 0
EXIT_KAFKA = 1
EXIT_USAGE = 2

#: ``-b``'s default: ``TRIKAFKA_BOOTSTRAP_SERVERS`` when set (as rpk reads RPK_BROKERS), else the
#: dev broker's address.
DEFAULT_BOOTSTRAP = os.environ.get("TRIKAFKA_BOOTSTRAP_SERVERS") or "127.0.0.1:9092"
DEFAULT_TIMEOUT_S = 10.0


class UsageError(Exception):
    """The command line asks for something impossible (exit 2)."""


class CommandError(Exception):
    """The cluster said no, or could not be asked (exit 1); the message is the whole story."""


def fail(message: str) -> CommandError:
    return CommandError(message)


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-b", "--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT[,...]",
        help=f"brokers to start from (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "-X", dest="settings", action="append", default=[], metavar="KEY=VALUE",
        help="a client setting with Kafka's name, e.g. -X client.id=me (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="JSON on stdout, for scripts")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
        help=f"give up on an unreachable or silent cluster after this long (default {DEFAULT_TIMEOUT_S:g})",
    )


def client_settings(args: argparse.Namespace, role: str, *, shared_only: bool = False) -> dict[str, Any]:
    """``-X`` pairs (checked for ``role``) plus ``--timeout`` where the user set no key.
    ``shared_only``: drop the keys ``role`` does not take (a command's helper client, e.g.
    the admin client ``consume`` looks offsets up with, gets the connection settings only)."""
    settings: dict[str, Any] = {}
    for item in args.settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"-X takes KEY=VALUE, not {item!r}")
        settings[key.strip()] = value
    _librdkafka_sasl(settings)
    while shared_only:  # drop, one by one, the keys the role refuses as another role's
        try:
            ClientConfig.for_role(role, settings)
            break
        except ConfigError as exc:
            if exc.key not in settings or "does not take it" not in exc.allowed:
                raise
            del settings[exc.key]
    settings["bootstrap.servers"] = args.bootstrap_server
    timeout_ms = max(1, int(args.timeout * 1000))
    defaults: dict[str, Any] = {"request.timeout.ms": timeout_ms}
    if role == "producer":
        defaults["max.block.ms"] = timeout_ms
        # Java's floor for delivery.timeout.ms is linger.ms + request.timeout.ms.
        linger = ClientConfig.for_role(role, {k: v for k, v in settings.items() if k == "linger.ms"})["linger.ms"]
        defaults["delivery.timeout.ms"] = 2 * timeout_ms + linger
    else:
        defaults["default.api.timeout.ms"] = timeout_ms
    for key, value in defaults.items():
        settings.setdefault(key, value)
    ClientConfig.for_role(role, settings)  # raises ConfigError naming the key
    return settings


#: librdkafka's (kcat's) SASL keys, which Java's clients spell as sasl.mechanism + a JAAS line.
_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule"}


def _librdkafka_sasl(settings: dict[str, Any]) -> None:
    """``-X sasl.mechanisms=PLAIN -X sasl.username=u -X sasl.password=p`` as kcat takes them →
    Java's ``sasl.mechanism`` and ``sasl.jaas.config``, which the client checks."""
    if "sasl.mechanisms" in settings:
        settings.setdefault("sasl.mechanism", settings.pop("sasl.mechanisms"))
    if "sasl.username" in settings or "sasl.password" in settings:
        if "sasl.jaas.config" in settings:
            raise UsageError("give sasl.username/sasl.password or sasl.jaas.config, not both")
        mechanism = str(settings.get("sasl.mechanism", "")).upper()
        module = _LOGIN_MODULES.get(mechanism, "org.apache.kafka.common.security.scram.ScramLoginModule")

        def quoted(value: Any) -> str:
            return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'

        username, password = settings.pop("sasl.username", ""), settings.pop("sasl.password", "")
        settings["sasl.jaas.config"] = f"{module} required username={quoted(username)} password={quoted(password)};"


def plain_table(
    columns: Sequence[str], rows: Iterable[Sequence[str]], *, title: str | None = None, right: Iterable[int] = (),
) -> str:
    """A table for a pipe or a file: a header row and the rows, columns padded to their widest
    cell and two spaces apart, no box drawing, no width limit (a long name is never cut);
    ``right`` are the indexes of right-aligned columns (numbers)."""
    rows = [list(row) for row in rows]
    widths = [max([len(c), *(len(row[i]) for row in rows)]) for i, c in enumerate(columns)]
    right = set(right)

    def line(cells: Sequence[str]) -> str:
        padded = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(padded).rstrip() + "\n"

    return (f"{title}\n" if title else "") + line(columns) + "".join(line(row) for row in rows)


class Output:
    """Tables by rich for people, JSON for scripts; stdout only carries the answer."""

    def __init__(self, as_json: bool) -> None:
        from rich.console import Console

        self.as_json = as_json
        # Off a terminal rich would wrap at 80 columns; a pipe gets whole lines.
        self.console = Console(soft_wrap=not sys.stdout.isatty(), width=None if sys.stdout.isatty() else 100_000)

    def json(self, value: Any) -> None:
        sys.stdout.write(json.dumps(value, indent=None if not sys.stdout.isatty() else 2, default=str) + "\n")

    def table(self, title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        cells = [["" if v is None else str(v) for v in row] for row in rows]
        if not sys.stdout.isatty():  # plain columns that grep and awk read, never cut
            sys.stdout.write(plain_table(columns, cells, title=title))
            return
        from rich import box
        from rich.table import Table

        table = Table(title=title, title_justify="left", header_style="bold", box=box.HEAVY_HEAD)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in cells:
            table.add_row(*row)
        self.console.print(table)

    def line(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def deleted(self, kind: str, names: Sequence[str]) -> None:
        """What a delete command removed: ``{"deleted": [...]}``, or a line per name."""
        if self.as_json:
            self.json({"deleted": list(names)})
        else:
            for name in names:
                self.line(f"Deleted {kind} {name}.")


def _leaves(exc: BaseException) -> list[BaseException]:
    """The leaf exceptions of (nested) exception groups: nurseries wrap what they carry."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _explain(exc: BaseException, args: argparse.Namespace) -> tuple[int, str] | None:
    """(exit code, one line) for an error a user can act on; None for a bug."""
    if isinstance(exc, UsageError | ConfigError):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, CommandError):
        return EXIT_KAFKA, str(exc)
    if isinstance(exc, KafkaError):
        return EXIT_KAFKA, str(exc)
    if isinstance(exc, trio.TooSlowError):
        where = getattr(args, "bootstrap_server", None) or getattr(args, "registry", "the server")
        return EXIT_KAFKA, f"no answer from {where} within {args.timeout:g} s (--timeout)"
    if isinstance(exc, OSError):
        return EXIT_KAFKA, str(exc)
    return None


async def _check_reachable(bootstrap: str, limit_s: float) -> None:
    """Connect once to each bootstrap server until one answers: an unreachable cluster is
    one line at once, not ``--timeout`` seconds of the client's reconnect backoff."""
    errors = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit():
            raise UsageError(f"--bootstrap-server: {server.strip()!r} is not HOST:PORT")
        with trio.move_on_after(limit_s):
            try:
                stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
            except OSError as exc:
                causes = [c for c in _leaves(exc.__cause__) if isinstance(c, OSError)] if exc.__cause__ else []
                cause = causes[0] if causes else exc
                errors.append(f"{server.strip()}: {(cause.strerror or str(cause)).lower()}")
                continue
            await stream.aclose()
            return
        errors.append(f"{server.strip()}: no connection within {limit_s:g} s")
    raise CommandError(f"cannot reach the cluster: {'; '.join(errors)}")


def run_command(
    args: argparse.Namespace,
    command: Callable[[argparse.Namespace, Output], Awaitable[int | None]],
    *,
    bounded: bool = True,
) -> int:
    """Run one command in trio; errors become their exit code and one line on stderr.
    ``bounded``: the whole command is held to ``--timeout`` (one-shot commands)."""
    logging.basicConfig(level=logging.ERROR, format="trikafka: %(message)s", stream=sys.stderr)
    output = Output(getattr(args, "json", False))

    async def main() -> int | None:
        # `top --live` starts the broker it then reaches; `schemas` talks to a registry only.
        if not getattr(args, "live", False) and getattr(args, "bootstrap_server", None):
            await _check_reachable(args.bootstrap_server, args.timeout)
        if not bounded:
            return await command(args, output)
        with trio.fail_after(args.timeout * 2 + 1):  # the calls are bounded too; this is a backstop
            return await command(args, output)

    try:
        return trio.run(main) or EXIT_OK
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        sys.stderr.close()
        return EXIT_OK
    except BaseException as exc:  # noqa: BLE001 — sorted below; a bug is re-raised
        for leaf in _leaves(exc):
            if isinstance(leaf, KeyboardInterrupt):
                return 130
            if isinstance(leaf, BrokenPipeError):
                return EXIT_OK
            explained = _explain(leaf, args)
            if explained is not None:
                code, text = explained
                print(f"trikafka: {text}", file=sys.stderr)
                return code
        if os.environ.get("TRIKAFKA_TRACEBACK"):
            raise
        leaf = _leaves(exc)[0]
        print(f"trikafka: unexpected {type(leaf).__name__}: {leaf} (TRIKAFKA_TRACEBACK=1 shows where)", file=sys.stderr)
        return EXIT_KAFKA
