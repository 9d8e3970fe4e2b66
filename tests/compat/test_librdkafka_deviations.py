"""What librdkafka's own test suite (0081-admin) expects of a broker, through confluent-kafka.

* ``message.format.version`` in every spelling Kafka 3.x's MetadataVersionValidator takes
  (``0.10.0.0``, ``0.10.0``, ``2.8-IV1``, ``2.8.1``) is accepted on CreateTopics and ignored;
  one it refuses (``0.10``) is INVALID_CONFIG naming the key.
* Broker-level dynamic configs answer as Kafka's DynamicBrokerConfig does: a per-broker key
  Kafka updates live (``sasl.kerberos.min.time.before.relogin``) is accepted on the broker's
  own id and described back; a key Kafka cannot update live and a key trikafka does not
  reconfigure live are INVALID_REQUEST with the message saying which (the cluster default,
  which confluent-kafka cannot name, is in tests/server/test_configs.py).
"""

from __future__ import annotations

import pytest

from trikafka.testing.process import BrokerProcess

from .support import TIMEOUT

pytestmark = [pytest.mark.compat]


@pytest.fixture
def admin(start_broker_process):
    """A broker of the test's own: the topics made here stay out of the shared broker."""
    from confluent_kafka.admin import AdminClient

    broker: BrokerProcess = start_broker_process()
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_message_format_version_spellings_are_accepted_and_ignored(admin) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, NewTopic

    for i, version in enumerate(["0.10.0.0", "0.10.0", "2.8-IV1", "2.8.1", "3.0"]):
        name = f"mfv-{i}"
        for future in admin.create_topics([NewTopic(name, 1, 1, config={"message.format.version": version})]).values():
            future.result(TIMEOUT)
        (described,) = admin.describe_configs([ConfigResource("TOPIC", name)]).values()
        assert described.result(TIMEOUT)["message.format.version"].value == version
    (refused,) = admin.create_topics([NewTopic("mfv-bad", 1, 1, config={"message.format.version": "0.10"})]).values()
    with pytest.raises(KafkaException) as info:
        refused.result(TIMEOUT)
    assert info.value.args[0].name() == "INVALID_CONFIG"
    assert "message.format.version" in info.value.args[0].str()


def _alter_broker(admin, name: str, key: str, value: str):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource("BROKER", name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    (future,) = admin.incremental_alter_configs([resource]).values()
    return future


def _error(future):
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT)
    return info.value.args[0]


def test_broker_dynamic_configs_answer_as_kafka_does(admin) -> None:
    from confluent_kafka.admin import ConfigResource, ConfigSource

    node = str(min(admin.list_topics(timeout=TIMEOUT).brokers))
    _alter_broker(admin, node, "sasl.kerberos.min.time.before.relogin", "58000").result(TIMEOUT)
    (described,) = admin.describe_configs([ConfigResource("BROKER", node)]).values()
    entry = described.result(TIMEOUT)["sasl.kerberos.min.time.before.relogin"]
    assert entry.value == "58000" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    static = _error(_alter_broker(admin, node, "log.dirs", "/tmp/elsewhere"))
    assert static.name() == "INVALID_REQUEST"
    assert static.str().endswith("Cannot update these configs dynamically: [log.dirs]")
    _alter_broker(admin, node, "num.io.threads", "2").result(TIMEOUT)  # cluster-wide in Kafka 4.4
    mistyped = _error(_alter_broker(admin, node, "sasl.kerberos.min.time.before.relogin", "soon"))
    assert mistyped.name() == "INVALID_REQUEST"
    assert "sasl.kerberos.min.time.before.relogin" in mistyped.str()
