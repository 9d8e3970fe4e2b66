"""``python -m trikafka``: the dev broker.

``main(argv) -> int`` so tests can drive it. Precedence: defaults < ``--config`` file <
``--override key=value`` < dedicated flags such as ``--listeners``. Kafka's dotted keys work
everywhere.
"""

from __future__ import annotations

import argparse
import functools
import logging
import resource
import sys
from collections.abc import Sequence
from typing import Any

import trio

from trikafka.broker import Broker
from trikafka.config import BrokerConfig, config_keys, read_properties_file
from trikafka.errors import ConfigError
from trikafka.protocol.records import NATIVE_RECORD_WALK

__all__ = ["MEMORY_DEFAULTS", "build_config", "main", "parse_args", "raise_open_file_limit"]

log = logging.getLogger("trikafka")

DEFAULT_DATA_DIR = "./trikafka-data"
DEV_INITIAL_REBALANCE_DELAY_MS = "0"
#: ``--ui`` without ``metrics.port``: the HTTP server's port (where ``make run`` serves it too).
UI_DEFAULT_PORT = 9404

#: ``--in-memory``: a bounded window per partition instead of everything since start, the way
#: librdkafka's mock cluster keeps one (5 MiB there), so a dev broker left running under load
#: does not grow until the machine swaps. Kafka's own keys, each only when not set: retention
#: by size drops whole segments, so segments are small enough to drop (16 MiB), and retention
#: runs every second rather than every 5 minutes. A partition then holds about
#: retention.bytes + 2 x segment.bytes (~160 MiB) plus one second of produce. Set
#: ``log.retention.bytes=-1`` to keep everything, or any value, per broker or per topic.
MEMORY_DEFAULTS = {
    "log.retention.bytes": str(128 * 1024 * 1024),
    "log.segment.bytes": str(16 * 1024 * 1024),
    "log.retention.check.interval.ms": "1000",
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m trikafka",
        description="A Kafka-wire-compatible broker on Trio.",
    )
    parser.add_argument("--config", metavar="FILE", help="a server.properties file")
    parser.add_argument(
        "--override",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="set a configuration key (repeatable), e.g. num.io.threads=4",
    )
    parser.add_argument("--listeners", help="e.g. PLAINTEXT://127.0.0.1:9092 (port 0: any)")
    parser.add_argument(
        "--data-dir",
        help=f"where data lives (log.dirs); default {DEFAULT_DATA_DIR}",
    )
    parser.add_argument("--in-memory", action="store_true", help="keep no data on disk")
    parser.add_argument(
        "--brokers",
        type=int,
        default=1,
        metavar="N",
        help="serve a cluster of N brokers in this process: the listener is broker 1's, "
        "brokers 2..N take the following ports (free ports when it is 0)",
    )
    parser.add_argument(
        "--ui",
        action="store_true",
        help="serve the web console at /ui on the HTTP server (metrics.port; "
        f"{UI_DEFAULT_PORT} when not set)",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    parser.add_argument("--list-config", action="store_true", help="print every key and exit")
    parser.add_argument(
        "--control-listener",
        metavar="HOST:PORT",
        help="serve the test control interface (faults, recorder, waits) over HTTP, "
        "e.g. 127.0.0.1:0 — for tests only",
    )
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    items: dict[str, Any] = {}
    if args.config:
        items.update(read_properties_file(args.config))
    for override in args.override:
        key, sep, value = override.partition("=")
        if not sep or not key.strip():
            raise ConfigError(override, override, "--override takes KEY=VALUE")
        items[key.strip()] = value
    if args.listeners:
        items["listeners"] = args.listeners
    if args.in_memory:
        items["log.dirs"] = ""
        given = {key.strip().replace("_", ".") for key in items}
        items.update({k: v for k, v in MEMORY_DEFAULTS.items() if k not in given})
    elif args.data_dir:
        items["log.dirs"] = args.data_dir
    elif not items.get("log.dirs"):
        items["log.dirs"] = DEFAULT_DATA_DIR
    if args.ui and not any(key.strip().replace("_", ".") == "metrics.port" for key in items):
        items["metrics.port"] = str(UI_DEFAULT_PORT)
    # A dev broker answers a lone consumer at once; Kafka's 3 s default suits big groups.
    items.setdefault("group.initial.rebalance.delay.ms", DEV_INITIAL_REBALANCE_DELAY_MS)
    return BrokerConfig.from_mapping(items)


def _setup_logging(level: str) -> None:
    """Rich log lines on stderr, beside the banner; stdout stays free for the user."""
    from rich.console import Console
    from rich.logging import RichHandler

    logging.basicConfig(
        level=level.upper(),
        format="%(message)s",
        datefmt="[%X]",
        handlers=[
            RichHandler(console=Console(stderr=True), show_path=False, rich_tracebacks=True)
        ],
        force=True,
    )


def parse_control_listener(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError("--control-listener", value, "give HOST:PORT, e.g. 127.0.0.1:0")
    return host, int(port)


def _print_banner(broker: Broker, control: tuple[str, int] | None = None, *, ui: bool = False) -> None:
    from rich.console import Console

    console = Console(stderr=True)
    config = broker.config
    if config.log_dirs:
        where = ", ".join(config.log_dirs)
    elif config.log_retention_bytes >= 0:
        where = f"memory (nothing kept; log.retention.bytes {config.log_retention_bytes:,} per partition)"
    else:
        where = "memory (nothing kept; log.retention.bytes -1: no limit)"
    console.print(
        f"[bold green]trikafka[/] broker {broker.config.node_id} ready · cluster "
        f"{broker.cluster_id}"
    )
    if control is not None:  # before the listeners: their line is the readiness signal
        console.print(f"  control on [bold]http://{control[0]}:{control[1]}[/]")
    for endpoint in broker.endpoints.values():
        console.print(f"  listening on [bold]{endpoint}[/]")
    console.print(f"  data: {where}")
    if broker.http_server.url is not None:
        console.print(f"  metrics on [bold]{broker.http_server.url}/metrics[/]")
        if ui:
            console.print(f"  console on [bold]{broker.http_server.url}/ui/[/]")
    if not NATIVE_RECORD_WALK:
        console.print(
            "  record walk: pure Python (the C extension is not built, or TRIKAFKA_PURE_PYTHON "
            "is set): produce of small messages is slower"
        )
    console.print("  Ctrl-C stops gracefully")


async def _serve_cluster(config: BrokerConfig, brokers: int, control_at: tuple[str, int] | None, ui: bool = False) -> None:
    """``--brokers N``: an in-process cluster until SIGINT or SIGTERM (then a graceful stop)."""
    import signal

    from rich.console import Console

    from trikafka.cluster import open_cluster

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_cluster(brokers, config) as cluster, trio.open_nursery() as nursery:
            console = Console(stderr=True)
            # First, so that whoever waits for the first "listening on" line has them too.
            console.print(f"[bold green]trikafka[/] cluster of {brokers} brokers · bootstrap.servers={cluster.bootstrap_servers}")
            if control_at is not None:
                from trikafka.testing import ControlServer, broker_targets

                server = ControlServer(lambda: broker_targets(cluster))
                control = await nursery.start(server.serve, *control_at)
                console.print(f"  control on [bold]http://{control[0]}:{control[1]}[/]")
            if ui:  # the cluster's brokers have no HTTP server of their own: one for the console
                from trikafka.web import HttpServer, console_app

                http = HttpServer(config.metrics_host, config.metrics_port, {"/ui": console_app(cluster)})
                await nursery.start(http.run)
                console.print(f"  console on [bold]{http.url}/ui/[/]")
            for node in cluster.nodes.values():
                console.print(f"[bold green]trikafka[/] broker {node.node_id} ready · cluster {cluster.cluster_id}")
                for endpoint in node.endpoints.values():
                    console.print(f"  listening on [bold]{endpoint}[/]")
                console.print(f"  data: {', '.join(node.config.log_dirs or ()) or 'memory (nothing kept)'}")
            console.print("  Ctrl-C stops gracefully")
            async for signum in signals:
                log.info("%s: stopping the cluster gracefully", signal.Signals(signum).name)
                break
            nursery.cancel_scope.cancel()  # the control server ends with the cluster


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; return (before, after).

    Every client connection and every open segment file is a descriptor, and the soft limit
    (often 1,024) is far below what the hard limit allows an unprivileged process. Kafka's
    docs ask operators to raise it; the broker does it for them, and says so.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft >= hard:
        return soft, soft
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):  # e.g. macOS caps it below an "infinite" hard limit
        return soft, soft
    return soft, target


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list_config:
        for key, default, doc in config_keys():
            print(f"{key}={default}\t# {doc}")
        return 0
    try:
        config = build_config(args)
        control_at = parse_control_listener(args.control_listener) if args.control_listener else None
        level = args.log_level.upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ConfigError("--log-level", args.log_level, "allowed values are DEBUG, INFO, WARNING, ERROR")
        if args.brokers < 1:
            raise ConfigError("--brokers", args.brokers, "a number of brokers >= 1")
        if args.ui and config.metrics_port < 0:
            raise ConfigError("metrics.port", config.metrics_port, "--ui serves the console on the HTTP server: a port, 0 for a free one, or leave it unset")
    except (ConfigError, OSError, ValueError) as exc:
        print(f"trikafka: {exc}", file=sys.stderr)
        return 2
    _setup_logging(level)
    before, after = raise_open_file_limit()
    if after != before:
        log.info("raised the open file limit (RLIMIT_NOFILE) from %d to %d", before, after)
    else:
        log.info("open file limit (RLIMIT_NOFILE): %d", after)

    async def serve() -> None:
        broker = Broker(config)
        if args.ui:
            from trikafka.web import console_app

            broker.http_server.mount("/ui", console_app(broker))
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.serve)
            control = None
            if control_at is not None:
                from trikafka.testing import ControlServer, broker_targets

                server = ControlServer(lambda: broker_targets(broker))
                control = await nursery.start(server.serve, *control_at)
            _print_banner(broker, control, ui=args.ui)
            await broker.stopped.wait()
            nursery.cancel_scope.cancel()  # the control server ends with the broker

    try:
        trio.run(serve if args.brokers == 1 else functools.partial(_serve_cluster, config, args.brokers, control_at, args.ui))
    except ConfigError as exc:  # found when the broker is built (a keystore that will not load)
        print(f"trikafka: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"trikafka: cannot start: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
