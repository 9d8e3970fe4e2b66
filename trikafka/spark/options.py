"""The options of the ``trikafka`` Spark source and sink, parsed and checked. No Spark here.

The names, defaults and error messages are those of Spark's Kafka connector
(``format("kafka")``), so a job moves between the two by changing the format name:

source  ``kafka.bootstrap.servers``; exactly one of ``subscribe`` (comma list),
        ``subscribePattern`` (a regex over topic names) or ``assign`` (JSON
        ``{"topic":[0,1]}``); ``startingOffsets`` (``earliest``, ``latest`` or JSON per
        topic-partition; streaming default ``latest``, batch default ``earliest``);
        ``endingOffsets`` (batch only; ``latest`` or JSON); ``startingTimestamp``,
        ``startingOffsetsByTimestamp``, ``startingOffsetsByTimestampStrategy``,
        ``endingTimestamp``, ``endingOffsetsByTimestamp``; ``maxOffsetsPerTrigger``,
        ``minOffsetsPerTrigger`` and ``maxTriggerDelay`` (Spark's time string, default ``15m``);
        ``minPartitions``; ``includeHeaders``; ``failOnDataLoss`` (default true);
        ``groupIdPrefix``; ``kafkaConsumer.pollTimeoutMs``.
sink    ``kafka.bootstrap.servers``; ``topic`` (else a ``topic`` column); trikafka's own
        ``deliveryGuarantee`` (``at-least-once``, the default, or ``exactly-once``) and
        ``transactionalIdPrefix`` (see :mod:`trikafka.spark.sink`).
both    every other ``kafka.<key>`` goes to the Kafka client as ``<key>`` (security settings,
        ``isolation.level``, ``compression.type``, ``acks``, …). Keys Spark refuses are refused
        here with Spark's explanation.

Spark hands options to a data source case-insensitively (lower-cased); everything below
compares lower-cased names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Literal

import attrs

from trikafka.spark.offsets import EARLIEST, LATEST, OffsetSpec, TopicPartition, offsets_from_json

__all__ = [
    "DEFAULT_CLIENTS",
    "DEFAULT_MAX_TRIGGER_DELAY_MS",
    "DELIVERY_GUARANTEES",
    "KafkaOptionError",
    "SinkOptions",
    "SourceOptions",
    "Subscription",
]

#: The Kafka client implementation used inside Spark (see ``trikafka.spark.client``).
DEFAULT_CLIENTS = "trikafka.spark.confluent:ConfluentClients"

#: Spark's default for ``kafkaConsumer.pollTimeoutMs`` (``spark.network.timeout``).
DEFAULT_POLL_TIMEOUT_MS = 120_000

_CONSUMER_REFUSED = {
    "auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported. Instead set the "
    "source option 'startingOffsets' to 'earliest' or 'latest' to specify where to start. "
    "Structured Streaming manages which offsets are consumed internally, rather than relying on "
    "the kafkaConsumer to do it.",
    "key.deserializer": "Kafka option 'key.deserializer' is not supported, as keys are always "
    "read as byte arrays. Use DataFrame operations to explicitly deserialize the keys.",
    "value.deserializer": "Kafka option 'value.deserializer' is not supported, as values are "
    "always read as byte arrays. Use DataFrame operations to explicitly deserialize the values.",
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported. The source does "
    "not commit any offset.",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported as it would "
    "change the records Spark reads.",
}
#: The sink's ``deliveryGuarantee`` values.
DELIVERY_GUARANTEES = ("at-least-once", "exactly-once")

_PRODUCER_REFUSED = {
    "transactional.id": "Kafka option 'transactional.id' is not supported: set the sink option "
    "'deliveryGuarantee' to 'exactly-once' (and optionally 'transactionalIdPrefix'); each task "
    "then writes in a transaction of its own id.",
    "key.serializer": "Kafka option 'key.serializer' is not supported, as keys are always "
    "written as byte arrays. Use DataFrame operations to serialize the key column to string or "
    "binary.",
    "value.serializer": "Kafka option 'value.serializer' is not supported, as values are always "
    "written as byte arrays. Use DataFrame operations to serialize the value column to string or "
    "binary.",
}
#: Spark Kafka options trikafka does not implement: refused rather than silently ignored.
_NOT_SUPPORTED = {
    "maxrecordsperpartition": "maxRecordsPerPartition",
}

#: Spark's default ``maxTriggerDelay`` ("15m").
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
#: Spark's time-string suffixes (``JavaUtils.timeStringAs``), in milliseconds.
_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


class KafkaOptionError(ValueError):
    """An option of the trikafka source or sink is missing, unknown or malformed."""


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _bool(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    raise KafkaOptionError(f"option '{name}' must be 'true' or 'false', got {raw!r}")


def _positive_int(options: dict[str, str], name: str) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise KafkaOptionError(f"option '{name}' must be a positive integer, got {raw!r}")
    return value


def _time_ms(options: dict[str, str], name: str, default: int) -> int:
    """Spark's ``Utils.timeStringAsMs``: ``15m``, ``30s``, ``500ms``, ``2h``; a bare number is ms."""
    raw = options.get(name.lower())
    if raw is None:
        return default
    match = re.fullmatch(r"(-?[0-9]+)([a-z]+)?", raw.strip().lower())
    if match is None or (match.group(2) or "ms") not in _TIME_UNITS_MS:
        raise KafkaOptionError(
            f"option '{name}' must be a time like '15m', '30s' or '500ms' (units us, ms, s, m, min, h, d), "
            f"got {raw!r}"
        )
    value = int(int(match.group(1)) * _TIME_UNITS_MS[match.group(2) or "ms"])
    if value < 0:
        raise KafkaOptionError(f"option '{name}' must not be negative, got {raw!r}")
    return value


def _client_config(options: dict[str, str], refused: Mapping[str, str | None]) -> dict[str, str]:
    config = {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}
    for key in config:
        if refused.get(key):
            raise KafkaOptionError(refused[key])
    if not config.get("bootstrap.servers", "").strip():
        raise KafkaOptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
        )
    return config


@attrs.frozen
class Subscription:
    """Which topic-partitions the source reads: Spark's assign / subscribe / subscribePattern."""

    kind: str  # "assign" | "subscribe" | "subscribePattern"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def partitions(self, topics: Mapping[str, int]) -> set[TopicPartition]:
        """The subscribed partitions, given ``{topic: partition count}`` from metadata."""
        if self.kind == "assign":
            return set(self.assigned)
        if self.kind == "subscribe":
            names = [t for t in self.topics if t in topics]
        else:
            regex = re.compile(self.pattern or "")
            # Kafka's pattern subscription skips internal topics (__consumer_offsets, …).
            names = [t for t in topics if regex.fullmatch(t) and not t.startswith("__")]
        return {TopicPartition(t, p) for t in names for p in range(topics[t])}

    def describe(self) -> str:
        if self.kind == "assign":
            return f"assign {sorted(self.assigned)}"
        if self.kind == "subscribe":
            return f"subscribe {list(self.topics)}"
        return f"subscribePattern {self.pattern!r}"

    @classmethod
    def parse(cls, options: dict[str, str]) -> Subscription:
        given = [name for name in ("assign", "subscribe", "subscribepattern") if name in options]
        if len(given) != 1:
            if not given:
                raise KafkaOptionError(
                    "One of the following options must be specified for Kafka source: "
                    "subscribe, subscribePattern, assign. See the docs for more details."
                )
            raise KafkaOptionError(
                "Only one of the following options can be specified for Kafka source: "
                "subscribe, subscribePattern, assign. See the docs for more details."
            )
        name = given[0]
        raw = options[name]
        if name == "subscribe":
            topics = tuple(t.strip() for t in raw.split(",") if t.strip())
            if not topics:
                raise KafkaOptionError(f"No topics to subscribe to as specified topics are: {raw!r}")
            return cls("subscribe", topics=topics)
        if name == "subscribepattern":
            if not raw.strip():
                raise KafkaOptionError("Pattern to subscribe is empty as specified value for option "
                                       f"'subscribePattern' is {raw!r}")
            try:
                re.compile(raw.strip())
            except re.error as exc:
                raise KafkaOptionError(f"option 'subscribePattern' is not a valid regex: {exc}") from None
            return cls("subscribePattern", pattern=raw.strip())
        try:
            decoded = json.loads(raw)
            assigned = tuple(
                sorted(
                    TopicPartition(str(topic), int(p))
                    for topic, partitions in decoded.items()
                    for p in partitions
                )
            )
        except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
            raise KafkaOptionError(
                f"option 'assign' must be JSON like {{\"topicA\":[0,1],\"topicB\":[2,4]}}, got {raw!r}"
            ) from None
        if not assigned:
            raise KafkaOptionError(f"No topicpartitions to assign as specified value for option 'assign' is {raw!r}")
        return cls("assign", assigned=assigned)


def _offset_spec(
    options: dict[str, str], *, ending: bool, default: str, streaming: bool
) -> OffsetSpec:
    prefix = "ending" if ending else "starting"
    by_time = options.get(f"{prefix}timestamp")
    by_time_json = options.get(f"{prefix}offsetsbytimestamp")
    raw_strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if raw_strategy not in ("error", "latest"):
        raise KafkaOptionError(
            "option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got "
            f"{options['startingoffsetsbytimestampstrategy']!r}"
        )
    # Spark: an ending timestamp with no record at or after it means latest.
    strategy: Literal["error", "latest"] = "latest" if ending or raw_strategy == "latest" else "error"
    if by_time is not None:  # Spark's precedence: timestamp, then by-timestamp JSON, then offsets
        try:
            timestamp = int(by_time.strip())
        except ValueError:
            raise KafkaOptionError(
                f"option '{prefix}Timestamp' must be milliseconds since the epoch, got {by_time!r}"
            ) from None
        return OffsetSpec("timestamp", timestamp=timestamp, strategy=strategy, option=f"{prefix}Timestamp")
    if by_time_json is not None:
        try:
            timestamps = offsets_from_json(by_time_json, what=f"{prefix}OffsetsByTimestamp")
        except ValueError as exc:
            raise KafkaOptionError(str(exc)) from None
        return OffsetSpec(
            "timestamps", offsets=timestamps, strategy=strategy, option=f"{prefix}OffsetsByTimestamp"
        )
    option = f"{prefix}Offsets"
    raw = options.get(option.lower(), default).strip()
    if raw.lower() == "earliest":
        if ending:
            raise KafkaOptionError("ending offset can't be earliest for batch queries on Kafka")
        return OffsetSpec("earliest", option=option)
    if raw.lower() == "latest":
        if not ending and not streaming:
            raise KafkaOptionError("starting offset can't be latest for batch queries on Kafka")
        return OffsetSpec("latest", option=option)
    try:
        offsets = offsets_from_json(raw, what=option)
    except ValueError as exc:
        raise KafkaOptionError(str(exc)) from None
    for tp, offset in offsets.items():
        if offset < EARLIEST:
            raise KafkaOptionError(f"{option}: offset {offset} of {tp} is not an offset, -1 (latest) or -2 (earliest)")
        if ending and offset == EARLIEST:
            raise KafkaOptionError(f"ending offset for {tp} can't be earliest for batch queries on Kafka")
        if not ending and not streaming and offset == LATEST:
            raise KafkaOptionError(f"starting offset for {tp} can't be latest for batch queries on Kafka")
    return OffsetSpec("offsets", offsets=offsets, option=option)


@attrs.frozen
class SourceOptions:
    """Everything the source needs from its options, checked."""

    subscription: Subscription
    client_config: dict[str, str]
    starting: OffsetSpec
    ending: OffsetSpec | None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    group_id_prefix: str = "spark-kafka-source"
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    clients: str = DEFAULT_CLIENTS

    @property
    def isolation_level(self) -> str:
        return self.client_config.get("isolation.level", "read_uncommitted")

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        opts = _lower(options)
        for key, name in _NOT_SUPPORTED.items():
            if key in opts:
                raise KafkaOptionError(f"option '{name}' of Spark's Kafka source is not supported by trikafka")
        client_config = _client_config(opts, _CONSUMER_REFUSED)
        isolation = client_config.get("isolation.level", "read_uncommitted")
        if isolation not in ("read_uncommitted", "read_committed"):
            raise KafkaOptionError(
                f"option 'kafka.isolation.level' must be 'read_uncommitted' or 'read_committed', got {isolation!r}"
            )
        if streaming and any(
            k in opts for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
        ):
            raise KafkaOptionError("ending offset not valid in streaming queries")
        return cls(
            subscription=Subscription.parse(opts),
            client_config=client_config,
            starting=_offset_spec(
                opts, ending=False, default="latest" if streaming else "earliest", streaming=streaming
            ),
            ending=None if streaming else _offset_spec(opts, ending=True, default="latest", streaming=False),
            max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger"),
            min_offsets_per_trigger=_positive_int(opts, "minOffsetsPerTrigger"),
            max_trigger_delay_ms=_time_ms(opts, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
            min_partitions=_positive_int(opts, "minPartitions"),
            include_headers=_bool(opts, "includeHeaders", False),
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            group_id_prefix=opts.get("groupidprefix", "spark-kafka-source"),
            poll_timeout_ms=_positive_int(opts, "kafkaConsumer.pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS,
            clients=opts.get("trikafka.clients", DEFAULT_CLIENTS),
        )


@attrs.frozen
class SinkOptions:
    """The sink's options: where to write, and the producer's settings."""

    client_config: dict[str, str]
    topic: str | None = None
    clients: str = DEFAULT_CLIENTS
    delivery_guarantee: str = "at-least-once"
    transactional_id_prefix: str | None = None

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == "exactly-once"

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        opts = _lower(options)
        client_config = _client_config(opts, _PRODUCER_REFUSED)
        topic = opts.get("topic")
        if topic is not None and not topic.strip():
            raise KafkaOptionError("option 'topic' is empty; leave it out to use the topic column")
        raw = opts.get("deliveryguarantee", "at-least-once")
        guarantee = raw.strip().lower()
        if guarantee not in DELIVERY_GUARANTEES:
            raise KafkaOptionError(
                f"option 'deliveryGuarantee' must be one of {', '.join(repr(g) for g in DELIVERY_GUARANTEES)}, "
                f"got {raw!r}"
            )
        prefix = opts.get("transactionalidprefix")
        if prefix is not None and not prefix.strip():
            raise KafkaOptionError("option 'transactionalIdPrefix' is empty; leave it out for the default")
        if prefix is not None and guarantee != "exactly-once":
            raise KafkaOptionError(
                "option 'transactionalIdPrefix' needs option 'deliveryGuarantee' set to 'exactly-once', "
                f"got {raw!r}"
            )
        if guarantee == "exactly-once" and str(client_config.get("acks", "all")).strip() not in ("all", "-1"):
            raise KafkaOptionError(
                "option 'kafka.acks' must be 'all' (or '-1') with deliveryGuarantee 'exactly-once', "
                f"got {client_config['acks']!r}"
            )
        return cls(
            client_config=client_config,
            topic=topic.strip() if topic else None,
            clients=opts.get("trikafka.clients", DEFAULT_CLIENTS),
            delivery_guarantee=guarantee,
            transactional_id_prefix=prefix.strip() if prefix else None,
        )
