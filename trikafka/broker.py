"""The broker: builds every part from a BrokerConfig and runs them in one nursery tree.

::

    Broker.run                          (root nursery; stops everything on exit)
    ├── LogManager              retention, time-based flush, checkpoints; flush and close on exit
    ├── LogCleaner              compaction, when log.cleaner.enable
    ├── GroupCoordinator        session and rebalance deadlines, offset expiry
    ├── TransactionCoordinator  recovery, transaction timeouts, fencing aborts (markers)
    ├── RequestPath             broker.path (server/wiring.py), one lifecycle:
    │   ├── Purgatory           one task per delayed operation (long-poll Fetch, JoinGroup, ...)
    │   ├── RequestHandlerPool  num.io.threads handler tasks  ◄── requests ── shared channel
    │   └── SocketServer        Acceptors and Processors (see network/socket_server.py)
    ├── HttpServer              /metrics and mounted apps, when metrics.port is set (web/)
    ├── HttpServer              the Schema Registry, when schema.registry.port is set (web/)
    └── HttpServer              the HTTP proxy, when rest.proxy.port is set (web/; the
                                proxy itself, trikafka.rest, is mounted from an edge)

Parts start in dependency order with ``nursery.start`` so that "ready" means ready: when
``run`` reports started, every listener is bound and every handler is waiting.

Graceful stop (``stop()``, SIGINT/SIGTERM in the CLI, leaving ``open_broker``) is
``RequestPath.aclose``: delayed operations answer, acceptors stop; processors stop reading,
finish in-flight responses within ``shutdown.grace.ms`` and close their connections; then
the handlers are cancelled; then everything else —
coordinators, the log manager — is cancelled. Requests still queued at that point
belong to connections that are already closed (their in-flight responses had the grace to
finish), so no answer could reach their clients: they are dropped unprocessed rather than
applied behind the client's back (a Produce nobody acknowledges would be retried and
duplicated). Cancelling ``run`` from outside skips the grace: stop is cancellation.

Wiring: :mod:`trikafka.server.wiring` builds the parts (the same code builds each node of an
in-process cluster): a :class:`~trikafka.server.wiring.BrokerCore` (coordinators, SCRAM users,
ACLs, client quotas) and a :class:`~trikafka.server.wiring.RequestPath` (socket server, channel,
handlers, one typed ApiContext for every API family). The one wall clock
(:func:`trikafka.clock.now_ms`, epoch ms following trio's clock) is injected into the log
manager, the coordinators and the APIs.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import trio

from trikafka.clock import Clock, now_ms
from trikafka.config import BrokerConfig
from trikafka.config.racks import rack_of
from trikafka.log.cleaner import LogCleaner
from trikafka.log.manager import LoadProgress
from trikafka.network.endpoints import BoundEndpoint, endpoint_address
from trikafka.registry.extra import require_registry_extra
from trikafka.server.api_table import log_kafka_profile
from trikafka.server.awaitable import AwaitableState
from trikafka.server.metadata_cache import MetadataCache
from trikafka.server.replica.replica_manager import ReplicaManager
from trikafka.server.wiring import (
    API_FAMILIES,
    BrokerCore,
    RequestPath,
    follow_cleaner_configs,
    load_meta_properties,
    new_log_manager,
)
from trikafka.web import HttpServer, metrics_app, not_attached_app, schema_registry_app
from trikafka.web.security import http_security

if TYPE_CHECKING:
    from trikafka.coordinator.group_coordinator import GroupCoordinator
    from trikafka.coordinator.transactions.transaction_coordinator import TransactionCoordinator

__all__ = ["API_FAMILIES", "Broker", "BrokerStatistics", "open_broker", "load_meta_properties"]

log = logging.getLogger("trikafka.broker")


@attrs.frozen
class BrokerStatistics:
    request_queue_size: int
    network_processor_avg_idle_percent: float
    request_handler_avg_idle_percent: float
    connections: Mapping[str, Mapping[str, object]]
    requests: Mapping[str, Mapping[str, object]]
    purgatory_size: int
    #: queued.max.request.bytes (Kafka's MemoryPoolAvailable / MemoryPoolUsed); None: unbounded.
    memory_pool_available: int | None = None
    memory_pool_used: int = 0


class Broker(AwaitableState):
    def __init__(
        self,
        config: BrokerConfig | None = None,
        *,
        trio_listeners: Mapping[str, trio.abc.Listener[trio.abc.Stream]] | None = None,
        clock: Clock = now_ms,
        load_progress: LoadProgress | None = None,
    ) -> None:
        """``load_progress`` hears how loading the log directories goes (see LogManager)."""
        self.config = config or BrokerConfig()
        if self.config.schema_registry_port >= 0:  # before anything is made: no data dir left behind
            require_registry_extra(self.config.schema_registry_port)
        #: Epoch milliseconds following trio's clock, for every timestamp the broker makes.
        self.now_ms: Clock = clock
        self.cluster_id = load_meta_properties(self.config)
        self.metadata_cache = MetadataCache(self.config, self.cluster_id)
        self.log_manager = new_log_manager(self.config, self.now_ms, load_progress)
        self.log_cleaner = LogCleaner(
            self.log_manager,
            backoff_ms=self.config.log_cleaner_backoff_ms,
            clock=self.now_ms,
            dedupe_buffer_size=self.config.log_cleaner_dedupe_buffer_size,
        )
        self.replica_manager = ReplicaManager(self.config, self.log_manager)  # type: ignore[arg-type]  # flush_log takes its own Log
        #: The coordinators and stores, and the request path over them (server/wiring.py).
        self.core = BrokerCore(self.config, self.replica_manager, self.now_ms)
        #: The request path: registry, socket server, request channel, handler pool,
        #: purgatory, KafkaApis, metrics — one lifecycle (``RequestPath.run``/``aclose``).
        self.path = RequestPath(self.config, self.core, self.metadata_cache, trio_listeners=trio_listeners)
        follow_cleaner_configs(self.core, self.config, self.log_cleaner)
        #: Every HTTP port's login and TLS (see trikafka.web.security).
        self.http_security = http_security(self.config, self.core.scram_credentials)
        #: The broker's SASL users as HTTP Basic users, when the HTTP ports ask for them
        #: (``http.authentication.method``; by default whenever a listener uses SASL).
        self.http_users = self.http_security.users
        tls = self.http_security.ssl_context
        #: ``/metrics`` and whatever else is mounted (``http_server.mount("/ui", app)``);
        #: it runs when ``metrics.port`` is not -1.
        self.http_server = HttpServer(
            self.config.metrics_host, max(self.config.metrics_port, 0), users=self.http_users, ssl_context=tls
        )
        #: The Schema Registry's REST API over ``core.schemas``, when ``schema.registry.port``
        #: is not -1 (on ``metrics.host``).
        self.schema_registry_server = HttpServer(
            self.config.metrics_host, max(self.config.schema_registry_port, 0), key="schema.registry.port",
            users=self.http_users, ssl_context=tls,
        )
        #: The HTTP proxy's port, when ``rest.proxy.port`` is not -1 (on ``metrics.host``).
        #: The proxy is an edge (trikafka.rest) mounted here from outside — the CLI, or
        #: ``trikafka.rest.serve_rest_proxy(broker)``; until then every route answers 503.
        self.rest_proxy_server = HttpServer(
            self.config.metrics_host, max(self.config.rest_proxy_port, 0), key="rest.proxy.port",
            users=self.http_users, ssl_context=tls,
        )
        self.rest_proxy_server.mount("/", not_attached_app)
        #: Coroutine functions a graceful stop runs first, while the request path still serves,
        #: within shutdown.grace.ms: an edge running beside the broker (the HTTP proxy) closes
        #: its Kafka clients here, so its consumers leave their groups before the broker goes.
        self.before_stop: list[Callable[[], Awaitable[object]]] = []
        self._stop_requested = trio.Event()
        self.stopped = trio.Event()
        self.endpoints: dict[str, BoundEndpoint] = {}
        self._nursery: trio.Nursery | None = None

    # --- lifecycle ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
        serve_http = self.config.metrics_port >= 0
        if serve_http:
            # Every port is bound before anything says it started: a taken metrics.port fails
            # the start before the listeners log "listening on" (the socket server binds and
            # logs in one step, so the HTTP server's port is taken first).
            self.http_server.bind()
        serve_registry = self.config.schema_registry_port >= 0
        if serve_registry:
            try:
                self.schema_registry_server.bind()
            except BaseException:
                if serve_http:
                    self.http_server.close()
                raise
        serve_proxy = self.config.rest_proxy_port >= 0
        if serve_proxy:
            try:
                self.rest_proxy_server.bind()
            except BaseException:
                if serve_http:
                    self.http_server.close()
                if serve_registry:
                    self.schema_registry_server.close()
                raise
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.log_manager.run, name="log-manager")
                if self.config.log_cleaner_enable:
                    await nursery.start(self.log_cleaner.run, name="log-cleaner")
                await self.core.run_coordinators(nursery)
                self.endpoints = await nursery.start(self.path.run, name="request-path")
                self.metadata_cache.set_bound_endpoints(self.endpoints)
                if serve_http:
                    self.http_server.mount("/metrics", metrics_app(self), public=True)
                    await nursery.start(self.http_server.run, name="http-server")
                    serve_http = False  # run() owns the socket now
                if serve_registry:
                    acls = self.core.acls
                    self.schema_registry_server.mount(
                        "/", schema_registry_app(self.core.schemas, acls.authorizer if acls else None)
                    )
                    await nursery.start(self.schema_registry_server.run, name="schema-registry")
                    serve_registry = False
                if serve_proxy:
                    await nursery.start(self.rest_proxy_server.run, name="rest-proxy")
                    serve_proxy = False
                log.info(
                    "broker %d of cluster %s started: %s",
                    self.config.node_id,
                    self.cluster_id,
                    ", ".join(map(str, self.endpoints.values())),
                )
                log_kafka_profile(self.config, log)
                task_status.started(self)
                await self._stop_requested.wait()
                await self._shutdown(nursery)
        finally:
            if serve_http:  # bound, never served: the start failed before
                self.http_server.close()
            if serve_registry:
                self.schema_registry_server.close()
            if serve_proxy:
                self.rest_proxy_server.close()
            self.stopped.set()

    async def _shutdown(self, nursery: trio.Nursery) -> None:
        log.info("broker %d shutting down", self.config.node_id)
        with trio.move_on_after(self.config.shutdown_grace_ms / 1000):
            for hook in list(self.before_stop):
                await hook()
        self.http_server.stop()  # it finishes in-flight scrapes while connections drain
        self.schema_registry_server.stop()
        self.rest_proxy_server.stop()
        await self.path.aclose()
        nursery.cancel_scope.cancel()  # coordinators, the log manager, the rest
        log.info("broker %d stopped", self.config.node_id)

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object, name: str | None = None) -> None:
        """Run ``fn(*args)`` as a background task of the running broker (cancelled when it
        stops): what the test kit's scenarios run in."""
        if self._nursery is None or self.stopped.is_set():
            raise RuntimeError(f"broker {self.config.node_id} is not running")
        self._nursery.start_soon(fn, *args, name=name)

    def stop(self) -> None:
        """Begin a graceful stop; ``run`` returns when it is done."""
        self._stop_requested.set()

    async def serve(self, *, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until SIGINT or SIGTERM (graceful); a second signal stops at once."""
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.run)
                task_status.started(self)

                async def watch_signals() -> None:
                    async for signum in signals:
                        if self._stop_requested.is_set():
                            log.warning("second %s: stopping now", signal.Signals(signum).name)
                            nursery.cancel_scope.cancel()
                            return
                        log.info("%s: stopping gracefully", signal.Signals(signum).name)
                        self.stop()

                nursery.start_soon(watch_signals)
                await self.stopped.wait()
                nursery.cancel_scope.cancel()

    # --- what users read ---------------------------------------------------------------

    @property
    def group_coordinator(self) -> GroupCoordinator:
        """``core.groups`` (built on first use without a data directory)."""
        return self.core.groups

    @property
    def transaction_coordinator(self) -> TransactionCoordinator:
        """``core.transactions`` (built on first use without a data directory)."""
        return self.core.transactions

    @property
    def port(self) -> int:
        """The bound port of the first listener (handy with port 0)."""
        return next(iter(self.endpoints.values())).port

    @property
    def rack(self) -> str | None:
        """This broker's rack (``broker.rack``; a list's first entry), as Metadata shows it."""
        return rack_of(self.config.broker_rack, 0)

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the first listener, as ``bootstrap.servers`` takes it."""
        return self.address(next(iter(self.endpoints)))

    def address(self, listener_name: str) -> str:
        """``host:port`` of the named listener (``[host]:port`` for an IPv6 host)."""
        return endpoint_address(self.endpoints[listener_name])

    @property
    def schema_registry_url(self) -> str | None:
        """``http://host:port`` of the Schema Registry, or None without ``schema.registry.port``."""
        return self.schema_registry_server.url if self.config.schema_registry_port >= 0 else None

    @property
    def rest_proxy_url(self) -> str | None:
        """``http://host:port`` of the HTTP proxy, or None without ``rest.proxy.port``."""
        return self.rest_proxy_server.url if self.config.rest_proxy_port >= 0 else None

    def statistics(self) -> BrokerStatistics:
        path = self.path
        processors = [p.statistics() for p in path.socket_server.all_processors()]
        idle = sum(p.idle_percent for p in processors) / len(processors) if processors else 1.0
        channel = path.request_channel.statistics()
        return BrokerStatistics(
            request_queue_size=channel.queue_size,
            memory_pool_available=channel.memory_pool_available,
            memory_pool_used=channel.memory_pool_used,
            network_processor_avg_idle_percent=idle,
            request_handler_avg_idle_percent=path.handler_pool.statistics().idle_percent,
            connections={
                name: attrs.asdict(m) for name, m in path.metrics.connections.items()
            },
            requests={name: m.snapshot() for name, m in path.metrics.requests.items()},
            purgatory_size=path.purgatory.statistics().delayed,
        )


@asynccontextmanager
async def open_broker(
    config: BrokerConfig | Mapping[str, object] | None = None,
    *,
    trio_listeners: Mapping[str, trio.abc.Listener[trio.abc.Stream]] | None = None,
    kafka_defaults: bool = False,
    client_telemetry: bool | None = None,
    **overrides: object,
) -> AsyncIterator[Broker]:
    """Run a broker for the duration of the block; every listener is bound on entry.

    ``config`` is a BrokerConfig (taken as it is) or a mapping of Kafka keys, under the dev
    defaults of ``python -m trikafka`` (``trikafka.config.dev.DEV_DEFAULTS``: a lone
    consumer's group forms at once, ...) unless ``kafka_defaults=True``; keyword overrides
    accept either spelling (``num_io_threads=2``). With no ``listeners`` given, the broker
    binds an ephemeral port on 127.0.0.1 — read it from ``broker.port``. ``client_telemetry=True``
    is ``client.telemetry.enable=true`` (KIP-714). ``trio_listeners`` maps a listener name to a
    ready ``trio.abc.Listener`` (the in-memory one, TLS) to use instead of binding a socket for it.
    """
    if client_telemetry is not None:
        overrides["client.telemetry.enable"] = client_telemetry
    config = BrokerConfig.coerce(config, kafka_defaults=kafka_defaults, **overrides)
    broker = Broker(config, trio_listeners=trio_listeners)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        try:
            yield broker
        finally:
            broker.stop()

