"""Kafka's SaslServerAuthenticator, sans I/O: one per connection on a SASL listener.

Theory of operation (Kafka's SaslState)::

  HANDSHAKE ──SaslHandshake(enabled mechanism)──▶ AUTHENTICATE ──last token──▶ COMPLETE
      │                                               │
      └──── unsupported mechanism, wrong API ─────────┴──── bad credentials ──▶ FAILED

While not COMPLETE the connection serves only ApiVersions (through the handlers, as any
request), SaslHandshake and SaslAuthenticate (answered here); any other API closes the
connection (``ConnectionState.allowed_api_keys``), as Kafka does.

SaslHandshake **v1** is followed by SaslAuthenticate requests carrying the tokens. After
**v0** (Kafka before 1.0) the tokens travel as bare size-prefixed frames with no request
header, both ways: :attr:`raw_tokens` tells the connection to hand over raw frames.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` the answer that completes the
exchange carries ``session_lifetime_ms`` (SaslAuthenticate v1+), and the connection expires
the session after that long. A client re-authenticates on the same connection with a new
SaslHandshake; the connection then runs a fresh authenticator built with ``reauth_of`` (the
mechanism and principal of the session it renews): another mechanism or another principal
fails the re-authentication, as in Kafka.

A failure is answered (SASL_AUTHENTICATION_FAILED with Kafka's message, or
UNSUPPORTED_SASL_MECHANISM with the enabled list) and then the connection closes. The step
carries one line for the broker's log naming the mechanism and the principal the client
claimed — never a password or a token.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from trikafka.errors import ErrorCode
from trikafka.protocol.entities import build
from trikafka.protocol.headers import DecodedRequest, encode_response
from trikafka.protocol.registry import ApiKey, api_name
from trikafka.security.sasl import SaslAuthenticationError, SaslError

__all__ = ["SASL_AUTHENTICATE", "SASL_HANDSHAKE", "SaslServerAuthenticator", "SaslState", "SaslStep"]

#: The two SASL api keys, as ``network/connection.py`` imports them (ApiKey's members).
SASL_HANDSHAKE = ApiKey.SASL_HANDSHAKE
SASL_AUTHENTICATE = ApiKey.SASL_AUTHENTICATE
#: Kafka's sasl.server.max.receive.size: the largest frame an unauthenticated client may send.
MAX_RECEIVE_SIZE = 524288


class SaslState(enum.StrEnum):
    HANDSHAKE = "HANDSHAKE"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


@attrs.frozen
class SaslStep:
    """What the connection does next: write ``data`` (may be empty), then close if ``failure``."""

    data: bytes
    failure: str | None = None


class SaslServerAuthenticator:
    def __init__(
        self,
        enabled: tuple[str, ...],
        servers: Mapping[str, Callable[[], Any]],
        max_reauth_ms: int = 0,
        reauth_of: tuple[str, str] | None = None,
    ) -> None:
        self.enabled = enabled
        self._servers = servers
        #: connections.max.reauth.ms; the session's lifetime once COMPLETE (0: no expiry).
        self.max_reauth_ms = max_reauth_ms
        #: (mechanism, principal) of the session being renewed (KIP-368), else None.
        self.reauth_of = reauth_of
        self.state = SaslState.HANDSHAKE
        self.raw_tokens = False
        self.principal: str | None = None
        self._server: Any = None
        self._mechanism = ""

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def mechanism(self) -> str:
        return self._mechanism

    @property
    def session_lifetime_ms(self) -> int | None:
        """KIP-368: how long the completed session lasts; None: for ever. The smaller of
        connections.max.reauth.ms and what is left of the credential (an OAUTHBEARER
        token's ``exp``), as Kafka's ``calcCompletionTimesAndReturnSessionLifetimeMs``."""
        if not self.complete:
            return None
        credential = getattr(self._server, "credential_lifetime_ms", None)
        if credential is None:
            return self.max_reauth_ms or None
        if not self.max_reauth_ms:
            return max(0, credential)
        return max(0, min(credential, self.max_reauth_ms))

    def receive(self, request: DecodedRequest) -> SaslStep:
        """A SaslHandshake or SaslAuthenticate request."""
        api_key = request.header.request_api_key
        if api_key == ApiKey.SASL_HANDSHAKE and self.state is SaslState.HANDSHAKE:
            return self._handshake(request)
        if api_key == ApiKey.SASL_AUTHENTICATE and self.state is SaslState.AUTHENTICATE and not self.raw_tokens:
            return self._authenticate(request)
        self.state = SaslState.FAILED
        name = api_name(api_key)
        if api_key == ApiKey.SASL_HANDSHAKE:  # a second handshake: Kafka answers before closing
            return SaslStep(
                self._answer(request, error_code=ErrorCode.illegal_sasl_state, mechanisms=list(self.enabled)),
                f"Unexpected Kafka request of type {name} during SASL authentication",
            )
        return SaslStep(b"", f"Unexpected Kafka request of type {name} during SASL handshake")

    def receive_token(self, token: bytes) -> SaslStep:
        """A bare token after SaslHandshake v0; the answer is a bare size-prefixed token."""
        try:
            answer = self._server.evaluate(token)
            self._check_complete()
        except SaslError as exc:
            return SaslStep(b"", self._failed(exc))
        return SaslStep(struct.pack(">i", len(answer)) + answer)

    # -- the steps ------------------------------------------------------------------------

    def _handshake(self, request: DecodedRequest) -> SaslStep:
        body: Any = request.body  # a SaslHandshakeRequest (any version)
        mechanism = body.mechanism
        mechanisms = list(self.enabled)
        if mechanism not in self.enabled:
            self.state = SaslState.FAILED
            return SaslStep(
                self._answer(request, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=mechanisms),
                f"Unsupported SASL mechanism {mechanism}",
            )
        if self.reauth_of is not None and mechanism != self.reauth_of[0]:
            self.state = SaslState.FAILED
            message = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                       f"re-authentication of mechanism '{self.reauth_of[0]}'")
            return SaslStep(
                self._answer(request, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=mechanisms),
                message,
            )
        self._mechanism = mechanism
        self._server = self._servers[mechanism]()
        self.state = SaslState.AUTHENTICATE
        self.raw_tokens = request.header.request_api_version == 0
        return SaslStep(self._answer(request, error_code=ErrorCode.none, mechanisms=mechanisms))

    def _authenticate(self, request: DecodedRequest) -> SaslStep:
        try:
            body: Any = request.body  # a SaslAuthenticateRequest (any version)
            answer = self._server.evaluate(bytes(body.auth_bytes))
            self._check_complete()
        except SaslAuthenticationError as exc:
            message = str(exc)
            return SaslStep(self._failure_answer(request, message), self._failed(exc))
        except SaslError as exc:
            message = (
                "Authentication failed during authentication due to invalid credentials with "
                f"SASL mechanism {self._mechanism}"
            )
            return SaslStep(self._failure_answer(request, message), self._failed(exc))
        return SaslStep(self._answer(
            request, error_code=ErrorCode.none, error_message=None, auth_bytes=answer,
            session_lifetime=self.session_lifetime_ms or 0,
        ))

    def _check_complete(self) -> None:
        if self._server.complete:
            principal = f"User:{self._server.authorization_id}"
            if self.reauth_of is not None and principal != self.reauth_of[1]:
                before = self.reauth_of[1].replace(":", ".", 1)  # Kafka's "%s.%s": type.name
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from {before}: "
                    f"{principal.replace(':', '.', 1)}"
                )
            self.state = SaslState.COMPLETE
            self.principal = principal

    def _failed(self, exc: SaslError) -> str:
        self.state = SaslState.FAILED
        user = getattr(self._server, "username", None)
        who = f"User:{user}" if user else "an unnamed principal"
        return f"SASL/{self._mechanism} authentication failed for {who}: {exc}"

    def _failure_answer(self, request: DecodedRequest, message: str) -> bytes:
        return self._answer(
            request, error_code=ErrorCode.sasl_authentication_failed, error_message=message,
            auth_bytes=b"", session_lifetime=0,
        )

    @staticmethod
    def _answer(request: DecodedRequest, **values: Any) -> bytes:
        spec = request.spec
        if spec is None:  # only an unsupported ApiVersions version decodes without a spec
            raise ValueError(f"no spec to answer api {request.api_key} v{request.api_version}")
        return encode_response(spec, request.header.correlation_id, build(spec.response_type, **values))
