"""SocketServer: binds the listeners and runs their Acceptors and Processors.

Nursery shape (docs/architecture.md §2)::

    SocketServer.run
    ├── Processor[listener, i]   num.network.threads per listener, each owning its connections
    └── acceptors                one nested nursery, so shutdown can stop accepting first
        └── Acceptor[listener]

Graceful shutdown (``begin_shutdown``): cancel the acceptors (listeners close, and each
acceptor closes its processors' queues); every processor stops reading, lets in-flight
responses finish until the grace deadline, and closes its connections. ``run`` returns when
the last connection is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

import trio

from trikafka.network.acceptor import Acceptor
from trikafka.network.endpoints import BoundEndpoint
from trikafka.network.processor import Processor
from trikafka.network.quotas import ConnectionQuotas
from trikafka.security.listener import listener_security
from trikafka.security.sasl.credentials import ScramCredentials

if TYPE_CHECKING:
    from trikafka.config import BrokerConfig
    from trikafka.metrics import BrokerMetrics
    from trikafka.network.request_channel import RequestChannel
    from trikafka.protocol.registry import ApiRegistry

__all__ = ["SocketServer"]

log = logging.getLogger("trikafka.network")


class SocketServer:
    def __init__(
        self,
        config: BrokerConfig,
        registry: ApiRegistry,
        request_channel: RequestChannel,
        metrics: BrokerMetrics,
        listeners: Mapping[str, trio.abc.Listener] | None = None,
        scram_credentials: ScramCredentials | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.request_channel = request_channel
        self.metrics = metrics
        self.quotas = ConnectionQuotas(
            config.max_connections,
            config.max_connections_per_ip,
            config.max_connections_per_ip_overrides,
            config.max_connection_creation_rate,
            config.quota_window_num,
            config.quota_window_size_seconds,
        )
        self._given_listeners = dict(listeners or {})
        # TLS contexts and SASL settings when the broker is built: a bad keystore is a
        # ConfigError before anything is bound.
        names = [s.name for s in config.listeners]
        #: SCRAM users, shared by every SASL listener (bootstrapped from the config).
        self.scram_credentials = scram_credentials or ScramCredentials.from_config(
            config.security, names, config.log_dirs
        )
        self.security = {
            name: listener_security(config.security, name, self.scram_credentials) for name in names
        }
        self.endpoints: dict[str, BoundEndpoint] = {}
        self.processors: dict[str, list[Processor]] = {}
        self.acceptors: dict[str, Acceptor] = {}
        self._acceptor_scope = trio.CancelScope()
        self.stopped = trio.Event()

    async def _bind(self) -> dict[str, trio.abc.Listener]:
        bound: dict[str, trio.abc.Listener] = {}
        try:
            for spec in self.config.listeners:
                given = self._given_listeners.get(spec.name)
                if given is not None:
                    bound[spec.name] = given
                    self.endpoints[spec.name] = BoundEndpoint(spec.name, spec.host, spec.port)
                    continue
                host = spec.host or "0.0.0.0"
                try:
                    tcp = await trio.open_tcp_listeners(spec.port, host=host)
                except OSError as exc:  # name the address: "Address already in use" alone does not
                    raise OSError(exc.errno, f"{exc.strerror}: {host}:{spec.port} (listener {spec.name})") from exc
                # One address per listener entry: a hostname that resolves to several
                # addresses would give several ports for port 0; Kafka binds one.
                for extra in tcp[1:]:
                    await extra.aclose()
                listener = tcp[0]
                sockname = listener.socket.getsockname()
                bound[spec.name] = listener
                self.endpoints[spec.name] = BoundEndpoint(spec.name, sockname[0], sockname[1])
        except BaseException:
            for listener in bound.values():
                await trio.aclose_forcefully(listener)  # type: ignore[arg-type]
            raise
        return bound

    async def run(
        self, *, task_status: trio.TaskStatus[dict[str, BoundEndpoint]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        listeners = await self._bind()
        try:
            async with trio.open_nursery() as nursery:
                for name in listeners:
                    processors = [
                        Processor(
                            self._next_processor_id(),
                            name,
                            config=self.config,
                            registry=self.registry,
                            request_channel=self.request_channel,
                            quotas=self.quotas,
                            metrics=self.metrics,
                            security=self.security[name],
                        )
                        for _ in range(self.config.num_network_threads)
                    ]
                    self.processors[name] = processors
                    for processor in processors:
                        await nursery.start(processor.run, name=processor.name)
                    self.acceptors[name] = Acceptor(
                        name, listeners[name], processors, self.quotas, self.metrics
                    )
                await nursery.start(self._run_acceptors)
                for endpoint in self.endpoints.values():
                    log.info("listening on %s", endpoint)
                task_status.started(dict(self.endpoints))
        finally:
            self.stopped.set()

    _processor_count = 0

    def _next_processor_id(self) -> int:
        value = self._processor_count
        self._processor_count += 1
        return value

    async def _run_acceptors(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with self._acceptor_scope:
                async with trio.open_nursery() as nursery:
                    for acceptor in self.acceptors.values():
                        await nursery.start(acceptor.run, name=acceptor.name)
                    task_status.started()
        finally:
            # Idempotent: covers acceptors cancelled before they started. Closing the
            # processors' queues is what ends their accept loops.
            with trio.CancelScope(shield=True):
                for acceptor in self.acceptors.values():
                    await trio.aclose_forcefully(acceptor.listener)  # type: ignore[arg-type]
                    for processor in acceptor.processors:
                        await processor.new_connections_send.aclose()

    def begin_shutdown(self, grace_seconds: float) -> None:
        self._acceptor_scope.cancel()
        deadline = trio.current_time() + grace_seconds
        for processors in self.processors.values():
            for processor in processors:
                processor.begin_shutdown(deadline)

    def all_processors(self) -> list[Processor]:
        return [p for ps in self.processors.values() for p in ps]
