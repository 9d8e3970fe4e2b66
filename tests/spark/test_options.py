"""Option parsing of the Spark source and sink, without Spark: Spark's names, defaults, errors."""

from __future__ import annotations

import pytest

from trikafka.spark.offsets import OffsetSpec, TopicPartition
from trikafka.spark.options import (
    DEFAULT_CLIENTS,
    KafkaOptionError,
    SinkOptions,
    SourceOptions,
    Subscription,
)

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def source(streaming=True, **options):
    return SourceOptions.parse({**BOOTSTRAP, **options}, streaming=streaming)


def test_defaults_are_sparks():
    stream = source(subscribe="clicks")
    assert stream.subscription == Subscription("subscribe", topics=("clicks",))
    assert stream.starting == OffsetSpec("latest", option="startingOffsets")
    assert stream.ending is None
    assert stream.max_offsets_per_trigger is None
    assert stream.min_partitions is None
    assert stream.include_headers is False
    assert stream.fail_on_data_loss is True
    assert stream.isolation_level == "read_uncommitted"
    assert stream.group_id_prefix == "spark-kafka-source"
    assert stream.poll_timeout_ms == 120_000
    assert stream.clients == DEFAULT_CLIENTS
    assert stream.client_config == {"bootstrap.servers": "127.0.0.1:9092"}

    batch = source(streaming=False, subscribe="clicks")
    assert batch.starting == OffsetSpec("earliest", option="startingOffsets")
    assert batch.ending == OffsetSpec("latest", option="endingOffsets")


def test_names_are_case_insensitive_and_kafka_keys_go_to_the_client():
    options = source(
        SUBSCRIBE="a, b ,",
        maxOffsetsPerTrigger="100",
        MINPARTITIONS="4",
        includeheaders="TRUE",
        failOnDataLoss="false",
        **{"kafka.security.protocol": "SSL", "kafka.isolation.level": "read_committed"},
    )
    assert options.subscription.topics == ("a", "b")
    assert options.max_offsets_per_trigger == 100
    assert options.min_partitions == 4
    assert options.include_headers is True
    assert options.fail_on_data_loss is False
    assert options.isolation_level == "read_committed"
    assert options.client_config == {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "SSL",
        "isolation.level": "read_committed",
    }


def test_starting_offsets_json_and_timestamps():
    options = source(subscribe="a", startingOffsets='{"a": {"0": 23, "1": -2}}')
    assert options.starting.kind == "offsets"
    assert options.starting.offsets == {TopicPartition("a", 0): 23, TopicPartition("a", 1): -2}

    by_time = source(subscribe="a", startingTimestamp="1700000000000", startingOffsets="earliest")
    assert by_time.starting.kind == "timestamp" and by_time.starting.timestamp == 1_700_000_000_000
    assert by_time.starting.strategy == "error"

    per_partition = source(
        subscribe="a",
        startingOffsetsByTimestamp='{"a": {"0": 1000}}',
        startingOffsetsByTimestampStrategy="latest",
    )
    assert per_partition.starting.kind == "timestamps"
    assert per_partition.starting.offsets == {TopicPartition("a", 0): 1000}
    assert per_partition.starting.strategy == "latest"


def test_subscriptions():
    topics = {"clicks": 2, "clicks-per-minute": 1, "__consumer_offsets": 50, "views": 1}
    assert source(subscribe="clicks,missing").subscription.partitions(topics) == {
        TopicPartition("clicks", 0),
        TopicPartition("clicks", 1),
    }
    pattern = source(subscribePattern="clicks.*|__.*").subscription
    assert pattern.partitions(topics) == {
        TopicPartition("clicks", 0),
        TopicPartition("clicks", 1),
        TopicPartition("clicks-per-minute", 0),
    }
    assign = source(assign='{"views": [0], "clicks": [1]}').subscription
    assert assign.partitions(topics) == {TopicPartition("views", 0), TopicPartition("clicks", 1)}


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({}, True,
         "One of the following options must be specified for Kafka source: subscribe, subscribePattern, assign"),
        ({"subscribe": "a", "subscribePattern": "b"}, True, "Only one of the following options can be specified"),
        ({"subscribe": " , "}, True, "No topics to subscribe to"),
        ({"subscribePattern": "("}, True, "not a valid regex"),
        ({"assign": "[1]"}, True, "option 'assign' must be JSON like"),
        ({"subscribe": "a", "endingOffsets": "latest"}, True, "ending offset not valid in streaming queries"),
        ({"subscribe": "a", "startingOffsets": "latest"}, False, "starting offset can't be latest for batch queries"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, False, "ending offset can't be earliest for batch queries"),
        ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, False, "ending offset for a-0 can't be earliest"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, True, "offset -3 of a-0 is not an offset"),
        ({"subscribe": "a", "startingOffsets": "soon"}, True, "expected 'earliest', 'latest' or JSON"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, True, "'maxOffsetsPerTrigger' must be a positive integer"),
        ({"subscribe": "a", "minPartitions": "many"}, True, "'minPartitions' must be a positive integer"),
        ({"subscribe": "a", "failOnDataLoss": "yes"}, True, "'failOnDataLoss' must be 'true' or 'false'"),
        ({"subscribe": "a", "startingTimestamp": "noon"}, True, "'startingTimestamp' must be milliseconds"),
        ({"subscribe": "a", "minOffsetsPerTrigger": "-5"}, True, "'minOffsetsPerTrigger' must be a positive integer"),
        ({"subscribe": "a", "maxTriggerDelay": "soon"}, True,
         "option 'maxTriggerDelay' must be a time like '15m', '30s' or '500ms' "
         "(units us, ms, s, m, min, h, d), got 'soon'"),
        ({"subscribe": "a", "maxTriggerDelay": "5 weeks"}, True, "option 'maxTriggerDelay' must be a time like"),
        ({"subscribe": "a", "maxRecordsPerPartition": "5"}, True,
         "'maxRecordsPerPartition' of Spark's Kafka source is not supported"),
        ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, True,
         "'auto.offset.reset' is not supported. Instead set the source option 'startingOffsets'"),
        ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, True, "'enable.auto.commit' is not supported"),
        ({"subscribe": "a", "kafka.value.deserializer": "x"}, True, "'value.deserializer' is not supported"),
        ({"subscribe": "a", "kafka.isolation.level": "dirty"}, True,
         "'kafka.isolation.level' must be 'read_uncommitted' or 'read_committed'"),
    ],
)
def test_bad_source_options(options, streaming, message):
    with pytest.raises(KafkaOptionError, match=_escape(message)):
        source(streaming=streaming, **options)


@pytest.mark.parametrize(
    ("raw", "ms"),
    [("15m", 900_000), ("30s", 30_000), ("500ms", 500), ("2500", 2500), ("1h", 3_600_000), ("5min", 300_000),
     (" 1D ", 86_400_000)],
)
def test_max_trigger_delay_is_a_spark_time_string(raw, ms):
    assert source(subscribe="a", maxTriggerDelay=raw).max_trigger_delay_ms == ms


def test_min_offsets_per_trigger_and_its_delay_default():
    options = source(subscribe="a", MINOFFSETSPERTRIGGER="50")
    assert options.min_offsets_per_trigger == 50
    assert options.max_trigger_delay_ms == 15 * 60 * 1000  # Spark's "15m"
    assert source(subscribe="a").min_offsets_per_trigger is None


def test_bootstrap_servers_are_required():
    with pytest.raises(KafkaOptionError, match="'kafka.bootstrap.servers' must be specified"):
        SourceOptions.parse({"subscribe": "a"}, streaming=True)
    with pytest.raises(KafkaOptionError, match="'kafka.bootstrap.servers' must be specified"):
        SinkOptions.parse({"topic": "a"})


def test_sink_options():
    options = SinkOptions.parse({**BOOTSTRAP, "Topic": " out ", "kafka.compression.type": "zstd"})
    assert options.topic == "out"
    assert options.client_config == {"bootstrap.servers": "127.0.0.1:9092", "compression.type": "zstd"}
    assert SinkOptions.parse(BOOTSTRAP).topic is None
    with pytest.raises(KafkaOptionError, match="'key.serializer' is not supported"):
        SinkOptions.parse({**BOOTSTRAP, "kafka.key.serializer": "x"})


def test_sink_delivery_guarantee():
    assert SinkOptions.parse(BOOTSTRAP).delivery_guarantee == "at-least-once"
    assert SinkOptions.parse(BOOTSTRAP).exactly_once is False
    options = SinkOptions.parse({**BOOTSTRAP, "DELIVERYGUARANTEE": "Exactly-Once", "transactionalIdPrefix": " jobs "})
    assert options.exactly_once is True
    assert options.transactional_id_prefix == "jobs"
    with pytest.raises(KafkaOptionError) as bad:
        SinkOptions.parse({**BOOTSTRAP, "deliveryGuarantee": "exactly_once"})
    assert str(bad.value) == (
        "option 'deliveryGuarantee' must be one of 'at-least-once', 'exactly-once', got 'exactly_once'"
    )
    with pytest.raises(KafkaOptionError, match="'transactionalIdPrefix' needs option 'deliveryGuarantee'"):
        SinkOptions.parse({**BOOTSTRAP, "transactionalIdPrefix": "x"})
    with pytest.raises(KafkaOptionError, match="'transactionalIdPrefix' is empty"):
        SinkOptions.parse({**BOOTSTRAP, "deliveryGuarantee": "exactly-once", "transactionalIdPrefix": " "})
    with pytest.raises(KafkaOptionError, match="'kafka.acks' must be 'all'.*got '1'"):
        SinkOptions.parse({**BOOTSTRAP, "deliveryGuarantee": "exactly-once", "kafka.acks": "1"})
    with pytest.raises(
        KafkaOptionError, match="'transactional.id' is not supported: set the sink option 'deliveryGuarantee'"
    ):
        SinkOptions.parse({**BOOTSTRAP, "kafka.transactional.id": "mine"})


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_sink_columns_are_checked_like_sparks():
    import pyspark  # noqa: F401 - installed by the spark extra; must not skip
    from pyspark.sql import types as T

    from trikafka.spark.sink import WritePlan

    headers = T.ArrayType(T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]))
    types = {
        "string": T.StringType(),
        "binary": T.BinaryType(),
        "int": T.IntegerType(),
        "long": T.LongType(),
        "double": T.DoubleType(),
        "array<struct<key:string,value:binary>>": headers,
        "array<string>": T.ArrayType(T.StringType()),
    }

    def plan(ddl, **options):  # "name type, name type" without a SparkSession
        fields = [T.StructField(name, types[kind]) for name, kind in (c.strip().split(" ", 1) for c in ddl.split(", "))]
        return WritePlan.of(T.StructType(fields), SinkOptions.parse({**BOOTSTRAP, **options}))

    full = plan(
        "Topic string, KEY binary, value string, headers array<struct<key:string,value:binary>>, "
        "partition int, extra double"
    )
    assert full == WritePlan(value="value", key="KEY", topic="Topic", headers="headers", partition="partition")
    # The topic option wins over a topic column.
    assert plan("topic string, value binary", topic="t").topic is None
    for ddl, options, message in [
        ("key string", {"topic": "t"}, "Required attribute 'value' not found"),
        ("value string", {}, "topic option required when no 'topic' attribute is present"),
        ("value int", {"topic": "t"}, "value attribute type must be a string or binary, got int"),
        ("value string, key int", {"topic": "t"}, "key attribute type must be a string or binary"),
        ("value string, topic binary", {}, "topic attribute type must be a string"),
        ("value string, partition long", {"topic": "t"}, "partition attribute type must be an int"),
        ("value string, headers array<string>", {"topic": "t"}, "headers attribute type must be an array of struct"),
    ]:
        with pytest.raises(KafkaOptionError, match=_escape(message)):
            plan(ddl, **options)
