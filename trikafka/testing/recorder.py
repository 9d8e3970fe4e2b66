"""What clients sent: the key fields of a request, and a recorder that keeps them in order.

Tests of client code want to assert *what the client did* — "it sent InitProducerId before
the first Produce", "the consumer committed offset 10 of orders-0" — without a packet capture.
The recorder sees every request as the handler pool takes it (in the order the broker
handles them, which for one connection is the order the client sent them: connections are
muted, one request in flight each) and keeps a frozen :class:`RecordedRequest` per request:
the API by Kafka's name, its version, the client id, the connection, and the key fields
pulled out of the body generically — topics, (topic, partition) pairs, group ids, the
transactional id — plus the decoded kio body itself for anything else.

The same key fields let a fault apply to one topic, partition or group
(:mod:`trikafka.testing.faults`).
"""

from __future__ import annotations

import collections
import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

import attrs

from trikafka.protocol.registry import api_name

__all__ = ["RecordedRequest", "RequestKeys", "RequestRecorder", "request_keys"]

_TOPIC_FIELDS = ("name", "topic", "topic_name")
_PARTITION_FIELDS = ("partition_index", "index", "partition")
_PARTITION_LIST_FIELDS = ("partition_indexes", "partitions")
_GROUP_LIST_FIELDS = ("groups", "groups_names")

TopicResolver = Callable[[uuid.UUID], str | None]


@attrs.frozen
class RequestKeys:
    """The fields of a request body a test filters on, found without knowing the API."""

    topics: tuple[str, ...] = ()
    partitions: tuple[tuple[str, int], ...] = ()
    groups: tuple[str, ...] = ()
    transactional_id: str | None = None


def _topic_of(item: Any, resolve: TopicResolver | None) -> str | None:
    for name in _TOPIC_FIELDS:
        value = getattr(item, name, None)
        if isinstance(value, str):
            return value
    topic_id = getattr(item, "topic_id", None)
    if isinstance(topic_id, uuid.UUID) and resolve is not None:
        return resolve(topic_id)
    return None


def _partitions_of(item: Any) -> list[int]:
    found: list[int] = []
    for field in dataclasses.fields(item):
        value = getattr(item, field.name)
        if not isinstance(value, tuple) or not value:
            continue
        if field.name in _PARTITION_LIST_FIELDS and isinstance(value[0], int):
            found.extend(int(v) for v in value)
            continue
        if dataclasses.is_dataclass(value[0]):
            for entry in value:
                for name in _PARTITION_FIELDS:
                    number = getattr(entry, name, None)
                    if isinstance(number, int):
                        found.append(int(number))
                        break
    return found


def request_keys(body: Any, resolve_topic_id: TopicResolver | None = None) -> RequestKeys:
    """Topics, partitions, groups and transactional id named anywhere at the top two levels
    of a kio request body (``topics[].partitions[]``, ``topic_data[].partition_data[]``, ...)."""
    if body is None or not dataclasses.is_dataclass(body):
        return RequestKeys()
    topics: list[str] = []
    partitions: list[tuple[str, int]] = []
    groups: list[str] = []
    for field in dataclasses.fields(body):
        value = getattr(body, field.name)
        if field.name == "group_id" and isinstance(value, str):
            groups.append(value)
        elif field.name in _GROUP_LIST_FIELDS and isinstance(value, tuple):
            groups.extend(
                v if isinstance(v, str) else getattr(v, "group_id", "") for v in value
            )
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            for item in value:
                topic = _topic_of(item, resolve_topic_id)
                if topic is None:
                    continue
                topics.append(topic)
                partitions.extend((topic, p) for p in _partitions_of(item))
    transactional_id = getattr(body, "transactional_id", None)
    return RequestKeys(
        topics=tuple(dict.fromkeys(topics)),
        partitions=tuple(dict.fromkeys(partitions)),
        groups=tuple(g for g in dict.fromkeys(groups) if g),
        transactional_id=transactional_id if isinstance(transactional_id, str) else None,
    )


@attrs.frozen
class RecordedRequest:
    """One request as the broker received it."""

    api: str  # Kafka's name: "Produce", "JoinGroup"
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    connection_id: str
    topics: tuple[str, ...]
    partitions: tuple[tuple[str, int], ...]
    groups: tuple[str, ...]
    transactional_id: str | None
    body: Any = attrs.field(repr=False, eq=False)  # the decoded kio request entity

    def to_json(self) -> dict[str, object]:
        return {
            "api": self.api,
            "api_key": self.api_key,
            "version": self.version,
            "correlation_id": self.correlation_id,
            "client_id": self.client_id,
            "connection_id": self.connection_id,
            "topics": list(self.topics),
            "partitions": [list(tp) for tp in self.partitions],
            "groups": list(self.groups),
            "transactional_id": self.transactional_id,
        }


def _owned(value: Any) -> Any:
    """``value`` with every memoryview in it copied to ``bytes``.

    A Produce request's large ``records`` are views of the connection's frame buffer, valid
    only until its next large frame (``trikafka.protocol.guard``); a recorded body outlives
    that, so it gets its own bytes. Only kio's dataclasses and tuples are walked, and an
    entity without views comes back as it was."""
    if isinstance(value, memoryview):
        return value.tobytes()
    if isinstance(value, tuple):
        items = tuple(_owned(item) for item in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for field in dataclasses.fields(value):
            old = getattr(value, field.name)
            new = _owned(old)
            if new is not old:
                changes[field.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


#: The most recent requests a recorder keeps (each holds its decoded body, records and all).
MAX_RECORDED = 10_000


class RequestRecorder:
    """Keeps a :class:`RecordedRequest` per request while recording — off by default (a
    production broker should not grow a list), and at most the last ``max_requests``."""

    def __init__(
        self,
        resolve_topic_id: TopicResolver | None = None,
        max_requests: int = MAX_RECORDED,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.recording = False
        self.resolve_topic_id = resolve_topic_id
        self.on_change = on_change  # told when recording starts or stops
        self._requests: collections.deque[RecordedRequest] = collections.deque(maxlen=max_requests)

    def start(self) -> None:
        self.recording = True
        if self.on_change is not None:
            self.on_change()

    def stop(self) -> None:
        self.recording = False
        if self.on_change is not None:
            self.on_change()

    def clear(self) -> None:
        self._requests.clear()

    def record(self, request: Any, keys: RequestKeys | None = None) -> None:
        if keys is None:
            keys = request_keys(request.body, self.resolve_topic_id)
        self._requests.append(
            RecordedRequest(
                api=api_name(request.api_key),
                api_key=request.api_key,
                version=request.api_version,
                correlation_id=request.correlation_id,
                client_id=request.client_id,
                connection_id=request.connection_id,
                topics=keys.topics,
                partitions=keys.partitions,
                groups=keys.groups,
                transactional_id=keys.transactional_id,
                body=_owned(request.body),
            )
        )

    def requests(self, api: str | int | None = None, *, client_id: str | None = None) -> list[RecordedRequest]:
        """What was recorded, in order; ``api`` by Kafka's name or key narrows it."""
        wanted = None if api is None else api_name(api) if isinstance(api, int) else api
        return [
            r
            for r in self._requests
            if (wanted is None or r.api == wanted) and (client_id is None or r.client_id == client_id)
        ]
