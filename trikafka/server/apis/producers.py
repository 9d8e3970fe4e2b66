"""InitProducerId: ids and epochs for idempotent producers (KIP-98).

Without a transactional id the broker hands out a fresh producer id with epoch 0, or — when
the client presents its current id and epoch (v3+, KIP-360) — the same id with the next
epoch. Transactions are not implemented yet: a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, a fatal error, rather than a retriable one the client
would loop on.
"""

from __future__ import annotations

from typing import Any

from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request
from trikafka.protocol.entities import build
from trikafka.server.kafka_apis import ApiFamily

__all__ = ["ProducerApis"]

INIT_PRODUCER_ID = 22
MAX_EPOCH = 32767


class ProducerApis(ApiFamily):
    def handlers(self) -> dict[int, Any]:
        return {INIT_PRODUCER_ID: self.handle_init_producer_id_request}

    async def handle_init_producer_id_request(self, request: Request) -> Any:
        body = request.body
        response_type = request.spec.response_type
        common = {"throttle_time": 0, "ongoing_txn_producer_id": -1, "ongoing_txn_producer_epoch": -1}
        if body.transactional_id is not None:
            return build(
                response_type,
                error_code=ErrorCode.transactional_id_authorization_failed,
                producer_id=-1,
                producer_epoch=-1,
                **common,
            )
        producer_id = getattr(body, "producer_id", -1)
        epoch = getattr(body, "producer_epoch", -1)
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
