"""The admin surface through real clients: kafka-python's admin (DescribeLogDirs,
DescribeTopicPartitions, DescribeProducers) and confluent-kafka's ``describe_topics``, against
a real broker process with a data directory.

OffsetForLeaderEpoch is covered in ``tests/server/test_admin_surface.py``: clients send it only
after a leader epoch change, which a single broker (epoch 0 forever) never makes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from trikafka.testing.process import BrokerProcess
from trikafka.testing.process import broker_process as run_broker_process

from .support import TIMEOUT

pytestmark = [
    pytest.mark.compat,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

TOPIC = "admin-surface"


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("data")
    with run_broker_process("--data-dir", str(data)) as process:
        process.data_dir = data
        yield process
        assert process.stop() == 0, process.output


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaAdminClient

    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in confluent.create_topics([NewTopic(TOPIC, 3, 1)]).values():
        future.result(TIMEOUT)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(10):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"v" * 200, partition=1)
    assert producer.flush(TIMEOUT) == 0
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    yield client
    client.close()


def test_kafka_python_describe_log_dirs(broker: BrokerProcess, admin) -> None:
    (per_broker,) = admin.describe_log_dirs()
    (log_dir,) = per_broker["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == str(broker.data_dir.absolute())
    sizes = {p["partition_index"]: p["partition_size"]
             for t in log_dir["topics"] if t["name"] == TOPIC for p in t["partitions"]}
    assert sizes[0] == 0 and sizes[1] > 2000 and set(sizes) == {0, 1, 2}


def test_kafka_python_describe_topic_partitions(admin) -> None:
    answer = admin.describe_topic_partitions([TOPIC], response_partition_limit=2)
    (topic,) = answer["topics"]
    assert topic["error_code"] == 0 and [p["partition_index"] for p in topic["partitions"]] == [0, 1]
    assert answer["next_cursor"] == {"topic_name": TOPIC, "partition_index": 2}
    rest = admin.describe_topic_partitions([TOPIC], cursor=answer["next_cursor"])
    assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [2]
    assert rest["next_cursor"] is None


def test_kafka_python_describe_producers(admin) -> None:
    from kafka import TopicPartition

    states = admin.describe_producers([TopicPartition(TOPIC, 1), TopicPartition(TOPIC, 0)])
    busy = states[TopicPartition(TOPIC, 1)]
    idle = states[TopicPartition(TOPIC, 0)]
    (producer,) = busy.active_producers
    assert producer.producer_id >= 0 and producer.last_sequence == 9
    assert producer.current_transaction_start_offset == -1 and producer.last_timestamp > 0
    assert idle.active_producers == []


def test_confluent_describe_topics(broker: BrokerProcess, admin) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = confluent.describe_topics(TopicCollection([TOPIC])).values()
    description = future.result(TIMEOUT)
    assert [p.id for p in description.partitions] == [0, 1, 2]


def test_confluent_list_offsets(broker: BrokerProcess, admin) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
    wanted = {TopicPartition(TOPIC, 1): OffsetSpec.earliest(), TopicPartition(TOPIC, 2): OffsetSpec.latest()}
    found = {tp: future.result(TIMEOUT).offset for tp, future in confluent.list_offsets(wanted).items()}
    assert found == {TopicPartition(TOPIC, 1): 0, TopicPartition(TOPIC, 2): 0}
    (latest,) = confluent.list_offsets({TopicPartition(TOPIC, 1): OffsetSpec.latest()}).values()
    assert latest.result(TIMEOUT).offset == 10
    # KIP-734: the first record with the largest timestamp (the ten may share one millisecond).
    (newest,) = confluent.list_offsets({TopicPartition(TOPIC, 1): OffsetSpec.max_timestamp()}).values()
    assert 0 <= newest.result(TIMEOUT).offset <= 9
