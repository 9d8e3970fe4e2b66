"""Kafka's topic configurations: the one table.

Each :class:`TopicConfigDef` row says everything about one topic key: the broker key that
supplies its default (``segment.bytes`` ← ``log.segment.bytes``), its type, what values are
allowed, Kafka's default and what it means. Everything else is derived from :data:`TOPIC_CONFIGS`:

* ``BrokerConfig``'s broker-level defaults (``config.py``: ``log_segment_bytes = ...``),
* ``LogConfig`` (``log/config.py``: one frozen field per key),
* CreateTopics / AlterConfigs / IncrementalAlterConfigs validation and DescribeConfigs entries
  (``server/replica/topic_config.py``, ``server/apis/configs.py``),
* README's topic-configuration table (:func:`readme_table`; ``tests/test_config.py`` checks
  that README shows exactly it).

This module imports nothing of trikafka but its errors, so every layer may read it.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from trikafka.errors import ConfigError

__all__ = ["INT32_MAX", "INT64_MAX", "TOPIC_CONFIGS", "TopicConfigDef", "readme_table", "unknown_topic_config"]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

_NUMBERS = ("int", "long", "double")


@attrs.frozen
class TopicConfigDef:
    """One topic config. ``lo``/``hi`` bound numbers; ``allowed`` lists a string's or a list's
    legal values."""

    name: str
    kind: str  # "int", "long", "double", "boolean", "string", "list"
    default: Any
    doc: str
    broker_key: str | None = None  # the broker config whose value is the topic's default
    lo: float | None = None
    hi: float | None = None
    allowed: tuple[str, ...] = ()
    #: False: accepted, stored and described, but nothing in trikafka acts on it yet.
    applied: bool = True
    #: A regular expression a string (or each item of a list) must match, when ``allowed``
    #: does not enumerate the values.
    pattern: str | None = None
    #: Kafka 3.x's deprecated keys: accepted, validated, stored and described, and ignored —
    #: as a Kafka 3.x broker with inter.broker.protocol.version 3.0 or later ignores them.
    deprecated: bool = False

    @property
    def attribute(self) -> str:
        """The Python field name (``LogConfig.segment_bytes``)."""
        return self.name.replace(".", "_")

    def allowed_text(self) -> str:
        """What is allowed, in the words of an error message."""
        if self.kind in ("int", "long"):
            return f"an integer in [{self.lo}, {self.hi}] is required"
        if self.kind == "double":
            return f"a number in [{self.lo}, {self.hi}] is required"
        if self.kind == "boolean":
            return "allowed values are true and false"
        if self.kind == "list":
            if self.pattern:
                return f"a comma-separated list (possibly empty) of {self.pattern_text}, or * alone"
            return f"a comma-separated list (possibly empty) of {', '.join(self.allowed)} is required"
        if self.pattern:
            return f"{self.pattern_text} is required"
        return f"allowed values are {', '.join(self.allowed)}"

    @property
    def pattern_text(self) -> str:
        return _PATTERN_TEXT.get(self.pattern or "", f"values matching {self.pattern}")

    def _item_ok(self, item: Any) -> bool:
        if not isinstance(item, str):
            return False
        if self.pattern:
            return re.fullmatch(self.pattern, item) is not None
        return item in self.allowed if self.allowed else True

    def check(self, value: Any) -> str | None:
        """None when ``value`` (typed) is allowed, else what is allowed."""
        kind = self.kind
        if kind in ("int", "long"):
            ok = isinstance(value, int) and not isinstance(value, bool) and self.lo <= value <= self.hi  # type: ignore[operator]  # numeric kinds have both bounds
        elif kind == "double":
            ok = isinstance(value, int | float) and not isinstance(value, bool) and self.lo <= value <= self.hi  # type: ignore[operator]  # numeric kinds have both bounds
        elif kind == "boolean":
            ok = isinstance(value, bool)
        elif kind == "list":
            # Kafka's ValidList accepts the empty list (cleanup.policy="" is neither delete nor
            # compact: the log is kept whole); "*" alone means every replica in the throttle
            # lists (ThrottledReplicaListValidator).
            ok = isinstance(value, tuple) and (
                all(self._item_ok(item) for item in value) or (bool(self.pattern) and value == ("*",))
            )
        else:
            ok = self._item_ok(value)
        return None if ok else self.allowed_text()

    def parse(self, value: Any) -> Any:
        """The typed, checked value of ``value`` (a string from the wire or a file, or already
        typed); raises ConfigError naming key, value and what is allowed."""
        parsed = value
        if isinstance(value, str):
            text = value.strip()
            try:
                if self.kind in ("int", "long"):
                    parsed = int(text)
                elif self.kind == "double":
                    parsed = float(text)
                elif self.kind == "boolean":
                    if text.lower() not in ("true", "false"):
                        raise ValueError
                    parsed = text.lower() == "true"
                elif self.kind == "list":
                    parsed = tuple(item.strip() for item in text.split(",") if item.strip())
                else:
                    parsed = text
            except ValueError:
                raise ConfigError(self.name, value, self.allowed_text()) from None
        elif self.kind == "list" and isinstance(value, list):
            parsed = tuple(value)
        problem = self.check(parsed)
        if problem:
            raise ConfigError(self.name, value, problem)
        return parsed


def _int(
    name: str, default: int, doc: str, lo: int, hi: int = INT32_MAX, broker_key: str | None = None
) -> TopicConfigDef:
    return TopicConfigDef(name, "int", default, doc, broker_key, lo, hi, applied=broker_key is not None)


def _long(name: str, default: int, doc: str, lo: int, broker_key: str | None = None) -> TopicConfigDef:
    return TopicConfigDef(name, "long", default, doc, broker_key, lo, INT64_MAX, applied=broker_key is not None)


#: What a ``pattern`` means, in the words of an error message.
_REPLICAS = r"[0-9]+:[0-9]+"
#: Kafka 3.x's ``MetadataVersion``s (inter-broker protocol versions), by version string.
_IBP = (
    "0.8.0 0.8.1 0.8.2 0.9.0 0.10.0-IV0 0.10.0-IV1 0.10.1-IV0 0.10.1-IV1 0.10.1-IV2 0.10.2-IV0 "
    "0.11.0-IV0 0.11.0-IV1 0.11.0-IV2 1.0-IV0 1.1-IV0 2.0-IV0 2.0-IV1 2.1-IV0 2.1-IV1 2.1-IV2 "
    "2.2-IV0 2.2-IV1 2.3-IV0 2.3-IV1 2.4-IV0 2.4-IV1 2.5-IV0 2.6-IV0 2.7-IV0 2.7-IV1 2.7-IV2 "
    "2.8-IV0 2.8-IV1 3.0-IV0 3.0-IV1 3.1-IV0 3.2-IV0 3.3-IV0 3.3-IV1 3.3-IV2 3.3-IV3 3.4-IV0 "
    "3.5-IV0 3.5-IV1 3.5-IV2 3.6-IV0 3.6-IV1 3.6-IV2 3.7-IV0 3.7-IV1 3.7-IV2 3.7-IV3 3.7-IV4 "
    "3.8-IV0 3.9-IV0"
).split()
#: Kafka's MetadataVersionValidator (``MetadataVersion.fromVersionString``): a version string
#: or a release (``2.8``, ``0.10.0``), where only the first three dot-separated parts count for
#: a 0.x version and the first two otherwise — so ``0.10.0.0``, ``2.8.1`` and ``2.8-IV1`` are
#: valid, ``0.10`` and ``latest`` are not.
_VERSION = "(?:{})(?:\\.[^.].*)?".format(
    "|".join(re.escape(v) for v in sorted({*_IBP, *(v.split("-")[0] for v in _IBP)}, key=len, reverse=True))
)
_PATTERN_TEXT = {_REPLICAS: "partitionId:brokerId", _VERSION: "a Kafka version such as 3.0-IV1 or 0.10.0.0"}

#: Confluent's subject name strategies (``confluent.*.subject.name.strategy``).
_STRATEGIES = tuple(
    f"io.confluent.kafka.serializers.subject.{name}"
    for name in ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
)
_CODECS = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

#: Kafka's topic configs (``TopicConfig``), by key, in Kafka's alphabetical order; and
#: Confluent Server's ``confluent.*`` schema validation keys.
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef(
            "cleanup.policy",
            "list",
            ("delete",),
            "delete: retention removes old segments; compact: keep the last record per key.",
            allowed=("delete", "compact"),
        ),
        TopicConfigDef(
            "compression.type",
            "string",
            "producer",
            "Codec batches are stored with; producer keeps what the producer sent.",
            "compression.type",
            allowed=_CODECS,
        ),
        # Confluent Server's broker-side schema validation (the Schema Registry's; docs/schema-registry.md).
        TopicConfigDef(
            "confluent.key.schema.validation",
            "boolean",
            False,
            "Refuse a record whose key does not begin with a schema id registered under the key's subject.",
            applied=True,
        ),
        TopicConfigDef(
            "confluent.key.subject.name.strategy",
            "string",
            _STRATEGIES[0],
            "How the key's subject is named: topic-key, the record's name, or topic-record name.",
            allowed=_STRATEGIES,
        ),
        TopicConfigDef(
            "confluent.value.schema.validation",
            "boolean",
            False,
            "Refuse a record whose value does not begin with a schema id registered under the value's subject.",
            applied=True,
        ),
        TopicConfigDef(
            "confluent.value.subject.name.strategy",
            "string",
            _STRATEGIES[0],
            "How the value's subject is named: topic-value, the record's name, or topic-record name.",
            allowed=_STRATEGIES,
        ),
        _long(
            "delete.retention.ms",
            86400000,
            "How long compaction keeps a tombstone after first cleaning it (its delete horizon).",
            0,
            "log.cleaner.delete.retention.ms",
        ),
        _long("file.delete.delay.ms", 60000, "Delay before a deleted segment file is removed.", 0),
        _long(
            "flush.messages",
            INT64_MAX,
            "fsync after this many messages, before acknowledging.",
            1,
            "log.flush.interval.messages",
        ),
        _long("flush.ms", INT64_MAX, "fsync when data is older than this.", 0, "log.flush.interval.ms"),
        _int(
            "index.interval.bytes",
            4096,
            "Bytes of log between offset index entries.",
            0,
            broker_key="log.index.interval.bytes",
        ),
        TopicConfigDef(
            "follower.replication.throttled.replicas",
            "list",
            (),
            "Replicas throttled on the follower side (one broker: none to throttle).",
            applied=False,
            pattern=_REPLICAS,
        ),
        TopicConfigDef(
            "leader.replication.throttled.replicas",
            "list",
            (),
            "Replicas throttled on the leader side (one broker: none to throttle).",
            applied=False,
            pattern=_REPLICAS,
        ),
        _long(
            "max.compaction.lag.ms",
            INT64_MAX,
            "Longest a record may stay uncompacted.",
            1,
            "log.cleaner.max.compaction.lag.ms",
        ),
        _int("max.message.bytes", 1048588, "Largest record batch accepted.", 0, broker_key="message.max.bytes"),
        TopicConfigDef(
            "message.downconversion.enable",
            "boolean",
            True,
            "Kafka 3.x: down-convert for old fetchers.",
            applied=False,
            deprecated=True,
        ),
        TopicConfigDef(
            "message.format.version",
            "string",
            "3.0-IV1",
            "Kafka 3.x: on-disk record version (always v2 since 3.0).",
            applied=False,
            pattern=_VERSION,
            deprecated=True,
        ),
        _long("message.timestamp.after.max.ms", 3600000, "How far a CreateTime may be ahead of the broker's clock.", 0),
        _long(
            "message.timestamp.before.max.ms", INT64_MAX, "How far a CreateTime may be behind the broker's clock.", 0
        ),
        TopicConfigDef(
            "message.timestamp.difference.max.ms",
            "long",
            INT64_MAX,
            "Kafka 3.x: the before/after limits in one key.",
            lo=0,
            hi=INT64_MAX,
            applied=False,
            deprecated=True,
        ),
        TopicConfigDef(
            "message.timestamp.type",
            "string",
            "CreateTime",
            "Timestamp stored in batches: CreateTime or LogAppendTime.",
            "log.message.timestamp.type",
            allowed=("CreateTime", "LogAppendTime"),
        ),
        TopicConfigDef(
            "min.cleanable.dirty.ratio",
            "double",
            0.5,
            "Dirty share of the log that triggers compaction.",
            "log.cleaner.min.cleanable.ratio",
            lo=0,
            hi=1,
        ),
        _long(
            "min.compaction.lag.ms", 0, "Shortest a record stays uncompacted.", 0, "log.cleaner.min.compaction.lag.ms"
        ),
        _int(
            "min.insync.replicas",
            1,
            "acks=all is refused (NOT_ENOUGH_REPLICAS) while the ISR is smaller.",
            1,
            broker_key="min.insync.replicas",
        ),
        TopicConfigDef("preallocate", "boolean", False, "Preallocate segment files.", applied=False),
        _long(
            "retention.bytes", -1, "Partition size above which old segments go; -1 no limit.", -1, "log.retention.bytes"
        ),
        _long(
            "retention.ms", 604800000, "Age at which segments are deleted; -1 keeps forever.", -1, "log.retention.ms"
        ),
        _int("segment.bytes", 1073741824, "Segment size before rolling.", 14, broker_key="log.segment.bytes"),
        _int("segment.index.bytes", 10485760, "Size of a segment's offset index.", 4),
        _long("segment.jitter.ms", 0, "Random jitter subtracted from segment.ms.", 0),
        _long("segment.ms", 604800000, "Segment age before rolling.", 1, "log.roll.ms"),
        TopicConfigDef(
            "unclean.leader.election.enable",
            "boolean",
            False,
            "Let an out-of-sync replica become leader.",
            applied=False,
        ),
    )
}


def unknown_topic_config(key: str) -> str:
    """What is allowed instead of an unknown topic key: the closest known one, as broker and
    client keys get (``retension.ms`` → ``did you mean 'retention.ms'?``)."""
    import difflib

    close = difflib.get_close_matches(key, list(TOPIC_CONFIGS), n=1)
    return "unknown topic configuration" + (f"; did you mean {close[0]!r}?" if close else "")


def format_value(value: Any) -> str:
    """A typed value as Kafka shows it (``true``, ``delete,compact``)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def readme_table() -> str:
    """README's topic-configuration table, generated from :data:`TOPIC_CONFIGS`."""
    lines = ["| key | default | broker default from | allowed | meaning |", "|---|---|---|---|---|"]
    for d in TOPIC_CONFIGS.values():
        if d.name.startswith("confluent."):
            continue  # Confluent Server's keys: docs/schema-registry.md shows them
        if d.kind in _NUMBERS:
            allowed = f"{d.lo} … {d.hi}"
        elif d.kind == "boolean":
            allowed = "true, false"
        elif d.pattern:
            allowed = d.pattern_text + (", or `*`" if d.kind == "list" else "")
        else:
            allowed = ", ".join(d.allowed)
        broker = f"`{d.broker_key}`" if d.broker_key else ""
        if d.deprecated:
            doc = f"{d.doc} Deprecated: accepted and ignored, as Kafka 3.x does."
        elif d.applied:
            doc = d.doc
        else:
            doc = f"{d.doc} Stored and described; no effect yet."
        default = format_value(d.default) or '""'
        lines.append(f"| `{d.name}` | `{default}` | {broker} | {allowed} | {doc} |")
    return "\n".join(lines) + "\n"
