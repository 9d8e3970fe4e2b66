"""``python -m trikafka``: the dev broker.

``main(argv) -> int`` so tests can drive it. Precedence: defaults < ``--config`` file <
``--override key=value`` < dedicated flags such as ``--listeners``. Kafka's dotted keys work
everywhere.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import logging
import resource
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from trikafka import __version__
from trikafka.commands import COMMANDS
from trikafka.config import BrokerConfig, changed_from_defaults, config_keys, read_properties_file
from trikafka.config.dev import DEV_DEFAULTS, DEV_REASON, with_dev_defaults
from trikafka.config.kafka_versions import KAFKA_VERSIONS
from trikafka.config.served import not_served_summary
from trikafka.errors import ConfigError
from trikafka.output import (
    LOG_FORMATS,
    StartupInfo,
    print_startup,
    recovery_progress,
    setup_logging,
)

# The broker, trio and the record walk are imported where the broker starts (``main``):
# ``--help``, ``--list-config`` and the commands (``topics``, ``produce``, ...) never load
# them (tests/test_startup_imports.py, and the lazy entry points rule of tests/test_layers.py).
if TYPE_CHECKING:
    import trio

    from trikafka.broker import Broker

__all__ = [
    "DEV_DEFAULTS",
    "MEMORY_DEFAULTS",
    "build_config",
    "changed_from_defaults",
    "main",
    "parse_args",
    "raise_open_file_limit",
    "resolve_config",
]

log = logging.getLogger("trikafka")

DEFAULT_DATA_DIR = "./trikafka-data"

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
        epilog="commands (each with --help): topics, produce, consume, groups, configs, cluster, top, schemas, rest",
    )
    parser.add_argument("--version", action="version", version=f"trikafka {__version__}")
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
        "--kafka-defaults",
        action="store_true",
        help="Kafka's own defaults for every key not set, instead of the dev defaults ("
        + ", ".join(f"{key}={value}" for key, (value, _) in DEV_DEFAULTS.items())
        + "); they are listed at start and by --list-config",
    )
    parser.add_argument(
        "--client-telemetry",
        action="store_true",
        help="receive client telemetry (KIP-714; client.telemetry.enable=true): advertise "
        "GetTelemetrySubscriptions and PushTelemetry, so clients push the metrics a "
        "client-metrics subscription asks for",
    )
    parser.add_argument(
        "--brokers",
        type=int,
        default=1,
        metavar="N",
        help="serve a cluster of N brokers in this process: the listener is broker 1's, "
        "brokers 2..N take the following ports (free ports when it is 0)",
    )
    parser.add_argument(
        "--racks",
        metavar="R1,R2,...",
        help="rack ids (broker.rack), one per broker of --brokers N in node-id order (repeating when shorter)",
    )
    parser.add_argument(
        "--kafka-version",
        metavar="X.Y",
        help=f"advertise exactly the API versions and features Kafka X.Y served ({', '.join(KAFKA_VERSIONS)}), "
        f"cut to what trikafka serves: what it lacks of that release ({not_served_summary()}) is logged at "
        "start and listed in docs/version-profiles.md and docs/features.md",
    )
    parser.add_argument(
        "--ui",
        action="store_true",
        help="serve the web console at /ui on the HTTP server (metrics.port; "
        f"{UI_DEFAULT_PORT} when not set)",
    )
    parser.add_argument(
        "--rest-proxy-port",
        type=int,
        metavar="PORT",
        help="serve the HTTP proxy (Confluent's REST Proxy API) on this port (rest.proxy.port; 0: a free one)",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    parser.add_argument(
        "--live",
        action="store_true",
        help="show `top` (requests, connections, topics, groups) for this broker in this terminal; "
        "Ctrl-C stops both",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text: rich on a terminal, plain unwrapped lines in a file or pipe; json: one "
        "object per line",
    )
    parser.add_argument(
        "--list-config",
        action="store_true",
        help="print every key with the value this broker would use (the other flags "
        "included) and exit",
    )
    parser.add_argument(
        "--control-listener",
        metavar="HOST:PORT",
        help="serve the test control interface (faults, recorder, waits) over HTTP, "
        "e.g. 127.0.0.1:0 — for tests only; a host other than loopback needs --control-allow-remote",
    )
    parser.add_argument(
        "--control-allow-remote",
        action="store_true",
        help="let --control-listener bind an address other than loopback (anyone who reaches it "
        "can inject faults and read recorded requests)",
    )
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    return resolve_config(args)[0]


def resolve_config(args: argparse.Namespace) -> tuple[BrokerConfig, dict[str, str]]:
    """The config the broker will run with, and why each key the user did not set has the
    value it has where that is not Kafka's default (``{key: "dev default"}``): the dev defaults
    (``trikafka.config.dev``) unless ``--kafka-defaults``."""
    items: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    if args.config:
        items.update(read_properties_file(args.config))
    for override in args.override:
        key, sep, value = override.partition("=")
        if not sep or not key.strip():
            raise ConfigError(override, override, "--override takes KEY=VALUE")
        items[key.strip()] = value
    if args.listeners:
        items["listeners"] = args.listeners
    flags = (("racks", "broker.rack"), ("kafka_version", "kafka.version"), ("rest_proxy_port", "rest.proxy.port"))
    for flag, key in flags:
        if getattr(args, flag, None) is not None:
            items[key] = getattr(args, flag)
    if args.in_memory:
        items["log.dirs"] = ""
        given = {key.strip().replace("_", ".") for key in items}
        for key, value in MEMORY_DEFAULTS.items():
            if key not in given:
                items[key], reasons[key] = value, "--in-memory"
    elif args.data_dir:
        items["log.dirs"] = args.data_dir
    elif not items.get("log.dirs"):
        items["log.dirs"], reasons["log.dirs"] = DEFAULT_DATA_DIR, DEV_REASON
    given = {key.strip().replace("_", ".") for key in items}
    if getattr(args, "ui", False) and "metrics.port" not in given:
        items["metrics.port"], reasons["metrics.port"] = str(UI_DEFAULT_PORT), "--ui"
    if getattr(args, "client_telemetry", False):
        items["client.telemetry.enable"] = "true"
    if not getattr(args, "kafka_defaults", False):
        items, dev = with_dev_defaults(items)
        reasons.update(dev)
    return BrokerConfig.from_mapping(items), reasons


def parse_control_listener(value: str, allow_remote: bool = False) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError("--control-listener", value, "give HOST:PORT, e.g. 127.0.0.1:0")
    bare = host.strip("[]")
    if not allow_remote and not (bare in ("localhost", "::1") or bare.startswith("127.")):
        raise ConfigError(
            "--control-listener", value,
            "the control interface is a test tool kept on loopback (127.0.0.1, ::1, localhost); "
            "add --control-allow-remote to serve it on another address",
        )
    return host, int(port)


def _startup_info(
    broker: Broker, reasons: dict[str, str], http: dict[str, str], open_files: str
) -> StartupInfo:
    from trikafka.protocol.records import NATIVE_RECORD_WALK

    config = broker.config
    if config.log_dirs:
        where = ", ".join(config.log_dirs)
    elif config.log_retention_bytes >= 0:
        where = f"memory (nothing kept; log.retention.bytes {config.log_retention_bytes:,} per partition)"
    else:
        where = "memory (nothing kept; log.retention.bytes -1: no limit)"
    if broker.http_server.url is not None:
        for prefix in sorted(broker.http_server.router.routes):
            http[prefix.strip("/") or "http"] = broker.http_server.url + prefix
    if broker.schema_registry_url is not None:
        http["schema registry"] = broker.schema_registry_url
    if broker.rest_proxy_url is not None:
        http["rest proxy"] = broker.rest_proxy_url
    notes = []
    if not NATIVE_RECORD_WALK:
        notes.append(
            "record walk: pure Python (the C extension is not built, or TRIKAFKA_PURE_PYTHON "
            "is set): produce of small messages is slower"
        )
    return StartupInfo(
        version=__version__,
        node_id=config.node_id,
        cluster_id=broker.cluster_id,
        listeners=[str(endpoint) for endpoint in broker.endpoints.values()],
        data=where,
        changed=changed_from_defaults(config, reasons),
        http=http,
        notes=notes,
        open_files=open_files,
        partition_cap=config.max_broker_partitions,
    )


def _list_config(args: argparse.Namespace) -> int:
    """``--list-config``: every key with the value this broker would use."""
    try:
        config, reasons = resolve_config(args)
    except (ConfigError, OSError, ValueError) as exc:
        print(f"trikafka: {exc}", file=sys.stderr)
        return 2
    actual = config.as_properties()
    for key, default, doc in config_keys():
        value = actual.get(key, default)
        note = ""
        if value != default:
            why = reasons.get(key, "set")
            note = f" [{why}; default {default or '(empty)'}]"
        print(f"{key}={value}\t# {doc}{note}")
    return 0


async def _serve_cluster(
    config: BrokerConfig, brokers: int, control_at: tuple[str, int] | None, reasons: dict[str, str],
    shape: str, open_files: str, ui: bool = False,
) -> None:
    """``--brokers N``: an in-process cluster until SIGINT or SIGTERM (then a graceful stop).
    With ``metrics.port`` each broker serves its own /metrics: broker 1 on that port, the
    others on the following ports (free ports when it is 0), as with the listeners; so with
    ``schema.registry.port`` each serves the cluster's one Schema Registry. ``--ui``
    mounts the console (the whole cluster's) on broker 1's."""
    import signal

    import trio

    from trikafka.cluster import open_cluster
    from trikafka.console import console_app
    from trikafka.web import HttpServer, metrics_app, schema_registry_app

    # Every port is bound before the brokers say they listen: the control listener and each
    # broker's HTTP server (broker 1 on metrics.port, the others on the following ports).
    control_server, control_bound, webs = None, [], []
    if control_at is not None:
        from trikafka.testing import ControlServer, broker_targets

        control_server = ControlServer(lambda: broker_targets(cluster), cluster=lambda: cluster)
        control_bound = await control_server.bind(*control_at)
    from trikafka.security.sasl.credentials import ScramCredentials
    from trikafka.web.security import http_security

    # The cluster's SCRAM users are read from the same places (config, data directory) when
    # it opens; this store is filled the same way, for the servers bound before that.
    early = ScramCredentials.from_config(config.security, [s.name for s in config.listeners], config.log_dirs)
    secured = http_security(config, early)
    if config.metrics_port >= 0:
        for i in range(brokers):
            port = config.metrics_port + i if config.metrics_port else 0
            webs.append(HttpServer(config.metrics_host, port, **secured.server_options()))
            webs[-1].bind()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_cluster(brokers, config) as cluster, trio.open_nursery() as nursery:
            if secured.users is not None:  # the cluster's own store: AlterUserScramCredentials' users count
                secured.users.scram = cluster.core.scram_credentials
            # First, so that whoever waits for the first "listening on" line has them too.
            header = f"trikafka cluster of {brokers} brokers · bootstrap.servers={cluster.bootstrap_servers}"
            if shape == "json":
                log.info(
                    "%s", header, extra={"fields": {"event": "cluster", "bootstrap_servers": cluster.bootstrap_servers}}
                )
            else:
                print(header, file=sys.stderr, flush=True)
            control = None
            if control_server is not None and control_at is not None:
                control = await nursery.start(
                    functools.partial(control_server.serve, *control_at, listeners=control_bound)
                )
            nodes = list(cluster.nodes.values())
            proxy = None
            registry_urls: list[str] = []  # the console reads the first broker's, once it is bound
            for i, node in enumerate(nodes):
                http = {"control": f"http://{control[0]}:{control[1]}"} if control and i == 0 else {}
                if webs:
                    web = webs[i]
                    web.mount("/metrics", metrics_app(node), public=True)
                    if ui and i == 0:
                        web.mount(
                            "/ui",
                            console_app(cluster, schema_registry_url=lambda: next(iter(registry_urls), None)),
                        )
                    await nursery.start(web.run)
                    http["metrics"] = f"{web.url}/metrics"
                    if ui and i == 0:
                        http["ui"] = f"{web.url}/ui"
                if config.schema_registry_port >= 0:  # every broker serves the cluster's registry
                    port = config.schema_registry_port + i if config.schema_registry_port else 0
                    acls = cluster.core.acls
                    registry = HttpServer(
                        config.metrics_host, port,
                        {"/": schema_registry_app(cluster.core.schemas, acls.authorizer if acls else None)},
                        **secured.server_options(),
                    )
                    await nursery.start(registry.run)
                    http["schema registry"] = registry.url or ""
                    if registry.url:
                        registry_urls.append(registry.url)
                if config.rest_proxy_port >= 0 and i == 0:  # broker 1 serves the cluster's proxy
                    from trikafka.rest import RestProxy

                    proxy = RestProxy(
                        cluster, registry=cluster.core.schemas,
                        consumer_instance_timeout_ms=config.consumer_instance_timeout_ms,
                    )
                    await nursery.start(proxy.run)
                    rest = HttpServer(
                        config.metrics_host, config.rest_proxy_port, {"/": proxy.app}, key="rest.proxy.port",
                        **secured.server_options(),
                    )
                    await nursery.start(rest.run)
                    http["rest proxy"] = rest.url or ""
                info = StartupInfo(
                    version=__version__,
                    node_id=node.node_id,
                    cluster_id=cluster.cluster_id,
                    listeners=[str(endpoint) for endpoint in node.endpoints.values()],
                    data=", ".join(node.config.log_dirs or ()) or "memory (nothing kept)",
                    changed=changed_from_defaults(config, reasons) if i == 0 else {},
                    http=http,
                    open_files=open_files if i == 0 else None,
                    partition_cap=node.config.max_broker_partitions,
                )
                print_startup(info, shape, closing=i == len(nodes) - 1)
            _freeze_startup_objects()
            async for signum in signals:
                log.info("%s: stopping the cluster gracefully", signal.Signals(signum).name)
                break
            if proxy is not None:  # its consumer instances leave their groups while the cluster serves
                with trio.move_on_after(config.shutdown_grace_ms / 1000):
                    await proxy.aclose()
            nursery.cancel_scope.cancel()  # the control and HTTP servers end with the cluster


async def _watch(broker: Broker, scope: trio.CancelScope) -> None:
    """``--live``: top's view of this broker; when it ends (an error it showed), so does the
    broker's process, the way a foreground program ends."""
    from trikafka.commands import watch_broker

    try:
        await watch_broker(broker)
    finally:
        scope.cancel()


@contextlib.contextmanager
def _imports_not_collected() -> Iterator[None]:
    """Import the broker without the cyclic collector, then freeze what the imports made.

    Importing trio and the broker makes some 14 MB of objects (modules, functions, classes)
    that live as long as the process; the collector ran about a hundred times over them while
    they were made, a tenth of the imports' time, and found little to free (mostly the classes
    attrs replaces with slotted ones). So the imports run with the collector off, and what
    they made is frozen (``gc.freeze``, Python's way to keep long-lived start-up objects out
    of every later collection; the replaced classes, about 1 MB, are frozen with them) before
    the collector is back on — before the broker is built, so recovering a data directory
    runs collected as before. A caller that had the collector off keeps it off.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def _freeze_startup_objects() -> None:
    """Move everything alive once the broker is up out of the collector's reach.

    The objects built at start-up (modules, kio's schema classes, the config, the broker's
    parts) live as long as the process; each full (generation 2) collection walked all of
    them: 7.4 ms with the ~60,000 a broker holds after its first clients, a pause every
    request in flight waits out. Frozen, a full collection walks only what came later
    (0.0 ms measured right after; ``gc.freeze``). Only the CLI does this: an embedded broker
    shares its process with the application, whose objects are not ours to freeze.
    """
    gc.freeze()


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


def _os_error(exc: BaseException) -> OSError | None:
    """The OSError a start-up failed with, also from inside nurseries' exception groups
    (a port taken): one line for the user, not a traceback."""
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _os_error(exc.exceptions[0])
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in COMMANDS:  # `python -m trikafka topics ...`: a command, not the broker
        from trikafka.commands import main as command_main

        return command_main(argv)
    args = parse_args(argv)
    if args.list_config:
        return _list_config(args)
    try:
        level = args.log_level.upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ConfigError("--log-level", args.log_level, "allowed values are DEBUG, INFO, WARNING, ERROR")
        shape = setup_logging(level, args.log_format)  # first: reading the config may log (Kafka keys with no effect)
        config, reasons = resolve_config(args)
        control_at = (
            parse_control_listener(args.control_listener, args.control_allow_remote) if args.control_listener else None
        )
        if args.brokers < 1:
            raise ConfigError("--brokers", args.brokers, "a number of brokers >= 1")
        if args.live and args.brokers != 1:
            raise ConfigError("--live", True, "shows one broker; use `python -m trikafka top` against a cluster")
        if args.ui and config.metrics_port < 0:
            raise ConfigError(
                "metrics.port",
                config.metrics_port,
                "--ui serves the console on the HTTP server: a port, 0 for a free one, or leave it unset",
            )
    except (ConfigError, OSError, ValueError) as exc:
        print(f"trikafka: {exc}", file=sys.stderr)
        return 2
    with _imports_not_collected():
        import trio

        from trikafka.broker import Broker

    before, after = raise_open_file_limit()
    open_files = f"{after}" + (f" (raised from {before})" if after != before else "")

    async def serve() -> None:
        broker = Broker(config, load_progress=recovery_progress(shape))
        if args.ui:
            from trikafka.console import console_app

            broker.http_server.mount(
                "/ui",
                console_app(
                    broker,
                    schema_registry_url=lambda: broker.schema_registry_url,
                    rest_proxy_url=lambda: broker.rest_proxy_url,
                ),
            )
        proxy = None
        if config.rest_proxy_port >= 0:
            from trikafka.rest import serve_rest_proxy

            proxy = serve_rest_proxy(broker)
        server = None
        if control_at is not None:  # bound first: nothing is said to have started before it
            from trikafka.testing import ControlServer, broker_targets

            server = ControlServer(lambda: broker_targets(broker))
            bound = await server.bind(*control_at)
        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(broker.serve)
            except BaseException:
                if server is not None:
                    for listener in bound:
                        await trio.aclose_forcefully(listener)
                raise
            if proxy is not None:
                await nursery.start(proxy.run)
            http = {}
            if server is not None and control_at is not None:
                control = await nursery.start(functools.partial(server.serve, *control_at, listeners=bound))
                http["control"] = f"http://{control[0]}:{control[1]}"
            print_startup(_startup_info(broker, reasons, http, open_files), shape)
            _freeze_startup_objects()
            if args.live:
                nursery.start_soon(_watch, broker, nursery.cancel_scope)
            await broker.stopped.wait()
            nursery.cancel_scope.cancel()  # the control server (and --live's view) end with the broker

    cluster = functools.partial(_serve_cluster, config, args.brokers, control_at, reasons, shape, open_files, args.ui)
    try:
        trio.run(serve if args.brokers == 1 else cluster)
    except ConfigError as exc:  # found when the broker is built (a keystore that will not load)
        print(f"trikafka: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:
        error = _os_error(exc)
        if error is None:
            raise
        print(f"trikafka: cannot start: {error}", file=sys.stderr)
        return 1
    return 0
