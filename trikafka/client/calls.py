"""Requests with Kafka's retry rules, for every client role.

:func:`call_coordinator` sends to the group or transaction coordinator of ``key``: a retriable
error code backs off (``retry.backoff.ms``, exponential) and tries again; NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or a lost connection forget the coordinator first, so the next try
looks it up anew. :func:`call_any_node` does the same against the least-loaded broker. Both give
up on a non-retriable error (raised as a typed :class:`KafkaError`) and when ``deadline`` (trio
time) passes, raising the last retriable error.

``errors_of(response)`` says which error codes a response carries (top level, per topic, per
partition — it differs by API); the first non-NONE one is the call's outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import trio

from trikafka.client.client import CoordinatorType, KafkaClient
from trikafka.client.errors import KafkaError, KafkaTimeoutError, error_for
from trikafka.errors import ErrorCode

__all__ = ["call_any_node", "call_coordinator", "first_error"]

ErrorsOf = Callable[[Any], Iterable[Any]]


def first_error(codes: Iterable[Any]) -> ErrorCode:
    for code in codes:
        if code != ErrorCode.none:
            return ErrorCode(code)
    return ErrorCode.none


async def call_coordinator(
    client: KafkaClient,
    key: str,
    key_type: CoordinatorType,
    api_key: int,
    errors_of: ErrorsOf,
    *,
    what: str,
    deadline: float = float("inf"),
    **fields: Any,
) -> Any:
    attempt = 0
    while True:
        try:
            node_id = await client.find_coordinator(key, key_type, deadline)
            answer = await client.send(node_id, api_key, **fields)
            code = first_error(errors_of(answer))
            if code == ErrorCode.none:
                return answer
            raise error_for(code, what)
        except KafkaError as exc:
            if exc.coordinator_moved or exc.error_code in (ErrorCode.network_exception, ErrorCode.request_timed_out):
                client.coordinator_dead(key, key_type)
            if not exc.retriable:
                raise
            client.seen.saw_error(what, exc)
            if trio.current_time() >= deadline:
                raise KafkaTimeoutError(f"{what}: gave up after {attempt + 1} tries ({exc})") from exc
            await client.retry_sleep(attempt)
            attempt += 1


async def call_any_node(
    client: KafkaClient,
    api_key: int,
    errors_of: ErrorsOf,
    *,
    what: str,
    deadline: float = float("inf"),
    node_id: int | None = None,
    **fields: Any,
) -> Any:
    attempt = 0
    while True:
        try:
            target = client.least_loaded_node() if node_id is None else node_id
            answer = await client.send(target, api_key, **fields)
            code = first_error(errors_of(answer))
            if code == ErrorCode.none:
                return answer
            raise error_for(code, what)
        except KafkaError as exc:
            if exc.stale_metadata:
                client.request_metadata_update()
            if not exc.retriable:
                raise
            client.seen.saw_error(what, exc)
            if trio.current_time() >= deadline:
                raise KafkaTimeoutError(f"{what}: gave up after {attempt + 1} tries ({exc})") from exc
            await client.retry_sleep(attempt)
            attempt += 1
