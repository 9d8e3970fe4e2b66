"""Kafka 4.4's update mode of each broker key (``trikafka/config/update_modes.py``) is data read
from Kafka 4.4's broker reference: every key it names is in that reference's key list."""

from __future__ import annotations

from trikafka.config.update_modes import CLUSTER_WIDE, PER_BROKER, update_mode

from .test_kafka_broker_keys import KAFKA_44_REFERENCE


def test_every_dynamic_key_is_a_kafka_4_4_broker_key():
    assert (PER_BROKER | CLUSTER_WIDE) <= KAFKA_44_REFERENCE
    assert not PER_BROKER & CLUSTER_WIDE


def test_modes_as_the_reference_gives_them():
    assert update_mode("log.cleaner.threads") == "cluster-wide"
    assert update_mode("max.connections") == "cluster-wide"
    assert update_mode("listeners") == "per-broker"
    assert update_mode("listener.name.external.ssl.keystore.location") == "per-broker"
    assert update_mode("log.retention.hours") == "read-only"  # only log.retention.ms is dynamic
    assert update_mode("advertised.listeners") == "read-only"
    assert update_mode("num.partitions") == "read-only"
