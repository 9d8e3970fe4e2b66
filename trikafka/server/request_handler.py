"""The request handler pool: ``num.io.threads`` tasks draining the shared request channel.

Kafka's KafkaRequestHandlerPool, as tasks: each handler receives a request from the shared
``trio.open_memory_channel(queued.max.requests)`` (``network/request_channel.py``), runs
``KafkaApis.handle`` to completion for it, and answers through the request's connection's
capacity-1 response channel. Requests are handled here and only here — never in a
connection's task. Work that must wait for something outside the request (a long-poll fetch,
a forming group) goes to the Purgatory instead of holding a handler.

Draining: a handler takes what is already queued with ``receive_nowait`` and awaits
``receive`` only when the channel is empty. Trio's ``receive`` checkpoints (a trip through
the scheduler) even when an item is waiting; a burst of queued requests is bounded by
``queued.max.requests``, and every answer wakes its connection, which runs at the handler's
next wait, so draining costs no fairness that matters and saves a scheduler pass per
request.

The pool runs until cancelled: at broker shutdown, once every connection is closed (see
``RequestPath.aclose``: what is still queued then has no one to answer, so it is not
applied). No shutdown pill is sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

if TYPE_CHECKING:
    from trikafka.network.request_channel import RequestChannel
    from trikafka.server.kafka_apis import KafkaApis

__all__ = ["HANDLER_TASK_NAME", "RequestHandlerPool", "RequestHandlerPoolStatistics"]

#: Each handler task's name, with its index (Kafka's thread name).
HANDLER_TASK_NAME = "data-plane-kafka-request-handler-{}"


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
        async with trio.open_nursery() as nursery:
            for index in range(self.num_handlers):
                nursery.start_soon(self._handler, name=HANDLER_TASK_NAME.format(index))
            task_status.started()

    async def _handler(self) -> None:
        request_receive = self.channel.request_receive
        receive_nowait = request_receive.receive_nowait
        receive = request_receive.receive
        apis = self.apis
        dispatch = apis.dispatch
        # trio's clock (the MockClock in tests) without trio.current_time()'s layers of
        # calls; read once per request: the busy time ends when the answer was handed over.
        now = trio.lowlevel.current_clock().current_time
        while True:
            try:
                request = receive_nowait()  # drain what is queued (module docstring)
            except trio.WouldBlock:
                request = await receive()
            start = request.dequeue_time = now()
            self._busy_now += 1
            try:
                if apis.interceptor is None:  # KafkaApis.handle, one coroutine frame fewer
                    await dispatch(request)
                else:
                    await apis.handle(request)
            finally:
                self._busy_now -= 1
                self.handled += 1
                # Set when the answer went to its connection or the request to the purgatory
                # (0.0 only if handling raised): no clock read of our own.
                self._busy_seconds += (request.api_local_complete_time or now()) - start
            # Not held while idle: the last request's body and its connection's response
            # channel would outlive the connection (issue 33).
            del request

    def statistics(self) -> RequestHandlerPoolStatistics:
        elapsed = (trio.current_time() - self._started_at) * self.num_handlers
        idle = 1.0 - min(1.0, self._busy_seconds / elapsed) if elapsed > 0 else 1.0
        return RequestHandlerPoolStatistics(
            self.num_handlers, self.handled, self._busy_now, idle
        )
