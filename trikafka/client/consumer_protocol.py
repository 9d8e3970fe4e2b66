"""Kafka's ConsumerProtocol: what consumers put in JoinGroup metadata and SyncGroup assignments.

A classic consumer group is protocol type ``"consumer"``. Each member sends, per assignor it
supports, a *subscription* (topics, assignor user data, the partitions it owns, its generation,
its rack); the leader answers SyncGroup with one *assignment* per member. Both are a big-endian
int16 version followed by the body of that version of Kafka's ``ConsumerProtocolSubscription``
/ ``ConsumerProtocolAssignment`` message — the bytes Java and librdkafka consumers write, so
members of every client can share a group. kio carries the schemas; this module only adds the
version header and Kafka's forward-compatibility rule: a version newer than ours is read with our
newest schema (new fields are only ever appended), a negative version is corrupt.

Pure functions over bytes; no trio.
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from kio.schema.consumer_protocol_assignment import v0 as assignment_v0
from kio.schema.consumer_protocol_assignment import v1 as assignment_v1
from kio.schema.consumer_protocol_assignment import v2 as assignment_v2
from kio.schema.consumer_protocol_assignment import v3 as assignment_v3
from kio.schema.consumer_protocol_subscription import v0 as subscription_v0
from kio.schema.consumer_protocol_subscription import v1 as subscription_v1
from kio.schema.consumer_protocol_subscription import v2 as subscription_v2
from kio.schema.consumer_protocol_subscription import v3 as subscription_v3
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from trikafka.client.cluster import TopicPartition  # the one public TopicPartition

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "LATEST_VERSION",
    "Assignment",
    "ConsumerProtocolError",
    "Subscription",
    "TopicPartition",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "partitions_by_topic",
]

CONSUMER_PROTOCOL_TYPE = "consumer"
LATEST_VERSION = 3
_VERSION = struct.Struct(">h")
_SUBSCRIPTIONS = (subscription_v0, subscription_v1, subscription_v2, subscription_v3)
_ASSIGNMENTS = (assignment_v0, assignment_v1, assignment_v2, assignment_v3)


class ConsumerProtocolError(ValueError):
    """Subscription or assignment bytes that cannot be read (a member sent garbage)."""


@attrs.frozen
class Subscription:
    """One member's JoinGroup metadata for one assignor."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    group_instance_id: str | None = None  # from JoinGroup's member list, not the bytes


@attrs.frozen
class Assignment:
    """The partitions the leader gave one member, and its assignor's user data."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


def _grouped(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Partitions grouped by topic, topics in first-seen order (as Java's map iteration)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return list(by_topic.items())


@functools.cache
def _codec(module: object, name: str) -> tuple[Any, ...]:
    entity = getattr(module, name)
    return entity, entity_writer(entity), entity_reader(entity)


def _version_of(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise ConsumerProtocolError(f"{what} of {len(data)} bytes has no version")
    (version,) = _VERSION.unpack_from(data)
    if version < 0:
        raise ConsumerProtocolError(f"{what} has negative version {version}")
    result: int = min(version, LATEST_VERSION)
    return result


def encode_subscription(subscription: Subscription, version: int = LATEST_VERSION) -> bytes:
    """The JoinGroup protocol metadata bytes for ``subscription`` at ``version`` (0..3)."""
    if not 0 <= version <= LATEST_VERSION:
        raise ValueError(f"consumer protocol version {version} not in 0..{LATEST_VERSION}")
    entity, write, _ = _codec(_SUBSCRIPTIONS[version], "ConsumerProtocolSubscription")
    nested: Any = _SUBSCRIPTIONS[version].data.TopicPartition if version >= 1 else None
    fields: dict[Any, Any] = {"topics": tuple(subscription.topics), "user_data": subscription.user_data}
    if version >= 1:
        fields["owned_partitions"] = tuple(
            nested(topic=topic, partitions=tuple(i32(p) for p in parts))
            for topic, parts in _grouped(subscription.owned_partitions)
        )
    if version >= 2:
        fields["generation_id"] = i32(subscription.generation_id)
    if version >= 3:
        fields["rack_id"] = subscription.rack_id
    buffer = io.BytesIO()
    buffer.write(_VERSION.pack(version))
    write(buffer, entity(**fields))
    return buffer.getvalue()


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    """Read a member's subscription, whichever client wrote it."""
    version = _version_of(data, "subscription")
    _, _, read = _codec(_SUBSCRIPTIONS[version], "ConsumerProtocolSubscription")
    try:
        entity, _ = read(bytes(data), 2)
    except Exception as exc:  # kio's reader error: the member sent bad bytes
        raise ConsumerProtocolError(f"cannot read subscription v{version}: {exc}") from exc
    owned = tuple(
        TopicPartition(t.topic, int(p)) for t in getattr(entity, "owned_partitions", ()) for p in t.partitions
    )
    return Subscription(
        topics=tuple(entity.topics),
        user_data=entity.user_data,
        owned_partitions=owned,
        generation_id=int(getattr(entity, "generation_id", -1)),
        rack_id=getattr(entity, "rack_id", None),
        group_instance_id=group_instance_id,
    )


def encode_assignment(assignment: Assignment, version: int = LATEST_VERSION) -> bytes:
    """The SyncGroup assignment bytes for one member (the body is the same in v0..v3)."""
    if not 0 <= version <= LATEST_VERSION:
        raise ValueError(f"consumer protocol version {version} not in 0..{LATEST_VERSION}")
    module = _ASSIGNMENTS[version]
    entity, write, _ = _codec(module, "ConsumerProtocolAssignment")
    nested = module.data.TopicPartition
    buffer = io.BytesIO()
    buffer.write(_VERSION.pack(version))
    write(
        buffer,
        entity(
            assigned_partitions=tuple(
                nested(topic=topic, partitions=tuple(i32(p) for p in parts))
                for topic, parts in _grouped(assignment.partitions)
            ),
            user_data=assignment.user_data,
        ),
    )
    return buffer.getvalue()


def decode_assignment(data: bytes) -> Assignment:
    """Read the assignment SyncGroup returned. Empty bytes mean "nothing" (Kafka sends them to
    a member the leader left out, and on errors)."""
    if not data:
        return Assignment(partitions=())
    version = _version_of(data, "assignment")
    _, _, read = _codec(_ASSIGNMENTS[version], "ConsumerProtocolAssignment")
    try:
        entity, _ = read(bytes(data), 2)
    except Exception as exc:  # kio's reader error: the leader sent bad bytes
        raise ConsumerProtocolError(f"cannot read assignment v{version}: {exc}") from exc
    return Assignment(
        partitions=tuple(
            TopicPartition(t.topic, int(p)) for t in entity.assigned_partitions for p in t.partitions
        ),
        user_data=entity.user_data,
    )


def partitions_by_topic(partitions: Iterable[TopicPartition]) -> Mapping[str, list[int]]:
    """Helper for logs and listeners: ``{topic: sorted partitions}``."""
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out
