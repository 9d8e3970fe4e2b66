"""One client connection: read a frame, hand it on, wait, write the answer, repeat.

Theory of operation — the mute cycle (Kafka's KafkaChannel states):

  NOT_MUTED ──frame read──▶ MUTED ──request queued──▶ MUTED_AND_RESPONSE_PENDING
      ▲                                                          │
      └────────────────── response written ◀─────────────────────┘

While muted the connection reads nothing from the socket, so a client that pipelines
requests leaves them in the kernel's buffers (and in our frame decoder, if one read brought
several): the broker answers strictly in order, one request in flight per connection. The
response comes back through a capacity-1 memory channel owned by this connection.

Idle expiry (connections.max.idle.ms) is a deadline on the read, measured from the last
activity — a byte received or a response written — on trio's clock.

Shutdown: the processor cancels the *read* scope of every connection, so a connection
waiting for its next request closes at once, while one with a request in flight finishes
writing the response first; the processor's nursery deadline bounds that grace period.

Errors: a bad frame or header is the client's fault — one log line, this connection closes,
nothing else notices. Transport errors (reset, broken pipe) just close.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import trio

from trikafka.errors import InvalidRequestError
from trikafka.network.request_channel import (
    CloseConnectionResponse,
    NoOpResponse,
    Request,
    ResponseSlot,
    SendResponse,
)
from trikafka.protocol.framing import NEED_DATA, FrameDecoder
from trikafka.protocol.headers import decode_request

if TYPE_CHECKING:
    from trikafka.network.processor import Processor

__all__ = ["Connection", "ConnectionState"]

log = logging.getLogger("trikafka.network")

RECEIVE_SIZE = 256 * 1024
_IOV_MAX = 512  # buffers per sendmsg call (Linux allows 1024)
_TRANSPORT_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class ConnectionState:
    NOT_MUTED = "NOT_MUTED"
    MUTED = "MUTED"
    MUTED_AND_RESPONSE_PENDING = "MUTED_AND_RESPONSE_PENDING"


class Connection:
    def __init__(
        self,
        stream: trio.abc.Stream,
        connection_id: str,
        client_host: str,
        processor: Processor,
    ) -> None:
        self.stream = stream
        self.connection_id = connection_id
        self.client_host = client_host
        self.processor = processor
        self.state = ConnectionState.NOT_MUTED
        self.last_activity = trio.current_time()
        self.read_scope: trio.CancelScope | None = None
        self.close_reason: str | None = None
        self._decoder = FrameDecoder(processor.config.socket_request_max_bytes)
        # Large frames are received straight into their own buffer when the transport is a
        # socket (the in-memory transport of the tests has no recv_into).
        is_socket = isinstance(stream, trio.SocketStream)
        self._recv_into = stream.socket.recv_into if is_socket else None
        self._sendmsg = stream.socket.sendmsg if is_socket else None
        self._fd = stream.socket.fileno() if is_socket else None

    async def run(self) -> None:
        slot = ResponseSlot()
        try:
            await self._serve(slot)
        except _TRANSPORT_ERRORS as exc:
            self.close_reason = self.close_reason or f"transport: {type(exc).__name__}"
        finally:
            slot.close()
            self.processor.connection_closed(self)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self.stream)

    async def _serve(self, slot: ResponseSlot) -> None:
        processor = self.processor
        registry = processor.registry
        now = processor.now
        idle_seconds = processor.config.connections_max_idle_ms / 1000
        while not processor.stopping:
            frame = await self._read_frame(idle_seconds)
            if frame is None:
                return
            self.state = ConnectionState.MUTED
            start = now()
            try:
                decoded = decode_request(frame, registry)
            except InvalidRequestError as exc:
                self._reject(exc)
                return
            request = Request(
                processor=processor.id,
                connection_id=self.connection_id,
                listener_name=processor.listener_name,
                client_host=self.client_host,
                header=decoded.header,
                body=decoded.body,
                spec=decoded.spec,
                size=len(frame),
                response_slot=slot,
                start_time=start,
            )
            processor.busy(now() - start)
            await processor.request_channel.send_request(request)
            self.state = ConnectionState.MUTED_AND_RESPONSE_PENDING
            response = await slot.get()
            request.response_dequeue_time = now()
            if isinstance(response, CloseConnectionResponse):
                self.close_reason = "closed by the request handler"
                return
            if isinstance(response, SendResponse):
                await self._write(response.data)
            else:
                assert isinstance(response, NoOpResponse)
            done = now()
            self.last_activity = done
            self.state = ConnectionState.NOT_MUTED
            processor.record_request(request, done)

    async def _read_frame(self, idle_seconds: float) -> bytes | None:
        """The next frame, or None at end of stream, idle expiry or shutdown."""
        decoder = self._decoder
        frame = self._next_buffered()
        if frame is not NEED_DATA:
            return frame  # type: ignore[return-value]
        # One cancel scope for both ways a read ends early: its deadline is the idle expiry,
        # and shutdown cancels it (``read_scope``). Two nested scopes per read were a
        # measurable part of a tiny request.
        with trio.CancelScope(deadline=self.last_activity + idle_seconds) as scope:
            self.read_scope = scope
            if self.processor.stopping:
                scope.cancel()
            recv_into = self._recv_into
            while True:
                into = decoder.unfilled() if recv_into is not None else None
                if into is None:
                    data = await self.stream.receive_some(RECEIVE_SIZE)
                    count = len(data)
                else:
                    count = await recv_into(into)
                if not count:
                    self.close_reason = "closed by the client"
                    return None
                self.last_activity = trio.current_time()
                if into is None:
                    decoder.receive_data(data)
                else:
                    decoder.received_into(count)
                frame = self._next_buffered()
                if frame is not NEED_DATA:
                    return frame  # type: ignore[return-value]
                scope.deadline = self.last_activity + idle_seconds
        self.read_scope = None
        if self.processor.stopping:
            self.close_reason = "broker shutting down"
        else:
            self.close_reason = "idle"
            log.debug("closing idle connection %s", self.connection_id)
        return None

    def _next_buffered(self) -> bytes | None | object:
        """A whole buffered frame, NEED_DATA, or None when the size prefix is out of range."""
        try:
            return self._decoder.next_frame()
        except InvalidRequestError as exc:
            self._reject(exc)
            return None

    def _reject(self, exc: InvalidRequestError) -> None:
        self.close_reason = str(exc)
        self.processor.metrics.closed_by_error += 1
        log.warning("closing connection %s from %s: %s", self.connection_id, self.client_host, exc)

    async def _write(self, data: bytes | tuple) -> None:  # noqa: ANN001
        if not isinstance(data, tuple):
            if self._fd is not None:
                # Try the (non-blocking) socket first: a small answer nearly always fits in
                # the send buffer, and trio's send would then pass through the scheduler once
                # more after the system call — a tenth of a tiny request's cost. This task
                # has just waited for its response slot, so it has checkpointed already.
                try:
                    sent = os.write(self._fd, data)
                except BlockingIOError:
                    sent = 0
                if sent == len(data):
                    return
                data = memoryview(data)[sent:]
            await self.stream.send_all(data)
            return
        if self._sendmsg is None:
            for part in data:
                await self.stream.send_all(part)
            return
        # Scatter-gather: header and record chunks go out in as few sendmsg calls as the
        # socket takes, never joined into one buffer (a 1 MiB fetch joined was a fresh MiB).
        pending = [memoryview(part).cast("B") for part in data if len(part)]
        while pending:
            sent = await self._sendmsg(pending[:_IOV_MAX])
            while sent and pending:
                if sent >= len(pending[0]):
                    sent -= len(pending.pop(0))
                else:
                    pending[0] = pending[0][sent:]
                    sent = 0
