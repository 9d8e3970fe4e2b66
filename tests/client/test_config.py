"""Client config: Kafka's keys and Java's defaults, either spelling, refusals that name things."""

from __future__ import annotations

import pytest

from trikafka.client.config import CLIENT_KEYS, ClientConfig, client_config_keys
from trikafka.errors import ConfigError


def test_java_defaults():
    producer = ClientConfig.for_role("producer")
    assert producer["linger.ms"] == 5
    assert producer["batch.size"] == 16384
    assert producer["acks"] == -1
    assert producer["enable.idempotence"] is True
    assert producer["max.in.flight.requests.per.connection"] == 5
    assert producer["retries"] == 2**31 - 1
    assert producer["delivery.timeout.ms"] == 120000
    assert producer["compression.type"] == "none"
    consumer = ClientConfig.for_role("consumer", group_id="g")
    assert consumer["session.timeout.ms"] == 45000
    assert consumer["heartbeat.interval.ms"] == 3000
    assert consumer["auto.offset.reset"] == "latest"
    assert consumer["partition.assignment.strategy"] == ("range", "cooperative-sticky")
    assert consumer.max_poll_records == 500


def test_either_spelling_and_strings_parse():
    config = ClientConfig.for_role("producer", {"linger.ms": "20", "compression.type": "ZSTD"}, batch_size=1000)
    assert (config.linger_ms, config["compression.type"], config.batch_size) == (20, "zstd", 1000)
    assert ClientConfig.for_role("producer", acks="all")["acks"] == -1
    assert {"linger.ms", "compression.type", "batch.size"} == config.explicit


@pytest.mark.parametrize(
    ("role", "items", "words"),
    [
        ("producer", {"linger.mss": 1}, ["linger.mss", "did you mean 'linger.ms'"]),
        ("producer", {"linger_ms": -1}, ["linger.ms", "-1", "integer in [0,"]),
        ("producer", {"acks": 2}, ["acks", "allowed values are all, -1, 0 and 1"]),
        ("producer", {"compression.type": "brotli"}, ["brotli", "gzip, snappy, lz4, zstd"]),
        ("producer", {"group.id": "g"}, ["group.id is a consumer setting", "a producer does not take it"]),
        ("consumer", {"linger.ms": 1}, ["linger.ms is a producer setting"]),
        ("consumer", {"isolation.level": "serializable"}, ["read_uncommitted, read_committed"]),
        ("consumer", {"partition.assignment.strategy": "roundrobin"}, ["range and cooperative-sticky"]),
        ("consumer", {"heartbeat.interval.ms": 50000}, ["must be lower than session.timeout.ms"]),
        ("admin", {"enable.idempotence": True}, ["producer setting"]),
    ],
)
def test_refusals_name_key_value_and_what_is_allowed(role, items, words):
    with pytest.raises(ConfigError) as info:
        ClientConfig.for_role(role, items)
    for word in words:
        assert word in str(info.value)


def test_idempotence_rules_as_java():
    # Left at its default, idempotence turns off when another key conflicts (Java 3.2+).
    assert ClientConfig.for_role("producer", acks=1)["enable.idempotence"] is False
    # Asked for explicitly, the conflict is an error naming the conflicting key.
    with pytest.raises(ConfigError, match="acks.*when enable.idempotence is true"):
        ClientConfig.for_role("producer", acks=1, enable_idempotence=True)
    with pytest.raises(ConfigError, match="max.in.flight"):
        ClientConfig.for_role("producer", max_in_flight_requests_per_connection=6, transactional_id="t")
    with pytest.raises(ConfigError, match="must be true when transactional.id is set"):
        ClientConfig.for_role("producer", enable_idempotence=False, transactional_id="t")


def test_delivery_timeout_floor():
    assert ClientConfig.for_role("producer", request_timeout_ms=200000)["delivery.timeout.ms"] == 200005
    with pytest.raises(ConfigError, match="at least linger.ms \\+ request.timeout.ms"):
        ClientConfig.for_role("producer", delivery_timeout_ms=1000)


def test_auto_commit_needs_a_group():
    assert ClientConfig.for_role("consumer")["enable.auto.commit"] is False
    with pytest.raises(ConfigError, match="needs a group.id"):
        ClientConfig.for_role("consumer", enable_auto_commit=True)


def test_table_lists_every_key_once_with_a_role():
    rows = list(client_config_keys())
    assert [r[0] for r in rows] == list(CLIENT_KEYS)
    assert all(r[2] and r[3] for r in rows)
