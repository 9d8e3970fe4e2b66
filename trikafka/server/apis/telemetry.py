"""GetTelemetrySubscriptions, PushTelemetry (KIP-714) and ListConfigResources (KIP-1142; v0 was
ListClientMetricsResources). The rules are the ClientMetricsManager's (``server/client_metrics.py``).

As in Kafka's KafkaApis, the two telemetry APIs need no ACL (any connected client may push its
own metrics); ListConfigResources needs DESCRIBE_CONFIGS on the cluster. A refused telemetry
request is answered with its error code and logged once at INFO (a client retries on its
own schedule; nothing is kept of it).
"""

from __future__ import annotations

import logging
from typing import Any

from trikafka.config.client_metrics import CLIENT_METRICS_RESOURCE
from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request
from trikafka.protocol.registry import ApiKey
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.client_metrics import TelemetryRefused
from trikafka.server.kafka_apis import Answer, ApiFamily, handles

__all__ = ["TelemetryApis"]

log = logging.getLogger("trikafka.server")

TOPIC, BROKER, GROUP = 2, 4, 32
#: What ListConfigResources v1 lists (an empty request: all of them); v0 lists subscriptions only.
LISTED_TYPES = (TOPIC, BROKER, CLIENT_METRICS_RESOURCE, GROUP)


class TelemetryApis(ApiFamily):
    @handles(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS)
    async def handle_get_telemetry_subscriptions_request(self, request: Request) -> Any:
        try:
            fields = self.context.client_metrics.get_subscriptions(request)
        except TelemetryRefused as exc:
            log.info("GetTelemetrySubscriptions from %s refused: %s", request.connection_id, exc)
            return Answer(
                throttle_time=0, error_code=exc.error_code, client_instance_id=None, subscription_id=0,
                accepted_compression_types=[], push_interval=0, telemetry_max_bytes=0, delta_temporality=False,
                requested_metrics=[],
            )
        return Answer(throttle_time=0, error_code=ErrorCode.none, **fields)

    @handles(ApiKey.PUSH_TELEMETRY)
    async def handle_push_telemetry_request(self, request: Request) -> Any:
        try:
            self.context.client_metrics.push(request)
        except TelemetryRefused as exc:
            log.info("PushTelemetry from %s refused: %s", request.connection_id, exc)
            return Answer(throttle_time=0, error_code=exc.error_code)
        return Answer(throttle_time=0, error_code=ErrorCode.none)

    @handles(ApiKey.LIST_CONFIG_RESOURCES)
    async def handle_list_config_resources_request(self, request: Request) -> Any:
        v0 = request.api_version == 0
        if not self.authorize(request, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
            return Answer(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, config_resources=[])
        asked = (CLIENT_METRICS_RESOURCE,) if v0 else tuple(request.body.resource_types) or LISTED_TYPES
        if any(kind not in LISTED_TYPES for kind in asked):
            log.info("ListConfigResources from %s asked for resource types %s; this broker lists %s",
                     request.connection_id, list(asked), list(LISTED_TYPES))
            return Answer(throttle_time=0, error_code=ErrorCode.unsupported_version, config_resources=[])
        found: list[tuple[str, int]] = []
        for kind in asked:
            found.extend((name, kind) for name in self._names(request, kind))
        if v0:
            return Answer(throttle_time=0, error_code=ErrorCode.none,
                          config_resources=[{"resource_name": name} for name, _ in found])
        return Answer(throttle_time=0, error_code=ErrorCode.none, config_resources=[
            {"resource_name": name, "resource_type": kind} for name, kind in found
        ])

    def _names(self, request: Request, kind: int) -> list[str]:
        if kind == CLIENT_METRICS_RESOURCE:
            return self.context.client_metrics.names()
        if kind == TOPIC:
            return sorted(topic.name for topic in self.replicas.topics)
        if kind == BROKER:
            return [str(b.node_id) for b in self.context.metadata_cache.alive_brokers(request.listener_name)]
        shares = self.context.shares
        return sorted(shares.group_configs) if shares is not None else []
