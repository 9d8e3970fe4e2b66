"""The Kafka clients behind the Spark source and sink, and the session helper — without Spark.

The confluent-kafka clients run against the session's broker process; nothing here starts a
SparkSession.
"""

from __future__ import annotations

import confluent_kafka  # noqa: E402
import pytest

from trikafka.spark.client import (  # noqa: E402
    KafkaClientError,
    KafkaProduceError,
    OffsetOutOfRangeError,
    load_clients,
)
from trikafka.spark.confluent import (  # noqa: E402
    ConfluentClients,
    ConfluentReader,
    ConfluentWriter,
    kafka_error_name,
)
from trikafka.spark.offsets import TopicPartition  # noqa: E402
from trikafka.spark.session import _local_cores  # noqa: E402

READ = {"max_records": 4, "with_headers": True, "poll_timeout_ms": 30_000}


def test_error_names_are_kafkas():
    assert kafka_error_name(confluent_kafka.KafkaError(10)).startswith(
        "MESSAGE_TOO_LARGE (librdkafka MSG_SIZE_TOO_LARGE:"
    )
    assert kafka_error_name(confluent_kafka.KafkaError(-140)).startswith("_AUTO_OFFSET_RESET (")


def test_client_defaults_match_the_java_clients():
    reader = ConfluentReader({"bootstrap.servers": "x", "group.id": "g"})
    assert reader._config["isolation.level"] == "read_uncommitted"  # librdkafka's is read_committed
    assert reader._config["auto.offset.reset"] == "error"
    assert reader._config["enable.auto.commit"] is False
    committed = ConfluentReader({"bootstrap.servers": "x", "group.id": "g", "isolation.level": "read_committed"})
    assert committed._config["isolation.level"] == "read_committed"

    writer = ConfluentWriter({"bootstrap.servers": "x"})
    assert writer._config["acks"] == "all"
    assert writer._config["enable.idempotence"] is True
    assert writer._config["partitioner"] == "murmur2_random"
    assert "enable.idempotence" not in ConfluentWriter({"bootstrap.servers": "x", "acks": "1"})._config


def test_clients_are_cached_per_configuration_and_evicted():
    clients = ConfluentClients()
    first = clients.reader({"bootstrap.servers": "x", "group.id": "cache-0"})
    assert clients.reader({"group.id": "cache-0", "bootstrap.servers": "x"}) is first
    for i in range(1, ConfluentClients.CAPACITY + 1):
        clients.reader({"bootstrap.servers": "x", "group.id": f"cache-{i}"})
    assert clients.reader({"bootstrap.servers": "x", "group.id": "cache-0"}) is not first


def test_load_clients():
    assert isinstance(load_clients("trikafka.spark.confluent:ConfluentClients"), ConfluentClients)
    with pytest.raises(ValueError, match="must look like 'package.module:Name'"):
        load_clients("trikafka.spark.confluent")


@pytest.mark.parametrize(
    ("master", "cores"),
    [("local", 1), ("local[2]", 2), ("local[3,2]", 3), ("spark://host:7077", None), ("yarn", None)],
)
def test_local_cores(master, cores):
    assert _local_cores(master) == cores


def _reader(kafka, **config):
    return ConfluentReader({"bootstrap.servers": kafka.bootstrap, "group.id": "tests", **config})


def test_reader_reads_a_range_in_chunks(kafka):
    topic = kafka.topic("reader")
    kafka.produce(topic, [{"key": b"k", "value": b"%d" % i, "headers": [("h", b"%d" % i)], "timestamp": 1000 + i} for i in range(10)])

    chunks = list(_reader(kafka).read(TopicPartition(topic, 0), 2, 9, **READ))

    assert [len(c) for c in chunks] == [4, 3]
    assert [o for c in chunks for o in c.offsets] == list(range(2, 9))
    assert [v for c in chunks for v in c.values] == [b"%d" % i for i in range(2, 9)]
    assert [t for c in chunks for t in c.timestamps] == [1000 + i for i in range(2, 9)]
    assert {t for c in chunks for t in c.timestamp_types} == {0}
    assert [h for c in chunks for h in c.headers] == [[("h", b"%d" % i)] for i in range(2, 9)]


def test_reader_reports_deleted_offsets_and_watermarks(kafka):
    topic = kafka.topic("reader-deleted")
    kafka.produce(topic, [{"value": b"x"}] * 10)
    kafka.delete_records(topic, 0, before=6)
    reader = _reader(kafka)

    with pytest.raises(OffsetOutOfRangeError) as failure:
        list(reader.read(TopicPartition(topic, 0), 2, 10, **READ))
    assert failure.value.offset == 2
    assert reader.watermarks(TopicPartition(topic, 0)) == (6, 10)
    # The same cached consumer reads on afterwards.
    assert [o for c in reader.read(TopicPartition(topic, 0), 6, 10, **READ) for o in c.offsets] == [6, 7, 8, 9]


def test_reader_gives_up_when_the_range_never_fills(kafka):
    topic = kafka.topic("reader-short")
    kafka.produce(topic, [{"value": b"x"}] * 3)
    with pytest.raises(KafkaClientError, match=r"Failed to get records for .* at offset 3 \(range ends at 5\) after polling for 300 ms"):
        list(_reader(kafka).read(TopicPartition(topic, 0), 0, 5, max_records=10, with_headers=False, poll_timeout_ms=300))


def test_writer_counts_deliveries_and_names_failures(kafka):
    topic = kafka.topic("writer", config={"max.message.bytes": "300"})
    writer = ConfluentWriter({"bootstrap.servers": kafka.bootstrap})

    writer.write([topic] * 2, [b"k", None], ["small", b"also small"], [[("h", b"1")], None], None)
    assert writer.flush() == 2

    writer.write([topic], [None], [b"x" * 1000], None, [0])
    with pytest.raises(KafkaProduceError, match="KAFKA_PRODUCE_FAILED: 1 record") as failure:
        writer.flush()
    assert failure.value.errors == {"MESSAGE_TOO_LARGE": 1}
    assert f"topic '{topic}' partition 0: MESSAGE_TOO_LARGE" in str(failure.value)

    writer.write([topic], [None], [b"ok"], None, [None])  # the failure was reported once
    assert writer.flush() == 1
    assert [m.value() for m in kafka.consume(topic)] == [b"small", b"also small", b"ok"]
