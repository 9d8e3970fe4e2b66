"""``max.broker.partitions``: CreateTopics and CreatePartitions beyond the broker-wide cap are
refused with POLICY_VIOLATION naming the cap — seen through confluent-kafka's AdminClient on
a real socket — and nothing of a refused request is created."""

from __future__ import annotations

import pytest

from trikafka.config import BrokerConfig
from trikafka.errors import ConfigError
from trikafka.output import StartupInfo

pytestmark = pytest.mark.trikafka(config={"max.broker.partitions": 10})


def _admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _create(admin, name: str, partitions: int):
    from confluent_kafka.admin import NewTopic

    return admin.create_topics([NewTopic(name, partitions, 1)])[name]


def _failure(future):
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as info:
        future.result(timeout=30)
    return info.value.args[0]


def test_create_topics_beyond_the_cap_is_a_policy_violation(kafka_broker):
    from confluent_kafka import KafkaError

    admin = _admin(kafka_broker)
    _create(admin, "first", 6).result(timeout=30)
    error = _failure(_create(admin, "second", 5))
    assert error.code() == KafkaError.POLICY_VIOLATION
    assert "max.broker.partitions=10" in error.str()
    _create(admin, "second", 4).result(timeout=30)  # exactly at the cap
    error = _failure(_create(admin, "third", 1))
    assert error.code() == KafkaError.POLICY_VIOLATION
    topics = admin.list_topics(timeout=30).topics
    assert {name: len(t.partitions) for name, t in topics.items()} == {"first": 6, "second": 4}


def test_create_partitions_beyond_the_cap_is_a_policy_violation(kafka_broker):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewPartitions

    admin = _admin(kafka_broker)
    _create(admin, "grows", 3).result(timeout=30)
    refused = admin.create_partitions([NewPartitions("grows", 11)])["grows"]
    error = _failure(refused)
    assert error.code() == KafkaError.POLICY_VIOLATION
    assert "max.broker.partitions=10" in error.str()
    admin.create_partitions([NewPartitions("grows", 10)])["grows"].result(timeout=30)
    assert len(admin.list_topics(timeout=30).topics["grows"].partitions) == 10


def test_the_cap_is_a_checked_key_stated_in_the_startup_block():
    assert BrokerConfig().max_broker_partitions == 200_000
    with pytest.raises(ConfigError, match="max.broker.partitions"):
        BrokerConfig.from_properties({"max.broker.partitions": "0"})
    info = StartupInfo("v", 1, "c", ["PLAINTEXT://x:1"], "memory", {}, partition_cap=200_000)
    assert "  partitions: at most 200,000 on this broker (max.broker.partitions)" in info.lines(markup=False)
