"""Metadata: brokers on the listener the request came in on, the cluster, and topics.

Unknown topics are created on the spot when the client allows it (``allow_auto_topic_creation``,
implied before v4) and ``auto.create.topics.enable`` is on. Kafka answers LEADER_NOT_AVAILABLE
while a new topic's leader is elected; a single broker creates synchronously, so the new topic
comes back ready. Illegal names get INVALID_TOPIC_EXCEPTION; v12+ may name topics by id.

Answers are cached as encoded bytes: building and encoding a one-topic answer with kio took
~50 µs, several times the rest of the request's cost, and clients ask the same question over
and over. The cache key holds everything the answer depends on — version, listener, and for
each topic asked about its name, id and partition count — so a created, deleted, recreated or
grown topic misses. A question naming a topic that does not exist is never cached (it may
create the topic).

A question for every topic is keyed by the topic store's ``version`` (bumped by every change)
rather than by the topics themselves, and when it misses, each topic's entry is taken encoded
from :class:`TopicEntries` — re-encoded only when that topic's id, partition count or the
cluster's leadership changed — and spliced into the answer: after a CreateTopics on a broker
of 100,000 partitions the next Metadata encodes the new topics only.
"""

from __future__ import annotations

import struct
import typing
from typing import Any

from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request, SendResponse
from trikafka.protocol.encoder import encoder_for, uvarint
from trikafka.protocol.headers import encode_response_body, frame_response
from trikafka.protocol.registry import ApiKey
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.kafka_apis import Answer, ApiContext, ApiFamily, handles
from trikafka.server.replica.cluster_view import ClusterView, cluster_view
from trikafka.server.replica.topics import validate_topic_name

__all__ = ["MetadataApis", "TopicEntries", "topic_metadata"]

CACHED_ANSWERS = 256  # distinct questions remembered; the cache is emptied when full
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def topic_metadata(topic: Any, view: ClusterView) -> dict[str, Any]:
    """A topic's entry; a partition with no live leader is LEADER_NOT_AVAILABLE, as Kafka."""
    partitions = []
    for p in range(topic.partitions):
        lead = view.leadership(topic.name, p)
        partitions.append(
            {
                "error_code": ErrorCode.none if lead.leader >= 0 else ErrorCode.leader_not_available,
                "partition_index": p,
                "leader_id": lead.leader,
                "leader_epoch": lead.leader_epoch,
                "replica_nodes": list(lead.replicas),
                "isr_nodes": list(lead.isr),
                "offline_replicas": list(lead.offline),
            }
        )
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": partitions,
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _error_topic(name: str | None, code: ErrorCode, topic_id: Any = None) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


class TopicEntries:
    """Each topic's Metadata entry, encoded once per response version, and answers built
    around them: the answer without topics, with the encoded entries put in its topic array.

    An entry is valid while its topic's id and partition count and the cluster view's version
    (leaders, replicas, ISR) are what they were when it was encoded; entries of deleted topics
    are dropped once the cache holds twice as many entries as there are topics.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[type, str], tuple[tuple[Any, ...], bytes]] = {}
        self._topic_types: dict[type, type] = {}

    def _topic_type(self, response_type: type) -> type:
        cls = self._topic_types.get(response_type)
        if cls is None:
            cls = typing.get_args(typing.get_type_hints(response_type)["topics"])[0]
            self._topic_types[response_type] = cls
        return cls

    def entry(self, cls: type, topic: Any, view: ClusterView) -> bytes:
        state = (topic.topic_id, topic.partitions, view.version)
        cached = self._entries.get((cls, topic.name))
        if cached is not None and cached[0] == state:
            return cached[1]
        parts: list[Any] = []
        encoder_for(cls)(parts, topic_metadata(topic, view))
        encoded = b"".join(parts)
        self._entries[(cls, topic.name)] = (state, encoded)
        return encoded

    def encode(self, spec: Any, values: dict[str, Any], topics: list[Any], view: ClusterView, known: int) -> bytes:
        """The body of ``values`` (an answer whose ``topics`` are ignored) with ``topics``'
        entries; ``known`` is how many topics exist, for pruning."""
        if len(self._entries) > 2 * known + 64:
            self._entries.clear()
        cls = self._topic_type(spec.response_type)
        flexible = bool(spec.response_type.__flexible__)
        # Where the topic array goes: the one place an empty array and a null one differ.
        empty = encode_response_body(spec, {**values, "topics": []}, values=True)
        null = encode_response_body(spec, {**values, "topics": None}, values=True)
        at = next(i for i, (a, b) in enumerate(zip(empty, null, strict=True)) if a != b)
        width = 1 if flexible else 4
        count = uvarint(len(topics) + 1) if flexible else struct.pack(">i", len(topics))
        entries = [self.entry(cls, topic, view) for topic in topics]
        return b"".join((empty[:at], count, *entries, empty[at + width:]))


class MetadataApis(ApiFamily):
    def __init__(self, context: ApiContext) -> None:
        super().__init__(context)
        self._answers: dict[tuple[Any, ...], bytes] = {}
        self._entries = TopicEntries()

    @handles(ApiKey.METADATA)
    async def handle_topic_metadata_request(self, request: Request) -> Any:
        key = self._cache_key(request)
        if key is None:
            return self._answer(request)
        encoded = self._answers.get(key)
        if encoded is None:
            if len(self._answers) >= CACHED_ANSWERS:
                self._answers.clear()
            encoded = self._encode(request)
            self._answers[key] = encoded
        return SendResponse(frame_response(request.spec, request.correlation_id, encoded))

    def _encode(self, request: Request) -> bytes:
        body = request.body
        replicas = self.replicas
        all_topics = body.topics is None or (request.api_version == 0 and not body.topics)
        if all_topics and replicas is not None and not getattr(body, "include_topic_authorized_operations", False):
            view = cluster_view(self.context)
            topics = [
                t for t in replicas.topics
                if self.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
            ]
            values = self._answer(request, with_topics=False).values
            return self._entries.encode(request.spec, values, topics, view, len(replicas.topics))
        return encode_response_body(request.spec, self._answer(request).values, values=True)

    def _cache_key(self, request: Request) -> tuple[Any, ...] | None:
        """What the answer depends on, or None when it must not be cached."""
        replicas = self.replicas
        if replicas is None:
            return None
        body = request.body
        topics = replicas.topics
        state: tuple[Any, ...]
        if body.topics is None or (request.api_version == 0 and not body.topics):
            state = ("all", topics.version)  # bumped by every change to the topics
        else:
            parts = []
            for wanted in body.topics:
                name = wanted.name
                if name is None:
                    topic_id = getattr(wanted, "topic_id", None)
                    topic = replicas.topic_by_id(topic_id) if topic_id else None
                else:
                    topic = topics.get(name)
                if topic is None:
                    return None
                parts.append((name, topic.topic_id, topic.partitions))
            state = tuple(parts)
        who = None
        if self.context.acls is not None:  # the answer depends on who asks, and the ACLs
            who = (request.principal, request.client_host, self.context.acls.authorizer.version)
        flags = (getattr(body, "include_cluster_authorized_operations", False),
                 getattr(body, "include_topic_authorized_operations", False))
        return (request.api_version, request.listener_name, cluster_view(self.context).version, state,
                who, flags)

    def _answer(self, request: Request, with_topics: bool = True) -> Answer:
        cache = self.context.metadata_cache
        body = request.body
        view = cluster_view(self.context)
        replicas = self.replicas
        all_topics = body.topics is None or (request.api_version == 0 and not body.topics)
        auto_create = getattr(body, "allow_auto_topic_creation", True)
        topics: list[dict[str, Any]] = []
        if not with_topics:
            pass
        elif replicas is not None and all_topics:
            # Topics the principal may not describe are left out, never reported.
            topics = [
                topic_metadata(t, view) for t in replicas.topics
                if self.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
            ]
        elif not all_topics:
            for wanted in body.topics:
                topics.append(self._one_topic(request, wanted, auto_create, view))
        cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
        if getattr(body, "include_cluster_authorized_operations", False):
            cluster_operations = (
                self.authorized_operations(request, ResourceType.CLUSTER)
                if self.authorize(request, AclOperation.DESCRIBE, ResourceType.CLUSTER) else 0
            )
        if getattr(body, "include_topic_authorized_operations", False):
            for topic in topics:
                if topic["error_code"] == ErrorCode.none:
                    topic["topic_authorized_operations"] = self.authorized_operations(
                        request, ResourceType.TOPIC, topic["name"]
                    )
        brokers = [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in cache.alive_brokers(request.listener_name)
        ]
        return Answer(
            throttle_time=0,
            brokers=brokers,
            cluster_id=cache.cluster_id,
            controller_id=cache.controller_id,
            topics=topics,
            cluster_authorized_operations=cluster_operations,
            error_code=ErrorCode.none,
        )

    def _one_topic(self, request: Request, wanted: Any, auto_create: bool, view: ClusterView) -> dict[str, Any]:
        replicas = self.replicas
        name = wanted.name
        topic_id = getattr(wanted, "topic_id", None)
        if topic_id is not None and topic_id.int == 0:
            topic_id = None
        if name is None:
            topic = replicas.topic_by_id(topic_id) if (replicas and topic_id) else None
            if topic is None:
                return _error_topic(None, ErrorCode.unknown_topic_id, topic_id)
            if not self.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
                # Asked by id: the name stays hidden (ids are not secret, says Kafka).
                return _error_topic(None, ErrorCode.topic_authorization_failed, topic_id)
            return topic_metadata(topic, view)
        if not self.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            return _error_topic(name, ErrorCode.topic_authorization_failed)  # exists or not: untold
        try:
            validate_topic_name(name)
        except KafkaProtocolError:
            return _error_topic(name, ErrorCode.invalid_topic_exception)
        topic = replicas.topics.get(name) if replicas else None
        if topic is None and auto_create and replicas is not None and self.context.config.auto_create_topics_enable:
            if not (self.authorize(request, AclOperation.CREATE, ResourceType.CLUSTER)
                    or self.authorize(request, AclOperation.CREATE, ResourceType.TOPIC, name)):
                return _error_topic(name, ErrorCode.topic_authorization_failed)
            topic = replicas.auto_create(name)
        if topic is None:
            return _error_topic(name, ErrorCode.unknown_topic_or_partition)
        return topic_metadata(topic, view)
