"""Every key of Kafka's broker configuration (``trikafka/config/kafka_keys.py``, derived from Kafka's
sources) goes through ``server.properties`` loading: honoured, or accepted with one INFO line
saying why it has no effect in one process — never refused as unknown."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from trikafka.config import TIME_ALIASES, BrokerConfig, config_keys
from trikafka.config.kafka_keys import KAFKA_BROKER_KEYS
from trikafka.errors import ConfigError
from trikafka.testing.process import BrokerProcess

#: The keys trikafka honours, with a value it takes (Kafka's hour/minute aliases included).
OURS = {key: default for key, default, _doc in config_keys()} | {alias: "168" for alias, *_ in TIME_ALIASES}


#: Kafka 4.4's broker configuration reference, every key (kafka-site's generated page; see the file).
KAFKA_44_REFERENCE = frozenset(
    line.strip()
    for line in (Path(__file__).parent / "data" / "kafka-4.4-broker-keys.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)


def _every_key_file(tmp_path, keys=KAFKA_BROKER_KEYS):
    lines = ["# every broker key of Kafka's reference, as a Kafka operator's file would have it"]
    for key in sorted(keys):
        if key in ("listeners", "log.dirs", "log.dir"):
            continue  # the test's own, below
        lines.append(f"{key}={OURS.get(key, 'a-kafka-value')}")
    lines += ["listeners=PLAINTEXT://127.0.0.1:0", "log.dirs="]
    path = tmp_path / "server.properties"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_list_is_kafkas():
    assert len(KAFKA_BROKER_KEYS) > 300
    assert {"transaction.state.log.replication.factor", "process.roles", "remote.log.storage.system.enable",
            "num.network.threads", "offsets.topic.replication.factor"} <= KAFKA_BROKER_KEYS


def test_every_kafka_broker_key_loads_from_server_properties(tmp_path, caplog):
    path = _every_key_file(tmp_path)
    with caplog.at_level(logging.INFO, logger="trikafka.config"):
        config = BrokerConfig.from_properties(path)
    said = [r.getMessage() for r in caplog.records if r.name == "trikafka.config"]
    ignored = sorted(k for k in KAFKA_BROKER_KEYS - set(OURS) if k not in ("listeners", "log.dirs", "log.dir"))
    assert ignored and "transaction.state.log.replication.factor" in ignored
    for key in ignored:
        lines = [m for m in said if m.startswith(f"{key}=")]
        assert len(lines) == 1 and "no effect here (" in lines[0], (key, lines)
    assert len(said) == len(ignored)  # nothing said about a key trikafka honours
    assert config.as_properties()["listeners"] == "PLAINTEXT://127.0.0.1:0"


def test_every_key_of_kafka_4_4s_broker_reference_loads(tmp_path, caplog):
    """The whole 4.4 page, not only the list trikafka keeps: a key Kafka 4.4 documents is honoured
    or accepted with its one INFO line, never refused as unknown."""
    assert len(KAFKA_44_REFERENCE) > 350
    assert {"sasl.oauthbearer.assertion.file", "transaction.two.phase.commit.enable",
            "errors.deadletterqueue.topic.name.prefix", "cordoned.log.dirs"} <= KAFKA_44_REFERENCE
    path = _every_key_file(tmp_path, KAFKA_44_REFERENCE)
    with caplog.at_level(logging.INFO, logger="trikafka.config"):
        BrokerConfig.from_properties(path)
    said = {r.getMessage().split("=", 1)[0] for r in caplog.records if r.name == "trikafka.config"}
    walked = KAFKA_44_REFERENCE - {"listeners", "log.dirs", "log.dir"}
    assert walked - set(OURS) == said & walked
    assert KAFKA_44_REFERENCE <= KAFKA_BROKER_KEYS | set(OURS)


def test_a_typo_of_a_kafka_key_is_still_refused():
    with pytest.raises(ConfigError, match="did you mean 'transaction.max.timeout.ms'"):
        BrokerConfig.from_mapping({"transaction.max.timout.ms": "1"})


def test_a_kafka_server_properties_starts_the_broker_and_says_what_has_no_effect(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@localhost:9093\n"
        "transaction.state.log.replication.factor=3\nremote.log.storage.system.enable=false\n"
        "num.partitions=2\n"
    )
    broker = BrokerProcess("--config", str(path), "--in-memory", cwd=tmp_path)
    try:
        broker.wait_ready()
        assert "tiered (remote) storage" in broker.wait_for_output("remote.log.storage.system.enable=false")
        said = broker.wait_for_output("transaction.state.log.replication.factor=3")
        assert "a Kafka broker key with no effect here (internal topics" in said
        assert "KRaft metadata quorum" in broker.wait_for_output("process.roles=")
        assert "num.partitions=2: a Kafka broker key" not in broker.output  # honoured
    finally:
        broker.stop(15)
