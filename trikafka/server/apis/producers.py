"""InitProducerId: ids and epochs for idempotent and transactional producers (KIP-98).

Without a transactional id the broker hands out a fresh producer id with epoch 0, or — when
the client presents its current id and epoch (v3+, KIP-360) — the same id with the next
epoch. With a transactional id the TransactionCoordinator answers (fencing, epoch bumps,
CONCURRENT_TRANSACTIONS while it aborts an open transaction); PRODUCER_FENCED is new in v4,
older versions get INVALID_PRODUCER_EPOCH. Two-phase commit (v6 ``enable_2pc``, KIP-939) is
refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka does when it is disabled.
"""

from __future__ import annotations

from typing import Any

from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request
from trikafka.protocol.entities import build
from trikafka.protocol.registry import ApiKey
from trikafka.server.authorization import AclOperation, ResourceType, authorize_by_resource_type
from trikafka.server.kafka_apis import ApiFamily, handles

__all__ = ["ProducerApis"]

MAX_EPOCH = 32767


class ProducerApis(ApiFamily):
    def _refused(self, request: Request) -> ErrorCode | None:
        """Kafka's rule: WRITE on the transactional id, or — for an idempotent producer —
        IDEMPOTENT_WRITE on the cluster or WRITE on any topic at all."""
        transactional_id = request.body.transactional_id
        if transactional_id is not None:
            if not self.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
                return ErrorCode.transactional_id_authorization_failed
        elif not (
            self.authorize(request, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
            or authorize_by_resource_type(self.context.acls, request, AclOperation.WRITE, ResourceType.TOPIC)
        ):
            return ErrorCode.cluster_authorization_failed
        return None

    @handles(ApiKey.INIT_PRODUCER_ID)
    async def handle_init_producer_id_request(self, request: Request) -> Any:
        body = request.body
        response_type = request.spec.response_type
        common = {"throttle_time": 0, "ongoing_txn_producer_id": -1, "ongoing_txn_producer_epoch": -1}
        producer_id = getattr(body, "producer_id", -1)
        epoch = getattr(body, "producer_epoch", -1)
        refused = self._refused(request)
        if refused is not None:
            return build(response_type, error_code=refused, producer_id=-1, producer_epoch=-1, **common)
        if body.transactional_id is not None:
            if getattr(body, "enable2_pc", False):
                code, producer_id, epoch = ErrorCode.transactional_id_authorization_failed, -1, -1
            elif (producer_id < 0) != (epoch < 0):
                code, producer_id, epoch = ErrorCode.invalid_request, -1, -1
            else:
                code, producer_id, epoch = self.context.transactions.init_producer_id(
                    body.transactional_id,
                    _ms(body.transaction_timeout),
                    (producer_id, epoch) if producer_id >= 0 else None,
                )
            if code == ErrorCode.producer_fenced and request.api_version < 4:
                code = ErrorCode.invalid_producer_epoch
            return build(response_type, error_code=code, producer_id=producer_id, producer_epoch=epoch, **common)
        if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
            return build(
                response_type, error_code=ErrorCode.none, producer_id=producer_id, producer_epoch=epoch + 1, **common
            )
        return build(
            response_type,
            error_code=ErrorCode.none,
            producer_id=self.replicas.producer_ids.next_id(),
            producer_epoch=0,
            **common,
        )


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)
