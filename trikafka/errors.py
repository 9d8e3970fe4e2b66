"""Errors, split by whose fault they are.

* :class:`KafkaProtocolError` and its subclasses are the *client's* fault: bad bytes, a bad
  request, an unknown topic. Each carries the Kafka :class:`~kio.schema.errors.ErrorCode` the
  broker answers with. ``close_connection`` says whether Kafka would drop the connection instead
  of answering (a frame that cannot be parsed, an unsupported API version).
* :class:`ConfigError` is the *operator's* fault: a wrong key or value. Its message names the
  key, the value and what is allowed.
* Anything else raised inside the broker is *our* fault; KafkaApis answers it with
  UNKNOWN_SERVER_ERROR and logs it, and the broker keeps serving.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "ConfigError",
    "CorruptRecordError",
    "ErrorCode",
    "FrameSizeError",
    "InvalidRecordError",
    "RecordErrorsError",
    "InvalidRequestError",
    "KafkaProtocolError",
    "TooManyConnectionsError",
    "UnsupportedRequestVersionError",
]


class KafkaProtocolError(Exception):
    """The peer sent something Kafka would refuse. Answer with ``error_code``."""

    error_code: ErrorCode = ErrorCode.unknown_server_error
    close_connection: bool = False

    def __init__(self, message: str, error_code: ErrorCode | None = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class InvalidRequestError(KafkaProtocolError):
    """A frame or header that cannot be parsed: Kafka closes the connection."""

    error_code = ErrorCode.invalid_request
    close_connection = True


class FrameSizeError(InvalidRequestError):
    """A size prefix above ``socket.request.max.bytes`` or below zero."""


class UnsupportedRequestVersionError(InvalidRequestError):
    """A request at an (api key, version) pair the broker does not implement: answered
    UNSUPPORTED_VERSION and the connection closed. (The client's
    ``trikafka.client.UnsupportedVersionError`` is the other side's: no version in common.)"""

    error_code = ErrorCode.unsupported_version


class CorruptRecordError(KafkaProtocolError):
    """A record batch whose CRC or sizes do not add up (CORRUPT_MESSAGE)."""

    error_code = ErrorCode.corrupt_message


class InvalidRecordError(KafkaProtocolError):
    """A record batch that is intact but breaks a rule (INVALID_RECORD)."""

    error_code = ErrorCode.invalid_record


class RecordErrorsError(InvalidRecordError):
    """Records refused one by one (Kafka's RecordValidationException): Produce v8+ lists
    them in the partition's ``record_errors`` as (batch index, message)."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class TooManyConnectionsError(Exception):
    """An accepted connection is over ``max.connections`` or ``max.connections.per.ip``."""

    def __init__(self, host: str, limit: int) -> None:
        super().__init__(f"too many connections from {host} (limit {limit})")
        self.host = host
        self.limit = limit


class ConfigError(ValueError):
    """A configuration key or value is wrong. The message says which, and what is allowed."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        super().__init__(f"invalid configuration {key}={value!r}: {allowed}")
        self.key = key
        self.value = value
        self.allowed = allowed
