"""Confluent REST Proxy's error bodies: ``{"error_code": N, "message": "..."}``.

The codes are Confluent's (kafka-rest's ``Errors``): the HTTP status times 100 plus a
number for the proxy's own refusals (40401 topic not found, 40403 consumer instance not
found, 42203 a value the schema does not take, 50002 a Kafka error, …), and the bare
status for what the HTTP layer refuses (404 no such route, 405, 415, 406, 422 a body that
does not validate). Every refusal is a :class:`RestError`; the app turns it into the body.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "RestError",
    "bad_request",
    "consumer_already_exists",
    "consumer_already_subscribed",
    "consumer_format_mismatch",
    "consumer_instance_not_found",
    "consumer_group_not_found",
    "illegal_state",
    "invalid_consumer_config",
    "invalid_schema",
    "invalid_value",
    "kafka_error",
    "key_schema_missing",
    "not_acceptable",
    "partition_not_found",
    "topic_not_found",
    "unprocessable",
    "unsupported_media_type",
    "value_schema_missing",
]

TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402
CONSUMER_INSTANCE_NOT_FOUND = 40403
CONSUMER_FORMAT_MISMATCH = 40601
CONSUMER_ALREADY_SUBSCRIBED = 40901
CONSUMER_ALREADY_EXISTS = 40902
ILLEGAL_STATE = 40903
KEY_SCHEMA_MISSING = 42201
VALUE_SCHEMA_MISSING = 42202
JSON_CONVERSION = 42203
INVALID_CONSUMER_CONFIG = 42204
INVALID_SCHEMA = 42205
KAFKA_ERROR = 50002
KAFKA_RETRIABLE_ERROR = 50003


class RestError(Exception):
    """A refusal the client caused (4xx) or Kafka answered (5xx), with Confluent's body."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error_code": self.error_code, "message": self.message}


def bad_request(message: str) -> RestError:
    return RestError(400, 400, message)


def unprocessable(message: str) -> RestError:
    return RestError(422, 422, message)


def not_acceptable(message: str) -> RestError:
    return RestError(406, 406, message)


def unsupported_media_type(message: str) -> RestError:
    return RestError(415, 415, message)


def topic_not_found(topic: str) -> RestError:
    return RestError(404, TOPIC_NOT_FOUND, f"Topic not found: {topic!r}")


def partition_not_found(topic: str, partition: int) -> RestError:
    return RestError(404, PARTITION_NOT_FOUND, f"Partition not found: {topic!r} has no partition {partition}")


def consumer_instance_not_found(group: str, instance: str) -> RestError:
    return RestError(
        404, CONSUMER_INSTANCE_NOT_FOUND, f"Consumer instance not found: {instance!r} in group {group!r}"
    )


def consumer_group_not_found(group: str) -> RestError:
    return RestError(404, 404, f"Consumer group not found: {group!r}")


def consumer_format_mismatch(asked: str, has: str) -> RestError:
    return RestError(
        406,
        CONSUMER_FORMAT_MISMATCH,
        f"The requested embedded data format ({asked}) does not match this consumer instance's ({has})",
    )


def consumer_already_subscribed() -> RestError:
    return RestError(
        409,
        CONSUMER_ALREADY_SUBSCRIBED,
        "Consumer cannot subscribe: it is assigned partitions by hand (or subscribed, when assigning)",
    )


def consumer_already_exists(group: str, instance: str) -> RestError:
    return RestError(
        409, CONSUMER_ALREADY_EXISTS, f"Consumer instance {instance!r} already exists in group {group!r}"
    )


def illegal_state(message: str) -> RestError:
    return RestError(409, ILLEGAL_STATE, f"Illegal state: {message}")


def key_schema_missing() -> RestError:
    return RestError(422, KEY_SCHEMA_MISSING, "Request includes keys but does not include key schema")


def value_schema_missing() -> RestError:
    return RestError(422, VALUE_SCHEMA_MISSING, "Request includes values but does not include value schema")


def invalid_value(message: str) -> RestError:
    return RestError(422, JSON_CONVERSION, f"Conversion of JSON to the schema's format failed: {message}")


def invalid_consumer_config(message: str) -> RestError:
    return RestError(422, INVALID_CONSUMER_CONFIG, f"Invalid consumer configuration: {message}")


def invalid_schema(message: str) -> RestError:
    return RestError(422, INVALID_SCHEMA, f"Invalid schema: {message}")


def kafka_error(exc: BaseException, *, retriable: bool = False) -> RestError:
    if retriable:
        return RestError(500, KAFKA_RETRIABLE_ERROR, f"Retriable Kafka error: {exc}")
    return RestError(500, KAFKA_ERROR, f"Kafka error: {exc}")
