"""The client's errors: what a broker's error code means to the caller, as Kafka's clients see it.

Kafka's Java client splits its exceptions into *retriable* ones (the operation may succeed if
tried again: a leader moved, a coordinator is loading, a connection dropped, a request timed
out) and the rest, which are final. kio's :class:`ErrorCode` carries exactly Kafka's
``retriable`` flag, so the split is not a second table here: :func:`error_for` makes a
:class:`KafkaError` whose ``retriable`` is the code's.

A few errors change what the client must *do*, not only whether it retries, and have their own
classes: metadata is stale (:data:`STALE_METADATA` codes), the coordinator moved
(:data:`COORDINATOR_MOVED`), the producer was fenced, a transaction must abort. Transport
failures are :class:`KafkaConnectionError` (Java's NetworkException: retriable) and a request
that got no answer in ``request.timeout.ms`` is :class:`KafkaTimeoutError` (retriable too).
"""

from __future__ import annotations

from trikafka.errors import ErrorCode

__all__ = [
    "COORDINATOR_MOVED",
    "STALE_METADATA",
    "BrokerUnreachableError",
    "KafkaClientError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "ProducerFencedError",
    "TransactionAbortedError",
    "UnknownTopicOrPartitionError",
    "UnsupportedVersionError",
    "error_for",
    "raise_for",
]

#: Codes after which the producer/consumer refreshes metadata before retrying.
STALE_METADATA = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.leader_not_available,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.kafka_storage_error,
        ErrorCode.unknown_topic_id,
    }
)

#: Codes after which a group or transaction coordinator must be looked up again.
COORDINATOR_MOVED = frozenset(
    {ErrorCode.not_coordinator, ErrorCode.coordinator_not_available}
)

#: Codes that fence a producer for good (Java's ProducerFencedException family).
_FENCED = frozenset(
    {
        ErrorCode.producer_fenced,
        ErrorCode.invalid_producer_epoch,
        ErrorCode.transaction_coordinator_fenced,
    }
)


class KafkaError(Exception):
    """A broker (or the client) refused an operation with ``error_code``."""

    def __init__(self, error_code: ErrorCode, message: str = "", *, retriable: bool | None = None) -> None:
        self.error_code = ErrorCode(error_code)
        self.retriable = self.error_code.retriable if retriable is None else retriable
        self.message = message  #: what the error says besides its code's name
        text = self.error_code.name.upper()
        super().__init__(f"{text}: {message}" if message else text)

    @property
    def stale_metadata(self) -> bool:
        return self.error_code in STALE_METADATA

    @property
    def coordinator_moved(self) -> bool:
        return self.error_code in COORDINATOR_MOVED


class KafkaConnectionError(KafkaError):
    """The connection to a broker failed or was closed (retriable)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.network_exception, message, retriable=True)


class KafkaTimeoutError(KafkaError):
    """No answer within ``request.timeout.ms``, or an operation ran out of its deadline."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.request_timed_out, message, retriable=True)


class BrokerUnreachableError(KafkaConnectionError, KafkaTimeoutError):
    """No Kafka broker could be reached: the message names the address and what the attempt
    met — "connection refused", "cannot resolve the host name", "connected, but no answer to
    ApiVersions" (a silent peer), or the first bytes of a peer that is not Kafka ("it answered
    'HTTP/1.1 400 Bad Request' (an HTTP server)"). A call that runs out of its bound that way
    raises it too, naming every address tried. Both a connection error and a timeout:
    ``except`` either catches it."""

    def __init__(self, message: str) -> None:
        KafkaError.__init__(self, ErrorCode.network_exception, message, retriable=True)


class UnknownTopicOrPartitionError(KafkaError):
    """The cluster does not have the topic (or the partition), as a broker answered."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.unknown_topic_or_partition, message)


class KafkaClientError(KafkaError):
    """The client itself failed: one of its background tasks raised something that is not a
    Kafka error (a bug, or a broker answer it could not handle). The original is the
    ``__cause__``; the message names the task and it."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.unknown_server_error, message, retriable=False)


class UnsupportedVersionError(KafkaError):
    """The broker supports no version of an API that this client can speak."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.unsupported_version, message, retriable=False)


class ProducerFencedError(KafkaError):
    """A newer producer with the same transactional.id took over; this one can only close."""


class TransactionAbortedError(KafkaError):
    """The transaction failed and was (or must be) aborted; its records will not be read
    by read_committed consumers."""


def error_for(code: int | ErrorCode, message: str = "") -> KafkaError:
    """The exception for a non-zero error code."""
    code = ErrorCode(code)
    if code in _FENCED:
        return ProducerFencedError(code, message)
    if code == ErrorCode.unsupported_version:
        return UnsupportedVersionError(message)
    if code == ErrorCode.unknown_topic_or_partition:
        return UnknownTopicOrPartitionError(message)
    return KafkaError(code, message)


def raise_for(code: int | ErrorCode, message: str = "") -> None:
    """Raise :func:`error_for` unless ``code`` is NONE."""
    if code != ErrorCode.none:
        raise error_for(code, message)
