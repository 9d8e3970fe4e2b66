"""What a request handler answers: write these bytes, write nothing, or close.

Kafka's RequestChannel.Response subclasses (SendResponse, NoOpResponse,
CloseConnectionResponse) as frozen values. They live apart from the request channel so that
the sans-IO :mod:`~trikafka.network.connection_state` can read them without importing trio;
:mod:`~trikafka.network.request_channel` re-exports them.
"""

from __future__ import annotations

import attrs

__all__ = ["CloseConnectionResponse", "NoOpResponse", "Response", "SendResponse"]


@attrs.frozen
class SendResponse:
    """Bytes to write: one buffer, or a tuple written in order without joining."""

    data: bytes | tuple[bytes | memoryview, ...]


@attrs.frozen
class NoOpResponse:
    """Nothing to write (acks=0 produce); the connection unmutes."""


@attrs.frozen
class CloseConnectionResponse:
    """Close this connection, as Kafka does for requests it will not answer."""


Response = SendResponse | NoOpResponse | CloseConnectionResponse
