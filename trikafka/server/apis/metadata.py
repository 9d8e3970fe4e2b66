"""Metadata: brokers on the listener the request came in on, the cluster, and topics.

Unknown topics are created on the spot when the client allows it (``allow_auto_topic_creation``,
implied before v4) and ``auto.create.topics.enable`` is on. Kafka answers LEADER_NOT_AVAILABLE
while a new topic's leader is elected; a single broker creates synchronously, so the new topic
comes back ready. Illegal names get INVALID_TOPIC_EXCEPTION; v12+ may name topics by id.
"""

from __future__ import annotations

from typing import Any

from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request
from trikafka.protocol.entities import build
from trikafka.server.kafka_apis import ApiFamily
from trikafka.server.replica_manager import LEADER_EPOCH
from trikafka.server.topics import validate_topic_name

__all__ = ["MetadataApis", "topic_metadata"]

METADATA_KEY = 3
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def topic_metadata(topic: Any, node_id: int) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": [
            {
                "error_code": ErrorCode.none,
                "partition_index": p,
                "leader_id": node_id,
                "leader_epoch": LEADER_EPOCH,
                "replica_nodes": [node_id],
                "isr_nodes": [node_id],
                "offline_replicas": [],
            }
            for p in range(topic.partitions)
        ],
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


class MetadataApis(ApiFamily):
    def handlers(self) -> dict[int, Any]:
        return {METADATA_KEY: self.handle_topic_metadata_request}

    async def handle_topic_metadata_request(self, request: Request) -> Any:
        cache = self.context.metadata_cache
        body = request.body
        node_id = self.context.config.node_id
        replicas = self.replicas
        all_topics = body.topics is None or (request.api_version == 0 and not body.topics)
        auto_create = getattr(body, "allow_auto_topic_creation", True)
        topics: list[dict[str, Any]] = []
        if replicas is not None and all_topics:
            topics = [topic_metadata(t, node_id) for t in replicas.topics]
        elif not all_topics:
            for wanted in body.topics:
                topics.append(self._one_topic(wanted, auto_create, node_id))
        brokers = [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in cache.alive_brokers(request.listener_name)
        ]
        return build(
            request.spec.response_type,
            throttle_time=0,
            brokers=brokers,
            cluster_id=cache.cluster_id,
            controller_id=cache.controller_id,
            topics=topics,
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            error_code=ErrorCode.none,
        )

    def _one_topic(self, wanted: Any, auto_create: bool, node_id: int) -> dict[str, Any]:
        replicas = self.replicas
        name = wanted.name
        topic_id = getattr(wanted, "topic_id", None)
        if topic_id is not None and topic_id.int == 0:
            topic_id = None
        if name is None:
            topic = replicas.topic_by_id(topic_id) if (replicas and topic_id) else None
            if topic is None:
                return _error_topic(None, ErrorCode.unknown_topic_id, topic_id)
            return topic_metadata(topic, node_id)
        try:
            validate_topic_name(name)
        except KafkaProtocolError:
            return _error_topic(name, ErrorCode.invalid_topic_exception)
        topic = replicas.topics.get(name) if replicas else None
        if topic is None and auto_create and replicas is not None:
            topic = replicas.auto_create(name)
        if topic is None:
            return _error_topic(name, ErrorCode.unknown_topic_or_partition)
        return topic_metadata(topic, node_id)
