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
    ReadLimits,
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

READ = ReadLimits(max_records=4, with_headers=True, poll_timeout_ms=30_000)


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
    kafka.produce(
        topic,
        [{"key": b"k", "value": b"%d" % i, "headers": [("h", b"%d" % i)], "timestamp": 1000 + i} for i in range(10)],
    )

    chunks = list(_reader(kafka).read(TopicPartition(topic, 0), 2, 9, READ))

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
        list(reader.read(TopicPartition(topic, 0), 2, 10, READ))
    assert failure.value.partitions == {TopicPartition(topic, 0): 2}
    assert reader.watermarks(TopicPartition(topic, 0)) == (6, 10)
    # The same cached consumer reads on afterwards.
    assert [o for c in reader.read(TopicPartition(topic, 0), 6, 10, READ) for o in c.offsets] == [6, 7, 8, 9]


def test_reader_gives_up_when_the_range_never_fills(kafka):
    topic = kafka.topic("reader-short")
    kafka.produce(topic, [{"value": b"x"}] * 3)
    with pytest.raises(
        KafkaClientError, match=r"Failed to get records for .* at offset 3 \(range ends at 5\) after polling for 300 ms"
    ):
        short = ReadLimits(max_records=10, with_headers=False, poll_timeout_ms=300)
        list(_reader(kafka).read(TopicPartition(topic, 0), 0, 5, short))


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


def _transactional(kafka, transactional_id, **config):
    from trikafka.spark.producers import ConfluentTransactionalWriter

    return ConfluentTransactionalWriter({"bootstrap.servers": kafka.bootstrap, **config}, transactional_id)


def _committed_values(kafka, topic):
    config = {"isolation.level": "read_committed"}
    chunks = _reader(kafka, **config).read(
        TopicPartition(topic, 0), 0, _reader(kafka, **config).watermarks(TopicPartition(topic, 0))[1], READ
    )
    return [v for chunk in chunks for v in chunk.values]


def test_transactional_writer_commits_records_and_marker_together(kafka):
    topic = kafka.topic("txn-writer")
    writer = _transactional(kafka, f"{topic}-p0")
    assert writer._config["transaction.timeout.ms"] == 900_000
    assert writer._config["enable.idempotence"] is True
    writer.init()
    assert writer.committed_batch(topic) is None
    writer.begin()
    writer.write([topic] * 3, [None] * 3, [b"a", b"b", b"c"], None, None)
    assert writer.commit(7, topic) == 3
    writer.close()

    again = _transactional(kafka, f"{topic}-p0")
    again.init()
    assert again.committed_batch(topic) == 7
    again.close()
    assert _committed_values(kafka, topic) == [b"a", b"b", b"c"]


def test_a_new_attempt_fences_the_old_one_and_aborts_its_transaction(kafka):
    topic = kafka.topic("txn-fence")
    old = _transactional(kafka, f"{topic}-p0")
    old.init()
    old.begin()
    old.write([topic] * 2, [None] * 2, [b"zombie1", b"zombie2"], None, None)
    old.flush()  # in the log, inside an open transaction

    new = _transactional(kafka, f"{topic}-p0")
    new.init()  # fences `old` and aborts its transaction
    assert new.committed_batch(topic) is None
    new.begin()
    new.write([topic], [None], [b"fresh"], None, None)
    assert new.commit(0, topic) == 1
    new.close()

    with pytest.raises(KafkaClientError, match="(FENCED|INVALID_PRODUCER_EPOCH)"):
        old.commit(0, topic)
    old.abort()
    old.close()
    assert _committed_values(kafka, topic) == [b"fresh"]


def test_an_aborted_transaction_leaves_no_marker(kafka):
    topic = kafka.topic("txn-abort")
    writer = _transactional(kafka, f"{topic}-p0", **{"transaction.timeout.ms": "60000"})
    assert writer._config["transaction.timeout.ms"] == "60000"
    writer.init()
    writer.begin()
    writer.write([topic], [None], [b"gone"], None, None)
    writer.abort()
    writer.close()
    check = _transactional(kafka, f"{topic}-p0")
    check.init()
    assert check.committed_batch(topic) is None
    check.close()
    assert _committed_values(kafka, topic) == []
