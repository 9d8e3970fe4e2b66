"""Request bodies, validated by pydantic: a malformed body is a 422 naming the field.

Field names are Confluent's (dotted consumer keys included, by alias). Integers are strict
(``"1"`` is not a partition), unknown fields of the consumer-creation body are refused (a
typo in a consumer key would otherwise be silently dropped), others are ignored as
Confluent's proxy ignores them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

__all__ = [
    "AssignmentsRequest",
    "CommitRequest",
    "CreateConsumerRequest",
    "CreateTopicRequest",
    "PartitionsRequest",
    "ProduceRecordV3",
    "ProduceRequestV2",
    "SeekRequest",
    "SubscriptionRequest",
    "AlterConfigsRequest",
    "UpdateConfigRequest",
    "ValidationError",
    "describe_validation_error",
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class ProduceRecordV2(_Body):
    key: Any = None
    value: Any = None
    partition: StrictInt | None = Field(default=None, ge=0)


class ProduceRequestV2(_Body):
    records: list[ProduceRecordV2] = Field(min_length=1)
    key_schema: StrictStr | None = None
    key_schema_id: StrictInt | None = None
    value_schema: StrictStr | None = None
    value_schema_id: StrictInt | None = None


class CreateConsumerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    name: StrictStr | None = Field(default=None, min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    format: Literal["binary", "json", "avro", "jsonschema", "protobuf"] = "binary"
    auto_offset_reset: Literal["earliest", "latest", "none"] | None = Field(default=None, alias="auto.offset.reset")
    auto_commit_enable: Literal["true", "false"] | StrictBool | None = Field(default=None, alias="auto.commit.enable")
    fetch_min_bytes: StrictInt | StrictStr | None = Field(default=None, alias="fetch.min.bytes")
    request_timeout_ms: StrictInt | StrictStr | None = Field(default=None, alias="consumer.request.timeout.ms")


class TopicPartitionBody(_Body):
    topic: StrictStr = Field(min_length=1)
    partition: StrictInt = Field(ge=0)


class TopicPartitionOffset(TopicPartitionBody):
    offset: StrictInt = Field(ge=0)
    metadata: StrictStr | None = None


class SubscriptionRequest(_Body):
    topics: list[StrictStr] | None = None
    topic_pattern: StrictStr | None = None


class AssignmentsRequest(_Body):
    partitions: list[TopicPartitionBody]


PartitionsRequest = AssignmentsRequest


class SeekRequest(_Body):
    offsets: list[TopicPartitionOffset]


class CommitRequest(_Body):
    offsets: list[TopicPartitionOffset] | None = None


class ConfigEntryBody(_Body):
    name: StrictStr = Field(min_length=1)
    value: StrictStr | None = None


class CreateTopicRequest(_Body):
    topic_name: StrictStr = Field(min_length=1)
    partitions_count: StrictInt | None = Field(default=None, ge=1)
    replication_factor: StrictInt | None = Field(default=None, ge=1)
    configs: list[ConfigEntryBody] = []


class UpdateConfigRequest(_Body):
    value: StrictStr | None = None


class AlterConfigEntry(ConfigEntryBody):
    operation: Literal["SET", "DELETE", "set", "delete"] | None = None


class AlterConfigsRequest(_Body):
    data: list[AlterConfigEntry]


class RecordDataV3(_Body):
    type: StrictStr | None = None
    data: Any = None
    schema_: StrictStr | None = Field(default=None, alias="schema")
    schema_id: StrictInt | None = None
    subject: StrictStr | None = None


class HeaderV3(_Body):
    name: StrictStr
    value: StrictStr | None = None


class ProduceRecordV3(_Body):
    partition_id: StrictInt | None = Field(default=None, ge=0)
    headers: list[HeaderV3] = []
    key: RecordDataV3 | None = None
    value: RecordDataV3 | None = None
    timestamp: StrictStr | StrictInt | None = None


def describe_validation_error(exc: ValidationError) -> str:
    """``field.path: what is wrong`` for each error, joined."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ())) or "the body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts)
