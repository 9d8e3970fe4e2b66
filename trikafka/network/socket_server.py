"""SocketServer: binds the listeners and runs their Acceptors and Processors.

Nursery shape (docs/architecture.md §2)::

    SocketServer.run
    ├── Processor[listener, i]   num.network.threads per listener, each owning its connections
    └── accepting                one nested nursery: binds the listeners, owns them
        └── Acceptor[listener]

Everything it needs of the broker config comes as one frozen :class:`SocketServerSettings`;
the connection quotas and each listener's security (TLS context, SASL over the broker's one
set of SCRAM users) are built by ``server/wiring.py`` and handed in.

Stopping gracefully (:meth:`aclose`): the accepting phase is cancelled, which closes the
listeners (this class owns them: it bound them) and ends every acceptor, and each acceptor
closes its processors' newConnections on its way out — the processors' signal to stop
reading and give in-flight responses shutdown.grace.ms (``network/processor.py``). ``run``
returns when the last connection is closed. Cancelling ``run`` closes everything at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from trikafka.config.fields import ListenerSpec
from trikafka.network.acceptor import Acceptor
from trikafka.network.endpoints import BoundEndpoint
from trikafka.network.processor import Processor, ProcessorSettings

if TYPE_CHECKING:
    from trikafka.metrics import BrokerMetrics
    from trikafka.network.quotas import ConnectionQuotas
    from trikafka.network.request_channel import RequestChannel
    from trikafka.protocol.registry import ApiRegistry
    from trikafka.security.listener import ListenerSecurity

__all__ = ["SocketServer", "SocketServerSettings"]

log = logging.getLogger("trikafka.network")


@attrs.frozen
class SocketServerSettings:
    """What the socket server needs of the broker config (built once by ``server/wiring.py``)."""

    listeners: tuple[ListenerSpec, ...]
    num_network_threads: int  # num.network.threads: processors per listener
    processor: ProcessorSettings = ProcessorSettings()


class SocketServer:
    def __init__(
        self,
        settings: SocketServerSettings,
        registry: ApiRegistry,
        request_channel: RequestChannel,
        metrics: BrokerMetrics,
        quotas: ConnectionQuotas,
        security: Mapping[str, ListenerSecurity],
        listeners: Mapping[str, trio.abc.Listener[trio.abc.Stream]] | None = None,
        disconnect_listeners: Sequence[Callable[[str], None]] = (),
    ) -> None:
        self.settings = settings
        #: Kafka's ConnectionDisconnectListeners: each told the id of every connection that closes.
        self.disconnect_listeners = tuple(disconnect_listeners)
        self.registry = registry
        self.request_channel = request_channel
        self.metrics = metrics
        self.quotas = quotas
        #: Each listener's TLS and SASL, by listener name (missing: plaintext).
        self.security = dict(security)
        self._given_listeners = dict(listeners or {})
        self.endpoints: dict[str, BoundEndpoint] = {}
        self.processors: dict[str, list[Processor]] = {}
        self.acceptors: dict[str, Acceptor] = {}
        self._accepting = trio.CancelScope()
        self._stopped = trio.Event()

    async def run(
        self, *, task_status: trio.TaskStatus[dict[str, BoundEndpoint]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            async with trio.open_nursery() as nursery:
                for spec in self.settings.listeners:
                    processors = [
                        Processor(
                            self._next_processor_id(),
                            spec.name,
                            settings=self.settings.processor,
                            registry=self.registry,
                            request_channel=self.request_channel,
                            quotas=self.quotas,
                            metrics=self.metrics,
                            security=self.security.get(spec.name),
                            disconnect_listeners=self.disconnect_listeners,
                        )
                        for _ in range(self.settings.num_network_threads)
                    ]
                    self.processors[spec.name] = processors
                    for processor in processors:
                        await nursery.start(processor.run, name=processor.name)
                await nursery.start(self._accept)
                for endpoint in self.endpoints.values():
                    log.info("listening on %s", endpoint)
                task_status.started(dict(self.endpoints))
        finally:
            self._stopped.set()

    async def aclose(self) -> None:
        """Stop gracefully (module docstring): stop accepting now; return once every
        connection has written its in-flight answer (within shutdown.grace.ms) or closed."""
        self._accepting.cancel()
        await self._stopped.wait()

    _processor_count = 0

    def _next_processor_id(self) -> int:
        value = self._processor_count
        self._processor_count += 1
        return value

    async def _accept(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The accepting phase: bind every listener, run their acceptors until cancelled
        (:meth:`aclose`), close the listeners. The one owner of the listeners."""
        listeners: dict[str, trio.abc.Listener[trio.abc.Stream]] = {}
        try:
            with self._accepting:
                await self._bind(listeners)
                async with trio.open_nursery() as nursery:
                    for name, listener in listeners.items():
                        acceptor = Acceptor(name, listener, self.processors[name], self.quotas, self.metrics)
                        self.acceptors[name] = acceptor
                        await nursery.start(acceptor.run, name=acceptor.name)
                    task_status.started()
        finally:
            with trio.CancelScope(shield=True):
                for listener in listeners.values():
                    await trio.aclose_forcefully(listener)
                # An acceptor closes its processors' newConnections when it ends; one that
                # never started (cancelled while starting) cannot, so it is done here.
                for name, processors in self.processors.items():
                    if name not in self.acceptors:
                        for processor in processors:
                            await processor.new_connections_send.aclose()

    async def _bind(self, bound: dict[str, trio.abc.Listener[trio.abc.Stream]]) -> None:
        """Bind every listener into ``bound`` (the caller closes them, even on failure)."""
        for spec in self.settings.listeners:
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

    def all_processors(self) -> list[Processor]:
        return [p for ps in self.processors.values() for p in ps]
