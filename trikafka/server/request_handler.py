"""The request handler pool: ``num.io.threads`` tasks draining the shared request channel.

Every handler runs ``KafkaApis.handle`` to completion for one request at a time; work that
must wait for something outside the request (a long-poll fetch, a forming group) goes to the
Purgatory instead of holding a handler. Left alone, the pool ends when the request channel
is closed and drained — Kafka's shutdown pill, without the pill; at broker shutdown it is
cancelled instead, once every connection is closed (see ``broker.py``: what is still queued
then has no one to answer).

Inline answers: while a handler is idle, a connection's request would go straight to it, and
the trip costs two passes through trio's scheduler (to the handler, back to the connection) —
a fifth to a quarter of a lone request's CPU here (``perf stat``, README: Performance). So
while the pool runs, the request channel lets the connection do the handler's work in its
own task instead (:meth:`handle`), on the idle handler's turn (``RequestQueue.reserve``): at
most ``num.io.threads`` requests are handled at once either way, and a request arriving while
every handler is busy waits in the queue as before. Such a request's RequestQueueTime is
zero; the other timings keep Kafka's meaning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

if TYPE_CHECKING:
    from trikafka.network.request_channel import Request, RequestChannel
    from trikafka.server.kafka_apis import KafkaApis

__all__ = ["RequestHandlerPool", "RequestHandlerPoolStatistics"]


@attrs.frozen
class RequestHandlerPoolStatistics:
    handlers: int
    handled: int
    busy_handlers: int
    idle_percent: float  # Kafka's RequestHandlerAvgIdlePercent, as a fraction 0..1


class RequestHandlerPool:
    def __init__(self, num_handlers: int, channel: RequestChannel, apis: KafkaApis) -> None:
        self.num_handlers = num_handlers
        self.channel = channel
        self.apis = apis
        self.handled = 0
        self._busy_now = 0
        self._busy_seconds = 0.0
        self._started_at = 0.0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._started_at = trio.current_time()
        try:
            async with trio.open_nursery() as nursery:
                for index in range(self.num_handlers):
                    nursery.start_soon(
                        self._handler, index, name=f"data-plane-kafka-request-handler-{index}"
                    )
                self.channel.handlers = self
                task_status.started()
        finally:
            self.channel.handlers = None

    async def handle(self, request: Request) -> None:
        """``KafkaApis.handle`` with the pool's accounting (dequeue time, busy time, count):
        in a handler task for a queued request, or in the connection's own task while a
        handler is idle. There the answer, if the handler gives one now, is left in the
        request's slot for the caller to take without a trip through the scheduler.
        """
        # trio's clock (the MockClock in tests) without trio.current_time()'s layers of calls.
        now = trio.lowlevel.current_clock().current_time
        start = request.dequeue_time = now()
        self._busy_now += 1
        try:
            await self.apis.handle(request)
        finally:
            self._busy_now -= 1
            self.handled += 1
            self._busy_seconds += now() - start

    async def _handler(self, index: int) -> None:
        async for request in self.channel.queue:
            slot = request.response_slot  # before handle: an injected fault may wrap it
            await self.handle(request)
            slot.handled()  # unanswered (left to the purgatory): the connection may write

    def statistics(self) -> RequestHandlerPoolStatistics:
        elapsed = (trio.current_time() - self._started_at) * self.num_handlers
        idle = 1.0 - min(1.0, self._busy_seconds / elapsed) if elapsed > 0 else 1.0
        return RequestHandlerPoolStatistics(
            self.num_handlers, self.handled, self._busy_now, idle
        )
