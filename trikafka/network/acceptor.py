"""The Acceptor: accept, check quotas, hand the stream to a Processor.

Hand-off follows Kafka's ``Acceptor.assignNewConnection``: round-robin over the listener's
processors with ``send_nowait``; if a processor's queue is full, try the next; the last try
waits, so a broker whose processors cannot keep up pushes back on accept (the time spent so
is Kafka's AcceptorBlockedPercent).

It owns the send ends of its processors' newConnections (it is their only sender): when it
ends — cancelled, as the socket server stops accepting — it closes them, which tells each
processor to stop. The listener is the socket server's, which bound it and closes it.

The accept loop survives overload, not bugs: running out of file descriptors or buffers is
logged once and retried after a short sleep on trio's clock; any other error propagates.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from trikafka.errors import TooManyConnectionsError
from trikafka.network.endpoints import stream_addresses

if TYPE_CHECKING:
    from trikafka.metrics import BrokerMetrics
    from trikafka.network.processor import Processor
    from trikafka.network.quotas import ConnectionQuotas

__all__ = ["Acceptor", "AcceptorStatistics"]

log = logging.getLogger("trikafka.network")

_OVERLOAD_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
OVERLOAD_SLEEP = 0.1


@attrs.frozen
class AcceptorStatistics:
    listener_name: str
    accepted: int
    rejected: int
    blocked_seconds: float  # time spent waiting for a processor (AcceptorBlockedPercent)


class Acceptor:
    def __init__(
        self,
        listener_name: str,
        listener: trio.abc.Listener[trio.abc.Stream],
        processors: Sequence[Processor],
        quotas: ConnectionQuotas,
        metrics: BrokerMetrics,
    ) -> None:
        self.listener_name = listener_name
        self.listener = listener
        self.processors = list(processors)
        self.quotas = quotas
        self.metrics = metrics
        self.current_processor_index = 0
        self.accepted = 0
        self.rejected = 0
        self.blocked_seconds = 0.0
        self.overload_retries = 0  # accepts retried after EMFILE/ENFILE/ENOMEM/ENOBUFS
        self._in_rejection_burst = False

    @property
    def name(self) -> str:
        return f"data-plane-kafka-socket-acceptor-{self.listener_name}"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            task_status.started()
            overloaded = False
            while True:
                try:
                    stream = await self.listener.accept()
                except OSError as exc:
                    if exc.errno in _OVERLOAD_ERRNOS:
                        if not overloaded:  # one line per episode, not one per retry
                            log.error("%s: accept failed (%s); retrying every %.1f s", self.name, exc, OVERLOAD_SLEEP)
                            overloaded = True
                        self.overload_retries += 1
                        await trio.sleep(OVERLOAD_SLEEP)
                        continue
                    raise
                if overloaded:
                    log.warning("%s: accepting again", self.name)
                    overloaded = False
                await self._handle(stream)
                del stream  # a closed connection's stream is not held until the next accept
        finally:
            with trio.CancelScope(shield=True):
                for processor in self.processors:
                    await processor.new_connections_send.aclose()

    async def _handle(self, stream: trio.abc.Stream) -> None:
        handed_off = False
        try:
            _, (host, _port) = stream_addresses(stream)
            throttle_ms = self.quotas.record_connection(int(trio.current_time() * 1000))
            if throttle_ms:  # max.connection.creation.rate: this acceptor waits, as Kafka's
                self.blocked_seconds += throttle_ms / 1000
                await trio.sleep(throttle_ms / 1000)
            try:
                self.quotas.inc(host)
            except TooManyConnectionsError as exc:
                self.rejected += 1
                self.metrics.connection_rejected(self.listener_name)
                if not self._in_rejection_burst:
                    log.warning("%s: rejected connection: %s", self.listener_name, exc)
                    self._in_rejection_burst = True
                return
            self._in_rejection_burst = False
            try:
                await self.assign_new_connection(stream)
            except BaseException:
                self.quotas.dec(host)
                raise
            handed_off = True
            self.accepted += 1
        finally:
            if not handed_off:
                await trio.aclose_forcefully(stream)

    async def assign_new_connection(self, stream: trio.abc.Stream) -> Processor:
        retries_left = len(self.processors)
        while True:
            retries_left -= 1
            index = self.current_processor_index % len(self.processors)
            processor = self.processors[index]
            self.current_processor_index = index + 1
            try:
                processor.new_connections_send.send_nowait(stream)
                return processor
            except trio.WouldBlock:
                if retries_left == 0:
                    start = trio.current_time()
                    await processor.new_connections_send.send(stream)
                    self.blocked_seconds += trio.current_time() - start
                    return processor

    def statistics(self) -> AcceptorStatistics:
        return AcceptorStatistics(
            self.listener_name, self.accepted, self.rejected, self.blocked_seconds
        )
