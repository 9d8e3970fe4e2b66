"""Throttling every answer by the client quotas, in one place (Kafka's QuotaManagers and
RequestHandlerHelper's ``throttle``/``sendResponseMaybeThrottle``).

Theory of operation (KIP-219). When a handler's answer is ready — at once or from the
purgatory — :meth:`RequestThrottler.throttle` records what the request cost against the
client's quotas, before the answer goes to the connection:

* every request: its handler time, as a percentage of one thread, against
  ``request_percentage`` (not for a Produce with acks=0, as Kafka);
* Produce: the request's bytes against ``producer_byte_rate``;
* Fetch from a consumer: the response's bytes against ``consumer_byte_rate``.

The largest throttle time wins. Over quota the answer still goes out *at once*, with its
``throttle_time_ms`` set (an over-quota Fetch is answered empty, and its bytes are taken
back off the rate, as Kafka does), and the request carries a throttle deadline on trio's
clock: its connection, after writing the answer, reads nothing more until then (the
MUTED_AND_THROTTLED rows of the connection's state table). Only that connection waits;
a Produce with acks=0 gets no answer but its connection is muted all the same.

No handler knows any of this: the one call is in ``ApiContext.respond``.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from typing import Any

import trio

from trikafka.log.slices import materialize
from trikafka.network.request_channel import NoOpResponse, Request, Response, SendResponse
from trikafka.protocol.entities import entity_fields
from trikafka.protocol.headers import decode_response, encode_response, response_parts
from trikafka.protocol.registry import ApiKey
from trikafka.security.client_quotas import ClientQuotaManagers, user_of
from trikafka.security.quota_store import ClientQuotas

__all__ = ["RequestThrottler", "with_throttle_time"]


class RequestThrottler:
    """Applies a broker's client quotas to each answer (see the module doc).

    ``quotas`` is the managers measuring *this* broker's traffic: a standalone broker's
    :class:`ClientQuotas` (its ``local`` managers), or a cluster node's own
    :class:`ClientQuotaManagers` over the cluster's shared quota settings."""

    def __init__(
        self, quotas: ClientQuotas | ClientQuotaManagers, clock: Callable[[], float] = trio.current_time
    ) -> None:
        self.quotas = quotas
        self.clock = clock

    def throttle(self, request: Request, response: Response) -> Response:
        quotas = self.quotas
        if not quotas.enabled or request.spec is None:
            return response
        now = self.clock()
        now_ms = int(now * 1000)
        user = user_of(request.principal)
        client_id = request.client_id
        api_key = request.api_key
        request_throttle = 0
        if response.__class__ is not NoOpResponse:  # acks=0 is exempt from the request quota
            dequeued = request.dequeue_time or now  # 0.0: never went through a handler task
            local = request.api_local_complete_time or now
            percent = max(local - dequeued, 0.0) * 100  # of one thread, per second
            request_throttle = quotas.request.record_and_get_throttle_time_ms(user, client_id, percent, now_ms)
        bandwidth = fetched = 0
        if api_key == ApiKey.PRODUCE:
            bandwidth = quotas.produce.record_and_get_throttle_time_ms(user, client_id, request.size, now_ms)
        elif api_key == ApiKey.FETCH and response.__class__ is SendResponse and _from_consumer(request):
            fetched = _size(response)
            bandwidth = quotas.fetch.record_and_get_throttle_time_ms(user, client_id, fetched, now_ms)
        throttle = max(request_throttle, bandwidth)
        if throttle <= 0:
            return response
        request.throttle_time_ms = throttle
        request.throttle_deadline = now + throttle / 1000
        if fetched:
            # The client gets no records this time: they do not count against its rate.
            quotas.fetch.record_no_throttle(user, client_id, -fetched, now_ms)
            return _empty_fetch(request, throttle)
        if response.__class__ is SendResponse:
            return with_throttle_time(request, response, throttle)
        return response


def _from_consumer(request: Request) -> bool:
    body = request.body
    replica = getattr(body, "replica_id", None)
    if replica is None:
        state = getattr(body, "replica_state", None)
        replica = getattr(state, "replica_id", -1) if state is not None else -1
    return int(replica) < 0  # followers fetch under the replication quota, not this one


def _size(response: SendResponse) -> int:
    data = response.data
    return len(data) if isinstance(data, bytes) else sum(map(len, data))


def _empty_fetch(request: Request, throttle_ms: int) -> SendResponse:
    """Kafka's ``getThrottledResponse``: no partitions, the session kept if incremental."""
    body = request.body
    incremental = getattr(body, "session_epoch", 0) > 0
    values: dict[str, object] = {
        "throttle_time": throttle_ms,
        "error_code": 0,
        "session_id": getattr(body, "session_id", 0) if incremental else 0,
        "responses": [],
    }
    return SendResponse(b"".join(response_parts(request.spec, request.correlation_id, values, True)))


def with_throttle_time(request: Request, response: SendResponse, throttle_ms: int) -> SendResponse:
    """The response re-encoded with ``throttle_time_ms`` set (kio calls the field
    ``throttle_time``); unchanged for a version that has no such field. Only throttled
    answers pay for this."""
    data = response.data if isinstance(response.data, bytes) else b"".join(map(materialize, response.data))
    spec = request.spec
    body: Any
    _correlation_id, body = decode_response(spec, data[4:])
    body_type: type = type(body)
    if "throttle_time" not in entity_fields(body_type):
        return response
    body = dataclasses.replace(body, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
    return SendResponse(encode_response(spec, request.correlation_id, body))
