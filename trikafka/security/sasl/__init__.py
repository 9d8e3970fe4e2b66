"""SASL, sans I/O: mechanisms fed client tokens and answering server tokens.

Each mechanism is a small state machine with Kafka's ``SaslServer`` shape:
``evaluate(token) -> server token`` until ``complete``; a failure raises
:class:`SaslAuthenticationError` (its message goes to the client, as Kafka's
``SaslAuthenticationException``) or :class:`SaslError` (the client gets Kafka's generic
"invalid credentials" message, so nothing about which users exist leaks).
"""

from __future__ import annotations

__all__ = ["SaslAuthenticationError", "SaslError"]


class SaslError(Exception):
    """The exchange failed; the message is for the broker's log, not the client."""


class SaslAuthenticationError(SaslError):
    """The exchange failed; the message is Kafka's, safe to send to the client."""
