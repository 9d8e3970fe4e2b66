"""DescribeClientQuotas and AlterClientQuotas (KIP-546): the client quotas the broker enforces.

The store, its validation (Kafka's ClientQuotaControlManager and ClientQuotasImage) and the
enforcement live in ``trikafka.security``; these handlers only translate requests and answers.
A bad alteration is answered per entity (INVALID_REQUEST with Kafka's message) and leaves
that entity as it was; ``validate_only`` answers the same without changing anything. A bad
Describe filter fails the whole request, as in Kafka.
"""

from __future__ import annotations

import logging
from typing import Any

from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request
from trikafka.protocol.registry import ApiKey
from trikafka.security.quota_store import QuotaError, QuotaOp
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.kafka_apis import Answer, ApiFamily, handles

__all__ = ["ClientQuotaApis"]

log = logging.getLogger("trikafka.server")


def _entity(pairs: Any) -> list[dict[str, Any]]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in pairs]


class ClientQuotaApis(ApiFamily):
    @handles(ApiKey.DESCRIBE_CLIENT_QUOTAS)
    async def handle_describe_client_quotas_request(self, request: Request) -> Any:
        self.require_cluster(request, AclOperation.DESCRIBE_CONFIGS)
        body = request.body
        try:
            found = self.context.client_quotas.describe(body.components, body.strict)
        except QuotaError as exc:
            return Answer(throttle_time=0, error_code=ErrorCode[exc.error], error_message=str(exc), entries=None)
        entries = [
            {"entity": _entity(entity), "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
            for entity, values in found
        ]
        return Answer(throttle_time=0, error_code=ErrorCode.none, error_message=None, entries=entries)

    @handles(ApiKey.ALTER_CLIENT_QUOTAS)
    async def handle_alter_client_quotas_request(self, request: Request) -> Any:
        body = request.body
        if not self.authorize(request, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER):
            # Kafka's AlterClientQuotasRequest.getErrorResponse: the error on every entity.
            return Answer(throttle_time=0, entries=[{
                "error_code": ErrorCode.cluster_authorization_failed, "error_message": None,
                "entity": _entity((e.entity_type, e.entity_name) for e in entry.entity),
            } for entry in body.entries])
        alterations = [
            ([(e.entity_type, e.entity_name) for e in entry.entity],
             [QuotaOp(op.key, float(op.value), op.remove) for op in entry.ops])
            for entry in body.entries
        ]
        results = self.context.client_quotas.alter(alterations, body.validate_only)
        entries = []
        for entry, error in zip(body.entries, results, strict=True):
            if error is not None:
                log.warning("AlterClientQuotas from %s refused: %s", request.principal, error)
            entries.append({
                "error_code": ErrorCode.none if error is None else ErrorCode[error.error],
                "error_message": None if error is None else str(error),
                "entity": _entity((e.entity_type, e.entity_name) for e in entry.entity),
            })
        return Answer(throttle_time=0, entries=entries)
