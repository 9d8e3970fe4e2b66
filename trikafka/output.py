"""What the dev broker writes for people and for machines: log lines, the start-up block,
progress of long work.

Three outputs, chosen once at start (:func:`setup_logging`):

* a terminal: rich's log handler (colours, aligned columns, wrapped to the window) and a
  rich progress bar for long work;
* a file or a pipe: one plain line per record — time, level, logger, message — never
  wrapped and never cut, so ``grep`` finds a member id or a topic name whole (rich would
  wrap at 80 columns when it cannot ask a terminal for its width);
* ``--log-format json``: one JSON object per line (``ts``, ``level``, ``logger``,
  ``message``, ``exc_info`` when there is one, and the start-up block's fields).

The start-up block (:class:`StartupInfo`) is printed once everything is bound, in the same
three shapes. Its text lines are what ``trikafka.testing.process`` waits for: the header
(``broker N ready · cluster ID``) first, ``listening on`` lines, then ``data:`` last but for
"Ctrl-C stops gracefully" — keep that order.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

import attrs

__all__ = [
    "LOG_FORMATS",
    "JsonFormatter",
    "StartupInfo",
    "plain_formatter",
    "print_startup",
    "recovery_progress",
    "setup_logging",
]

LOG_FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per record; fields given as ``extra={"fields": {...}}`` are merged in."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def plain_formatter() -> logging.Formatter:
    return logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def setup_logging(level: str, log_format: str = "text", stream: IO[str] | None = None) -> str:
    """Log records go to ``stream`` (stderr), shaped for what it is; returns the shape
    chosen: ``"rich"``, ``"plain"`` or ``"json"``. stdout stays free for the user."""
    stream = stream or sys.stderr
    handler: logging.Handler
    if log_format == "json":
        handler, shape = logging.StreamHandler(stream), "json"
        handler.setFormatter(JsonFormatter())
    elif _is_terminal(stream):
        from rich.console import Console
        from rich.logging import RichHandler

        handler = RichHandler(console=Console(file=stream), show_path=False, rich_tracebacks=True)
        handler.setFormatter(logging.Formatter("%(message)s", datefmt="[%X]"))
        shape = "rich"
    else:
        handler, shape = logging.StreamHandler(stream), "plain"
        handler.setFormatter(plain_formatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    return shape


@attrs.frozen
class StartupInfo:
    """The one block printed at start: what runs, where, and what differs from Kafka."""

    version: str
    node_id: int
    cluster_id: str
    listeners: Sequence[str]
    data: str
    #: key → (value, why) for every key that differs from Kafka's default.
    changed: Mapping[str, tuple[str, str]]
    #: what → URL: "metrics", "ui", "control", ... (only those served)
    http: Mapping[str, str] = attrs.field(factory=dict)
    notes: Sequence[str] = ()
    open_files: str | None = None
    #: ``max.broker.partitions``: partitions of all topics together this broker may hold.
    partition_cap: int | None = None

    def as_fields(self) -> dict[str, Any]:
        return {
            "event": "ready",
            "version": self.version,
            "node_id": self.node_id,
            "cluster_id": self.cluster_id,
            "listeners": list(self.listeners),
            "data": self.data,
            "config_changed": {key: value for key, (value, _) in self.changed.items()},
            "http": dict(self.http),
            "open_files": self.open_files,
            "max_broker_partitions": self.partition_cap,
            "notes": list(self.notes),
        }

    def lines(self, markup: bool = True) -> list[str]:
        """Everything before ``data:``: that line ends the block for whoever waits on it.
        With ``markup``, rich's console markup around the names and addresses."""
        green, bold, end = ("[bold green]", "[bold]", "[/]") if markup else ("", "", "")
        out = [f"{green}trikafka{end} {self.version} · broker {self.node_id} ready · cluster {self.cluster_id}"]
        out += [f"  {what} on {bold}{url}{end}" for what, url in self.http.items()]
        if self.changed:
            out.append("  config changed from defaults:")
            out += [f"    {key}={value}" + (f"  ({why})" if why else "") for key, (value, why) in self.changed.items()]
        if self.open_files is not None:
            out.append(f"  open file limit (RLIMIT_NOFILE): {self.open_files}")
        if self.partition_cap is not None:
            out.append(f"  partitions: at most {self.partition_cap:,} on this broker (max.broker.partitions)")
        out += [f"  {note}" for note in self.notes]
        out += [f"  listening on {bold}{listener}{end}" for listener in self.listeners]
        out.append(f"  data: {self.data}")
        return out


def print_startup(info: StartupInfo, shape: str, stream: IO[str] | None = None, *, closing: bool = True) -> None:
    """The block: rich markup on a terminal, the same lines unwrapped elsewhere, one JSON
    object with ``--log-format json``."""
    stream = stream or sys.stderr
    if shape == "json":
        logging.getLogger("trikafka").info(
            "broker %d ready", info.node_id, extra={"fields": info.as_fields()}
        )
        return
    if shape != "rich":
        # A file or a pipe: plain lines, written as they are. Not through rich, which would
        # cost the start-up ~30 ms of imports while whoever waits for the port waits too.
        lines = info.lines(markup=False) + (["  Ctrl-C stops gracefully"] if closing else [])
        stream.write("".join(line + "\n" for line in lines))
        stream.flush()
        return
    from rich.console import Console

    # soft_wrap: never wrapped, whatever width rich guesses for a file or a pipe.
    console = Console(file=stream, soft_wrap=True, highlight=False)
    for line in info.lines():
        console.print(line)
    if closing:
        console.print("  Ctrl-C stops gracefully")


def recovery_progress(shape: str) -> Callable[[int, int, str], None] | None:
    """The log manager's progress reporter for loading logs at start: a rich progress bar on
    a terminal; None elsewhere (the manager then logs a line at every tenth)."""
    if shape != "rich":
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # Here, not at the top: the CLI's --help and --list-config import this module, and
    # trikafka.log.manager brings the storage layer with it.
    from trikafka.log.manager import PROGRESS_MIN_SEGMENTS

    progress = Progress(
        TextColumn("loading logs"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("partitions"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        auto_refresh=False,  # the load blocks the loop: draw on each report instead
    )
    task: list[Any] = []

    def report(done: int, total: int, log_dir: str) -> None:
        if total < PROGRESS_MIN_SEGMENTS:
            return
        if not task:
            progress.start()
            task.append(progress.add_task(log_dir, total=total))
        progress.update(task[0], completed=done, total=total)
        progress.refresh()
        if done >= total:
            progress.stop()
            task.clear()

    return report
