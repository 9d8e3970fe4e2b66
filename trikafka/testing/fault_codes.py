"""What a fault is given and what it answers: an API and an error code by name or number,
and an error response mirroring the request's topics and partitions."""

from __future__ import annotations

from typing import Any

from kio.schema.index import api_key_map

from trikafka.errors import ErrorCode
from trikafka.protocol.entities import entity_fields, error_response
from trikafka.protocol.registry import api_name

__all__ = ["FaultKind", "REBOOTSTRAP_MIN_VERSION", "check_carried", "mirror_topics", "parse_api", "parse_error_code"]

#: KIP-1102: REBOOTSTRAP_REQUIRED (129) is carried by Metadata's top-level error code, from v13.
REBOOTSTRAP_MIN_VERSION = 13


class FaultKind:
    ERROR = "error"
    LATENCY = "latency"
    DROP_BEFORE = "drop-before"
    DROP_AFTER = "drop-after"
    HOLD = "hold"
    THROTTLE = "throttle"
    SEQUENCE = "sequence"  # one (error, round-trip time) step per matching request
    HOLD_UNTIL = "hold-until"  # requests parked until a condition holds, then handled
    ALL = (ERROR, LATENCY, DROP_BEFORE, DROP_AFTER, HOLD, THROTTLE, SEQUENCE, HOLD_UNTIL)


def parse_api(api: str | int) -> int:
    """An api key from a key or Kafka's name in any case (``"Produce"``, ``"produce"``,
    ``"INIT_PRODUCER_ID"``); a clear error naming the known names otherwise."""
    if isinstance(api, int) and not isinstance(api, bool):
        if api in api_key_map:
            return api
    elif isinstance(api, str):
        wanted = api.replace("_", "").replace("-", "").lower()
        for key in api_key_map:
            if api_name(key).lower() == wanted:
                return key
    known = ", ".join(sorted(api_name(k) for k in api_key_map))
    raise ValueError(f"unknown api {api!r}: give an api key or one of {known}")


def parse_error_code(error: ErrorCode | str | int) -> ErrorCode:
    """An ErrorCode from itself, its number or its name (``"NOT_LEADER_OR_FOLLOWER"``)."""
    if isinstance(error, ErrorCode):
        return error
    try:
        if isinstance(error, int) and not isinstance(error, bool):
            return ErrorCode(error)
        if isinstance(error, str):
            return ErrorCode[error.strip().lower()]
    except (KeyError, ValueError):
        pass
    raise ValueError(
        f"unknown error code {error!r}: give a Kafka error name such as "
        "'NOT_LEADER_OR_FOLLOWER' or its number"
    )


def check_carried(api_key: int | None, code: ErrorCode) -> None:
    """Refuse a fault whose error no version of its API carries: REBOOTSTRAP_REQUIRED only in
    Metadata v13+ (KIP-1102). A Metadata request older than v13 is then handled normally."""
    if code == ErrorCode.rebootstrap_required and api_key != 3:
        where = api_name(api_key) if api_key is not None else "any API"
        raise ValueError(
            f"REBOOTSTRAP_REQUIRED (129) cannot be injected into {where}: KIP-1102 carries it only in "
            f"Metadata v{REBOOTSTRAP_MIN_VERSION}+ (its top-level error code); inject it into 'Metadata'"
        )


def mirror_topics(body: Any, response_type: type, code: ErrorCode) -> Any:
    """The request's ``topics[]`` (and their ``partitions[]``) answered with ``code`` in
    every error field — for responses shaped that way (CreateTopics, OffsetCommit,
    ListOffsets, TxnOffsetCommit, ...); None for any other shape."""
    topic_cls = entity_fields(response_type).get("topics", (None, None, None))[2]
    if topic_cls is None or not isinstance(getattr(body, "topics", None), tuple):
        return None
    topic_fields = entity_fields(topic_cls)
    if "name" not in topic_fields:
        return None
    partition_cls = topic_fields.get("partitions", (None, None, None))[2]
    topics = []
    for topic in body.topics:
        name = getattr(topic, "name", None)
        if not isinstance(name, str):
            return None
        values: dict[str, Any] = {"name": name}
        if partition_cls is not None:
            indexes = [
                p if isinstance(p, int) else getattr(p, "partition_index", None)
                for p in getattr(topic, "partitions", None) or ()
            ]
            values["partitions"] = [
                error_response(partition_cls, code, partition_index=i) for i in indexes if i is not None
            ]
        topics.append(error_response(topic_cls, code, **values))
    return error_response(response_type, code, topics=topics)
