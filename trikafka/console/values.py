"""What the console's pages show: frozen values, read from the cluster by
:mod:`~trikafka.console.reader` and rendered by the templates. Nothing here does I/O."""

from __future__ import annotations

import attrs

__all__ = [
    "BrokerRow",
    "ConfigRow",
    "Decoded",
    "GroupDetail",
    "GroupOffsetRow",
    "GroupRow",
    "MemberRow",
    "Overview",
    "PartitionRow",
    "RecordRow",
    "RecordsPage",
    "ShareGroupDetail",
    "ShareOffsetRow",
    "SchemaDiff",
    "SchemaVersion",
    "Shown",
    "SubjectDetail",
    "SubjectRow",
    "TopicDetail",
    "TopicRow",
]


@attrs.frozen
class Shown:
    """Bytes as a person reads them: ``kind`` is ``null``, ``text``, ``json`` (pretty-printed)
    or ``hex`` (anything that is not printable UTF-8); ``size`` the raw byte count."""

    kind: str
    text: str
    size: int


@attrs.frozen
class BrokerRow:
    node_id: int
    host: str
    port: int
    rack: str | None
    is_controller: bool


@attrs.frozen
class Overview:
    cluster_id: str | None
    controller_id: int
    version: str
    brokers: tuple[BrokerRow, ...]
    listeners: tuple[str, ...]
    topic_count: int
    internal_topic_count: int
    partition_count: int
    group_count: int


@attrs.frozen
class TopicRow:
    name: str
    internal: bool
    partitions: int
    replication_factor: int
    records: int  # end offset − start offset, summed: what a consumer from the start would see
    size_bytes: int


@attrs.frozen
class PartitionRow:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    start_offset: int
    end_offset: int
    size_bytes: int


@attrs.frozen
class ConfigRow:
    name: str
    value: str | None
    is_default: bool
    sensitive: bool


@attrs.frozen
class TopicDetail:
    name: str
    internal: bool
    partitions: tuple[PartitionRow, ...]
    configs: tuple[ConfigRow, ...]


@attrs.frozen
class Decoded:
    """A Confluent-framed value (magic 0, a 4-byte schema id) read by its writer's schema:
    ``shown`` the value as JSON, or None with ``problem`` saying why it could not be read."""

    schema_id: int
    schema_type: str | None
    subject: str | None
    version: int | None
    shown: Shown | None
    problem: str | None = None


@attrs.frozen
class RecordRow:
    partition: int
    offset: int
    timestamp: int
    key: Shown
    value: Shown
    headers: tuple[tuple[str, Shown], ...]
    value_bytes: bytes | None = attrs.field(default=None, repr=False, eq=False)  # for decoding
    decoded: Decoded | None = None  # set when a Schema Registry read the value


@attrs.frozen
class RecordsPage:
    """The answer of one browse: where it started, the records, and where to go next."""

    topic: str
    partition: int
    start_offset: int  # the partition's log start offset
    end_offset: int  # the high watermark
    from_offset: int  # where this page began (-1: nothing at or after the timestamp asked)
    records: tuple[RecordRow, ...]
    next_offset: int


@attrs.frozen
class GroupRow:
    group_id: str
    state: str
    protocol_type: str
    members: int
    lag: int | None  # None: no committed offsets
    type: str = "classic"  # Kafka's group type: classic, consumer (KIP-848) or share


@attrs.frozen
class MemberRow:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, tuple[int, ...]], ...]  # topic → partitions


@attrs.frozen
class GroupOffsetRow:
    topic: str
    partition: int
    committed_offset: int
    end_offset: int
    lag: int
    member_id: str | None  # the member the partition is assigned to now, if any


@attrs.frozen
class GroupDetail:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: int
    members: tuple[MemberRow, ...]
    offsets: tuple[GroupOffsetRow, ...]
    type: str = "classic"  # Kafka's GroupType; "consumer": KIP-848, ``protocol`` is the assignor

    @property
    def total_lag(self) -> int:
        return sum(row.lag for row in self.offsets)


@attrs.frozen
class ShareOffsetRow:
    """A share partition (KIP-932) as kafka-share-groups.sh --describe shows it."""

    topic: str
    partition: int
    start_offset: int  # the share-partition start offset; -1: the group has not read it yet
    end_offset: int  # the partition's high watermark
    lag: int  # records not yet acknowledged or archived from the start offset on; -1: unknown
    members: tuple[str, ...]  # client ids of the members assigned the partition (many may be)


@attrs.frozen
class ShareGroupDetail:
    group_id: str
    state: str
    assignor: str
    group_epoch: int
    coordinator: int
    members: tuple[MemberRow, ...]
    offsets: tuple[ShareOffsetRow, ...]
    type: str = "share"

    @property
    def total_lag(self) -> int:
        return sum(max(row.lag, 0) for row in self.offsets)


@attrs.frozen
class SubjectRow:
    subject: str
    latest_version: int
    schema_id: int
    schema_type: str
    compatibility: str
    versions: int


@attrs.frozen
class SchemaVersion:
    """One version of a subject: ``text`` is the schema pretty-printed (Avro and JSON Schema
    re-indented, Protobuf as registered)."""

    subject: str
    version: int
    schema_id: int
    schema_type: str
    text: str
    references: tuple[tuple[str, str, int], ...]  # name, subject, version


@attrs.frozen
class SubjectDetail:
    subject: str
    compatibility: str
    versions: tuple[SchemaVersion, ...]


@attrs.frozen
class SchemaDiff:
    """A unified diff of two versions' pretty-printed texts, line by line as (kind, text):
    kind is ``add``, ``remove``, ``hunk``, ``file`` or ``same``."""

    subject: str
    old: SchemaVersion
    new: SchemaVersion
    lines: tuple[tuple[str, str], ...]
