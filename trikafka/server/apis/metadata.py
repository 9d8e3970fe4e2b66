"""Metadata: brokers on the listener the request came in on, the cluster id, the controller.

Topics come from the metadata cache; until topics exist every named topic is answered with
UNKNOWN_TOPIC_OR_PARTITION, as Kafka does with auto-creation off.
"""

from __future__ import annotations

from typing import Any

from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request
from trikafka.protocol.entities import build
from trikafka.server.kafka_apis import ApiContext

__all__ = ["MetadataApis"]

METADATA_KEY = 3
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class MetadataApis:
    def __init__(self, context: ApiContext) -> None:
        self.context = context

    def handlers(self) -> dict[int, Any]:
        return {METADATA_KEY: self.handle_topic_metadata_request}

    def _requested_topics(self, request: Request) -> list[str] | None:
        """Names asked for, or None for "all topics" (v0: an empty list means all)."""
        topics = request.body.topics
        if topics is None or (request.api_version == 0 and not topics):
            return None
        return [t.name for t in topics if t.name is not None]

    async def handle_topic_metadata_request(self, request: Request) -> Any:
        cache = self.context.metadata_cache
        requested = self._requested_topics(request)
        topics: list[dict[str, Any]] = []
        for name in requested or ():
            topics.append(
                {
                    "error_code": ErrorCode.unknown_topic_or_partition,
                    "name": name,
                    "topic_id": None,
                    "is_internal": False,
                    "partitions": [],
                    "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
                }
            )
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
