"""Values the admin client takes and returns: frozen, with Kafka's names."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from trikafka.config.resources import ConfigResourceType

__all__ = [
    "AlterConfigOp",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "CreatedTopic",
    "GroupDescription",
    "GroupListing",
    "ListedOffset",
    "MemberDescription",
    "NewTopic",
    "OffsetSpec",
    "OpType",
]


class OpType(enum.IntEnum):
    """IncrementalAlterConfigs operations."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class OffsetSpec(enum.IntEnum):
    """ListOffsets special timestamps; any other int is a timestamp in ms."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3


def _string_map(configs: Mapping[str, str] | None) -> dict[str, str]:
    return dict(configs or {})


@attrs.frozen
class NewTopic:
    """-1 partitions or replication factor: the broker's default (KIP-464)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = attrs.field(factory=dict, converter=_string_map)


@attrs.frozen
class CreatedTopic:
    name: str
    topic_id: object
    num_partitions: int
    replication_factor: int


@attrs.frozen
class ConfigResource:
    type: ConfigResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, node_id: int | str) -> ConfigResource:
        return cls(ConfigResourceType.BROKER, str(node_id))


@attrs.frozen
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool

    @property
    def is_default(self) -> bool:
        return self.source == 5  # DEFAULT_CONFIG


@attrs.frozen
class AlterConfigOp:
    name: str
    value: str | None
    op: OpType = OpType.SET


@attrs.frozen
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    #: Kafka's GroupType as ListGroups v5+ answers it (kafka-groups.sh's TYPE): "classic",
    #: "consumer" (KIP-848) or "share" (KIP-932); "classic" from a broker older than v5.
    type: str = "classic"


@attrs.frozen
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: bytes
    #: A KIP-848 member's partitions as ConsumerGroupDescribe names them (there are no
    #: assignment bytes to decode); None for a member described by DescribeGroups.
    assigned: tuple[Any, ...] | None = None
    member_epoch: int = -1

    @property
    def partitions(self) -> tuple[Any, ...]:
        """The assigned partitions, read as the consumer protocol's assignment (Java's
        ``MemberDescription.assignment()``); () for other protocols or none yet."""
        from trikafka.client.consumer_protocol import ConsumerProtocolError, decode_assignment

        if self.assigned is not None:
            return self.assigned

        try:
            return tuple(decode_assignment(self.assignment).partitions)
        except (ConsumerProtocolError, ValueError, IndexError):
            return ()


@attrs.frozen
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    #: Kafka's GroupType: "classic" (JoinGroup/SyncGroup, DescribeGroups) or "consumer"
    #: (KIP-848, ConsumerGroupDescribe); ``protocol`` is then the server assignor's name.
    type: str = "classic"


@attrs.frozen
class ListedOffset:
    offset: int
    timestamp: int
    leader_epoch: int
