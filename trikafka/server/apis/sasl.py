"""SaslHandshake and SaslAuthenticate as KafkaApis sees them: only when they are out of place.

On a SASL listener the connection's authenticator (``trikafka.security.sasl``) answers these
before authentication, without a handler. A handler sees them only on a listener without
SASL, or after the exchange succeeded — and answers as Kafka's KafkaApis does, with
ILLEGAL_SASL_STATE. (A SaslHandshake on an authenticated SASL connection re-authenticates,
KIP-368, in the connection: it reaches a handler only within a second of the last
re-authentication, as in Kafka.)
"""

from __future__ import annotations

from typing import Any

from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request
from trikafka.protocol.entities import build
from trikafka.protocol.registry import ApiKey
from trikafka.server.kafka_apis import ApiFamily, handles

__all__ = ["SaslApis"]


class SaslApis(ApiFamily):
    @handles(ApiKey.SASL_HANDSHAKE)
    async def handle_sasl_handshake_request(self, request: Request) -> Any:
        return build(request.spec.response_type, error_code=ErrorCode.illegal_sasl_state, mechanisms=[])

    @handles(ApiKey.SASL_AUTHENTICATE)
    async def handle_sasl_authenticate_request(self, request: Request) -> Any:
        return build(
            request.spec.response_type,
            error_code=ErrorCode.illegal_sasl_state,
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b"",
            session_lifetime=0,
        )
