"""``top``: a live terminal view of a cluster, refreshed every second (rich ``Live``).

Each refresh asks the cluster over the protocol (:func:`~trikafka.commands.top_sources.protocol_snapshot`:
topics, end offsets, sizes, groups, lag — from any Kafka) and, when there is one, a request
metrics source: ``--live`` runs a dev broker in this process and reads its statistics;
``--metrics URL`` scrapes a Prometheus endpoint. :class:`~trikafka.commands.top_model.TopView`
turns two snapshots into rates; :func:`render` draws one view. ``--json`` prints one JSON
object per refresh instead (for scripts); ``--iterations N`` stops after N refreshes.

The refresh is paced on trio's clock (``sleep_until`` the next whole period), so a slow
refresh does not drift the ones after it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import attrs
import trio

from trikafka.client import open_admin
from trikafka.commands.common import (
    EXIT_OK,
    Output,
    UsageError,
    add_connection_flags,
    client_settings,
    plain_table,
)
from trikafka.commands.top_model import TIME_SPLIT, TopView, View
from trikafka.commands.top_sources import InProcessMetrics, PrometheusMetrics, protocol_snapshot

__all__ = ["NO_METRICS", "Section", "human_bytes", "register", "render", "render_plain", "watch_broker"]

NO_METRICS = (
    "Per-request metrics are not part of the Kafka protocol, and top has no metrics source for "
    "this broker. Run `python -m trikafka top --live` (a dev broker in this process) or pass "
    "--metrics http://HOST:PORT/metrics (a Prometheus endpoint with Kafka's JMX-exporter names)."
)


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _rate(value: float | None, unit: str = "/s") -> str:
    return "-" if value is None else f"{value:,.1f}{unit}"


@attrs.frozen
class Section:
    """One panel's content, drawn by rich on a terminal and as plain text elsewhere."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    right: tuple[int, ...] = ()  # right-aligned column indexes (numbers)
    note: str | None = None  # shown instead of the table (no metrics source)


def _requests_section(view: View) -> Section:
    requests = view.snapshot.requests
    columns = ("API", "req/s", "total", "p50 ms", "p99 ms", *(f"{label} ms" for label, _ in TIME_SPLIT))
    if requests is None:
        return Section("Requests", columns, (), note=NO_METRICS)
    rows = sorted(
        requests.items(), key=lambda item: (-view.requests_per_s.get(item[0], 0.0), -item[1].requests, item[0])
    )
    return Section(
        f"Requests (p50/p99 of TotalTimeMs; mean of each part) · {view.snapshot.metrics_source}",
        columns,
        tuple(
            (
                api,
                _rate(view.requests_per_s.get(api), ""),
                f"{times.requests:,}",
                f"{times.p50:.2f}",
                f"{times.p99:.2f}",
                *(f"{times.parts.get(label, 0.0):.2f}" for label, _ in TIME_SPLIT),
            )
            for api, times in rows
        ),
        right=tuple(range(1, len(columns))),
    )


def _traffic_section(view: View) -> Section:
    s = view.snapshot
    rows = [("(not exposed)", "-")] if s.connections is None else []
    rows += [(listener, str(count)) for listener, count in sorted((s.connections or {}).items())]
    rows += [
        ("", ""),
        ("bytes in", "-" if s.bytes_in is None else human_bytes(view.bytes_in_per_s) + "/s"),
        ("bytes out", "-" if s.bytes_out is None else human_bytes(view.bytes_out_per_s) + "/s"),
    ]
    return Section("Connections · traffic", ("listener", "connections"), tuple(rows), right=(1,))


def _topics_section(view: View) -> Section:
    return Section(
        f"Topics ({len(view.topics)})",
        ("topic", "partitions", "size", "end offsets", "msgs/s"),
        tuple(
            (t.name, str(t.partitions), human_bytes(t.size), f"{t.end_offset:,}", _rate(t.messages_per_s, ""))
            for t in view.topics
        ),
        right=(1, 2, 3, 4),
    )


def _groups_section(view: View) -> Section:
    return Section(
        f"Groups ({len(view.snapshot.groups)})", ("group", "state", "members", "lag"),
        tuple((g.group, g.state, str(g.members), "-" if g.lag is None else f"{g.lag:,}") for g in view.snapshot.groups),
        right=(2, 3),
    )


def _panel(section: Section) -> Any:
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    if section.note is not None:
        return Panel(Text(section.note), title=section.title, border_style="yellow")
    table = Table(expand=True, box=None, header_style="bold")
    for i, column in enumerate(section.columns):
        table.add_column(column, justify="right" if i in section.right else "left")
    for row in section.rows:
        table.add_row(*row)
    return Panel(table, title=section.title)


def _header(view: View, now: str | None) -> tuple[str, str]:
    s = view.snapshot
    return "trikafka top", (
        f" · cluster {s.cluster_id or '?'} · controller {s.controller} · {s.brokers} broker(s) · "
        f"{now or time.strftime('%H:%M:%S')} · every 1 s · Ctrl-C quits"
    )


def render(view: View, now: str | None = None) -> Any:
    """One refresh as a rich ``Layout``: header, requests, connections, topics, groups."""
    from rich.layout import Layout
    from rich.text import Text

    name, rest = _header(view, now)
    layout = Layout()
    layout.split_column(
        Layout(Text.assemble((name, "bold green"), rest), name="header", size=1),
        Layout(name="top", ratio=1),
        Layout(name="bottom", ratio=1),
    )
    layout["top"].split_row(
        Layout(_panel(_requests_section(view)), ratio=3), Layout(_panel(_traffic_section(view)), ratio=1)
    )
    layout["bottom"].split_row(
        Layout(_panel(_topics_section(view)), ratio=3), Layout(_panel(_groups_section(view)), ratio=2)
    )
    return layout


def render_plain(view: View, now: str | None = None) -> str:
    """One refresh for a pipe or a file: the same sections as plain tables, full width (names
    are never cut), no box drawing; a blank line between sections."""
    name, rest = _header(view, now)
    parts = [name + rest + "\n"]
    for section in (_requests_section(view), _traffic_section(view), _topics_section(view), _groups_section(view)):
        body = (
            f"{section.note}\n"
            if section.note is not None
            else plain_table(section.columns, section.rows, right=section.right)
        )
        parts.append(f"\n{section.title}\n{body}")
    return "".join(parts)


async def _start_live_broker(nursery: trio.Nursery, args: argparse.Namespace) -> Any:
    """``--live``: the dev broker (in memory) on ``--bootstrap-server``'s address, in this process."""
    from trikafka.broker import Broker
    from trikafka.config import BrokerConfig

    if "," in args.bootstrap_server:
        raise UsageError("--live serves one broker: give one HOST:PORT")
    broker = Broker(BrokerConfig.from_mapping({
        "listeners": f"PLAINTEXT://{args.bootstrap_server}", "log.dirs": "", "group.initial.rebalance.delay.ms": "0",
    }))
    await nursery.start(broker.serve)
    return broker


async def _top(args: argparse.Namespace, out: Output) -> int:
    if args.live and args.metrics:
        raise UsageError("--live reads the broker it runs; --metrics is for a broker elsewhere")
    settings = client_settings(args, "admin")
    async with trio.open_nursery() as nursery:
        source: Any = None
        if args.live:
            source = InProcessMetrics(await _start_live_broker(nursery, args))
        elif args.metrics:
            source = PrometheusMetrics(args.metrics, args.timeout)
        async with open_admin(**settings) as admin:
            await _loop(args, admin, source)
        nursery.cancel_scope.cancel()  # the --live broker ends with the view
    return EXIT_OK


async def watch_broker(broker: Any, *, interval: float = 1.0) -> None:
    """``python -m trikafka --live``: this view of a broker running in the same process, until
    cancelled (the CLI cancels it when the broker stops, and stops the broker when it ends)."""
    endpoints = list(broker.endpoints.values())
    endpoint = next((e for e in endpoints if e.name == "PLAINTEXT"), endpoints[0])
    host = "127.0.0.1" if endpoint.host in ("", "0.0.0.0") else "::1" if endpoint.host == "::" else endpoint.host
    args = argparse.Namespace(json=False, iterations=None, interval=interval, timeout=10.0, save_svg=None)
    async with open_admin(f"{host}:{endpoint.port}", request_timeout_ms=10_000, default_api_timeout_ms=10_000) as admin:
        await _loop(args, admin, InProcessMetrics(broker))


async def _loop(args: argparse.Namespace, admin: Any, source: Any) -> None:
    from rich.console import Console
    from rich.live import Live

    model = TopView()
    console = Console()
    # Off a terminal (a pipe, a file) each refresh is written as plain text: rich would draw at
    # 80 columns and cut names.
    live = (
        None
        if args.json or not console.is_terminal
        else Live(console=console, auto_refresh=False, screen=True, redirect_stderr=False)
    )
    refreshes = 0
    next_at = trio.current_time()
    view = None
    try:
        if live is not None:
            live.start()
        while True:
            with trio.fail_after(args.timeout):  # a cluster gone silent ends top in one line
                snapshot = await protocol_snapshot(admin)
            if source is not None:
                snapshot = attrs.evolve(snapshot, **(await source.read()))
            view = model.update(snapshot)
            if live is not None:
                live.update(render(view), refresh=True)
            else:
                sys.stdout.write(json.dumps(view.as_json()) + "\n" if args.json else render_plain(view) + "\n")
                sys.stdout.flush()
            refreshes += 1
            if args.iterations is not None and refreshes >= args.iterations:
                break
            next_at = max(next_at + args.interval, trio.current_time())
            await trio.sleep_until(next_at)
    finally:
        if live is not None:
            live.stop()
    if args.save_svg and view is not None:
        await trio.to_thread.run_sync(_save_svg, view, args.save_svg)


def _save_svg(view: View, path: str) -> None:
    """The last view as an SVG picture (rich's export), e.g. for a README or a bug report."""
    import io

    from rich.console import Console

    console = Console(record=True, width=200, height=45, file=io.StringIO(), force_terminal=True)
    console.print(render(view))
    console.save_svg(path, title="python -m trikafka top")


def register(commands: Any) -> None:
    parser = commands.add_parser("top", help="a live view: requests, connections, topics, groups, lag")
    parser.add_argument(
        "--live",
        action="store_true",
        help="run a dev broker (in memory) on --bootstrap-server's address in this process and show its "
        "request metrics",
    )
    parser.add_argument("--metrics", metavar="URL", help="scrape request metrics from this Prometheus endpoint (e.g. http://127.0.0.1:9404/metrics)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="SECONDS", help="refresh period (default 1)")
    parser.add_argument("--iterations", "-n", type=int, metavar="N", help="stop after N refreshes")
    parser.add_argument("--save-svg", metavar="PATH", help="on exit, save the last view as an SVG picture")
    add_connection_flags(parser)
    parser.set_defaults(run=_top, bounded=False)
