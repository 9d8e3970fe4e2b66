"""SASL/PLAIN (RFC 4616) with Kafka's PlainLoginModule users (``user_<name>="<password>"``).

The client sends ``authzid NUL authcid NUL passwd`` in one token; the answer is empty.
Kafka's messages, word for word: they are what clients show their users.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from trikafka.security.sasl import SaslAuthenticationError, SaslError

__all__ = ["PlainServer"]


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None
        #: The name the client claimed, for the log line of a failure (never the password).
        self.username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslError("SASL/PLAIN response is not UTF-8") from None
        tokens = text.split("\0")
        if len(tokens) != 3:
            raise SaslError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        self.username = username or None
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compare even for an unknown user: the time taken says nothing about who exists.
        matches = hmac.compare_digest(
            password.encode(), (expected if expected is not None else "\0" + password).encode()
        )
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.authorization_id = username
        self.complete = True
        return b""
