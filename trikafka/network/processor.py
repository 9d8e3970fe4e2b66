"""A Processor owns the connections an Acceptor hands it.

Kafka's Processor is a thread with a selector; here it is a task whose nursery bounds the
lifetime of its connections. New streams arrive through ``new_connections``, a memory
channel of capacity 20 (Kafka's connectionQueueSize) that the Acceptor fills round-robin.

Each stream becomes a :class:`Connection` over the fastest transport it supports, with one
frozen :class:`ConnectionSettings` and one :class:`ConnectionHooks` shared by all of this
processor's connections: the hooks are how a connection reaches the request channel and
the metrics. The processor knows its connections; they do not know it.

Stopping: the acceptor closes ``new_connections`` when it stops accepting — the close is
Kafka's shutdown pill, and the only way a processor is told. The processor then starts what
is still queued, tells every connection to stop reading (one waiting for its next request
closes at once; one with a request in flight writes its answer first) and sets a deadline
on its nursery, shutdown.grace.ms from then, that bounds those writes. ``run`` returns when
its last connection is closed. Cancelling ``run`` closes every connection at once.

Idle expiry (connections.max.idle.ms) is the processor's too, as in Kafka's Selector: one
task wakes when the connection idle longest would expire and cancels the reads of those
whose time is up (``_expire_idle_connections``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs
import trio
from trio_util import AsyncValue

from trikafka.network.connection import Connection, ConnectionHooks, ConnectionSettings
from trikafka.network.endpoints import apply_socket_options, stream_addresses
from trikafka.network.request_channel import FRAME_HOLDING_API_KEYS
from trikafka.network.transport import transport_for

if TYPE_CHECKING:
    from trikafka.metrics import BrokerMetrics
    from trikafka.network.quotas import ConnectionQuotas
    from trikafka.network.request_channel import RequestChannel
    from trikafka.protocol.registry import ApiRegistry
    from trikafka.security.listener import ListenerSecurity

__all__ = ["CONNECTION_QUEUE_SIZE", "Processor", "ProcessorSettings", "ProcessorStatistics"]

log = logging.getLogger("trikafka.network")

CONNECTION_QUEUE_SIZE = 20


@attrs.frozen
class ProcessorSettings:
    """What a processor needs of the broker config (built once by ``server/wiring.py``);
    the defaults are Kafka's."""

    max_request_size: int = 104857600  # socket.request.max.bytes
    connections_max_idle_ms: int = 600000  # connections.max.idle.ms
    send_buffer_bytes: int = 102400  # socket.send.buffer.bytes (-1: the OS's)
    receive_buffer_bytes: int = 102400  # socket.receive.buffer.bytes (-1: the OS's)
    shutdown_grace_ms: int = 5000  # shutdown.grace.ms: in-flight answers once stopping


@attrs.frozen
class ProcessorStatistics:
    id: int
    listener_name: str
    connections: int
    accepted: int
    queued_new_connections: int
    idle_percent: float  # Kafka's NetworkProcessorAvgIdlePercent, as a fraction 0..1
    reauthentications: int = 0  # KIP-368 sessions renewed in place
    expired_connections_killed: int = 0  # Kafka's expired-connections-killed-count


class Processor:
    def __init__(
        self,
        id: int,
        listener_name: str,
        *,
        settings: ProcessorSettings,
        registry: ApiRegistry,
        request_channel: RequestChannel,
        quotas: ConnectionQuotas,
        metrics: BrokerMetrics,
        security: ListenerSecurity | None = None,
        disconnect_listeners: Sequence[Callable[[str], None]] = (),
    ) -> None:
        self.id = id
        #: Kafka's ConnectionDisconnectListeners: told each closed connection's id.
        self.disconnect_listeners = tuple(disconnect_listeners)
        self.listener_name = listener_name
        self.settings = settings
        self.registry = registry
        self.request_channel = request_channel
        self.quotas = quotas
        self.metrics = metrics
        #: newConnections: the acceptor sends (and closes it when it stops accepting).
        self.new_connections_send, self._new_connections_receive = trio.open_memory_channel[
            trio.abc.Stream
        ](CONNECTION_QUEUE_SIZE)
        self.connections: dict[str, Connection] = {}
        #: KIP-368: sessions renewed on their connection (awaitable: tests wait on it).
        self.reauthentications = AsyncValue(0)
        self.expired_connections_killed = 0
        self.accepted = 0
        self._index = 0
        self._busy = 0.0
        self._started_at = 0.0
        self._idle_expiry = trio.CancelScope()  # ends when the processor stops accepting
        self.connection_settings = ConnectionSettings(
            processor_id=id,
            listener_name=listener_name,
            registry=registry,
            max_request_size=settings.max_request_size,
            connections_max_idle_ms=settings.connections_max_idle_ms,
            held_api_keys=(
                frozenset()
                if request_channel.memory_pool is None
                else FRAME_HOLDING_API_KEYS.intersection(registry.supported)
            ),
            security=security,
        )
        self.connection_hooks = ConnectionHooks(
            submit=request_channel.send_request,
            closed=self.connection_closed,
            closed_by_error=self._count_closed_by_error,
            request_done=metrics.request_done,
            busy=self.busy,
            memory_pool=request_channel.memory_pool,
            reauthenticated=self._count_reauthentication,
            session_expired=self._count_expired,
        )

    @property
    def name(self) -> str:
        return f"data-plane-kafka-network-thread-{self.listener_name}-{self.id}"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._started_at = trio.current_time()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._expire_idle_connections, name=f"{self.name}:idle-expiry")
                task_status.started()
                async for stream in self._new_connections_receive:
                    self._start_connection(nursery, stream)
                    del stream  # held by its connection alone, freed with it
                # The acceptor closed newConnections: the broker is stopping (module docstring).
                self._idle_expiry.cancel()  # no read begins now; stop_reading ends those waiting
                for connection in list(self.connections.values()):
                    connection.stop_reading()
                nursery.cancel_scope.deadline = trio.current_time() + self.settings.shutdown_grace_ms / 1000
        finally:
            await self._close_queued_streams()

    async def _close_queued_streams(self) -> None:
        """Cancelled (a stop without grace): the streams handed over but not yet started are
        this processor's too — closed here, so their clients see the close at once."""
        receive = self._new_connections_receive
        with trio.CancelScope(shield=True):
            while True:
                try:
                    stream = receive.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                _, (host, _port) = stream_addresses(stream)
                self.quotas.dec(host)
                await trio.aclose_forcefully(stream)
            await receive.aclose()

    async def _expire_idle_connections(self) -> None:
        """Close connections that waited connections.max.idle.ms for a request, to the moment.

        Why here and not a deadline on each read: trio keeps a deadline's cancel scope in its
        heap until the heap is pruned, a thousand reads later, so a deadline per read kept
        two objects alive per read for the collector to walk, and collections (~0.1 ms, of
        generation 1 ~1 ms) landed inside requests. ``python -m benchmarks.gc_pressure``
        (4,000 busy-polled messages): 28–30 collections of generation 0 and 3 of generation
        1 before this and ``LastRequest`` (``protocol/headers.py``), none after.

        Only a connection waiting for a request can expire. One that is busy renews
        ``last_activity`` when its answer is written, which is after this scan, so the next
        wake-up (the earliest expiry of the waiting ones, at most idle from now) is never
        later than any connection's expiry. A scan walks every connection: when a crowd of
        them expires one by one, scans are at least a microsecond per connection apart.
        """
        idle = self.settings.connections_max_idle_ms / 1000
        with self._idle_expiry:
            while True:
                now = trio.current_time()
                check_at = now + idle
                for connection in list(self.connections.values()):
                    waiting = connection.request_wait
                    if waiting is None:
                        continue
                    expiry = connection.last_activity + idle
                    if expiry <= now:
                        waiting.cancel()
                    elif expiry < check_at:
                        check_at = expiry
                await trio.sleep_until(max(check_at, now + len(self.connections) * 1e-6))

    def _start_connection(self, nursery: trio.Nursery, stream: trio.abc.Stream) -> None:
        (local_host, local_port), (remote_host, remote_port) = stream_addresses(stream)
        connection_id = f"{local_host}:{local_port}-{remote_host}:{remote_port}-{self._index}"
        self._index += 1
        self.accepted += 1
        try:
            apply_socket_options(stream, self.settings.send_buffer_bytes, self.settings.receive_buffer_bytes)
        except OSError as exc:  # the peer is already gone; nothing to serve
            log.debug("connection %s failed before it started: %s", connection_id, exc)
        connection = Connection(
            transport_for(stream),
            connection_id,
            remote_host,
            self.connection_settings,
            self.connection_hooks,
        )
        self.connections[connection_id] = connection
        self.metrics.connection_opened(self.listener_name)
        nursery.start_soon(connection.run, name=f"{self.name}:{connection_id}")

    def connection_closed(self, connection: Connection) -> None:
        self.connections.pop(connection.connection_id, None)
        self.quotas.dec(connection.client_host)
        self.metrics.connection_closed(self.listener_name)
        for listener in self.disconnect_listeners:
            listener(connection.connection_id)

    def _count_closed_by_error(self) -> None:
        self.metrics.closed_by_error += 1

    def _count_reauthentication(self) -> None:
        self.reauthentications.value += 1

    def _count_expired(self) -> None:
        self.expired_connections_killed += 1

    def busy(self, seconds: float) -> None:
        self._busy += seconds

    def statistics(self) -> ProcessorStatistics:
        elapsed = trio.current_time() - self._started_at
        idle = 1.0 - min(1.0, self._busy / elapsed) if elapsed > 0 else 1.0
        return ProcessorStatistics(
            id=self.id,
            listener_name=self.listener_name,
            connections=len(self.connections),
            accepted=self.accepted,
            queued_new_connections=self.new_connections_send.statistics().current_buffer_used,
            idle_percent=idle,
            reauthentications=self.reauthentications.value,
            expired_connections_killed=self.expired_connections_killed,
        )
