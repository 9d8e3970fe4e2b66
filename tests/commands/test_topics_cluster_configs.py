"""``topics``, ``cluster`` and ``configs`` against a broker with records produced by confluent-kafka."""

from __future__ import annotations

from tests.commands.support import confluent_produce, trikafka


def test_topics_create_list_describe_alter_delete(kafka_broker):
    b = kafka_broker.bootstrap_servers
    run = trikafka(
        "topics",
        "create",
        "orders",
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=3600000",
        bootstrap=b,
    )
    assert run.code == 0, run
    assert run.out.strip() == "Created topic orders."
    confluent_produce(b, "orders", [(b"k", b"v%d" % i, i % 3) for i in range(10)])

    listed = trikafka("topics", "list", "--json", bootstrap=b)
    assert listed.code == 0, listed
    assert {"name": "orders", "partitions": 3, "replication_factor": 1, "internal": False} in listed.json()
    table = trikafka("topics", "list", bootstrap=b)
    assert any(line.split()[:2] == ["orders", "3"] for line in table.out.splitlines()), table

    described = trikafka("topics", "describe", "orders", "--json", bootstrap=b)
    assert described.code == 0, described
    [topic] = described.json()
    assert topic["configs"] == {"retention.ms": "3600000"}
    assert [(p["partition"], p["low_watermark"], p["high_watermark"]) for p in topic["partitions"]] == [
        (0, 0, 4),
        (1, 0, 3),
        (2, 0, 3),
    ]
    assert all(p["size_bytes"] > 0 and p["leader"] == 1 and p["isr"] == [1] for p in topic["partitions"])
    human = trikafka("topics", "describe", "orders", bootstrap=b)
    assert "Configs: retention.ms=3600000" in human.out

    altered = trikafka(
        "topics", "alter-config", "orders", "--set", "retention.ms=1000", "--set", "cleanup.policy=compact", bootstrap=b
    )
    assert altered.code == 0, altered
    assert trikafka("topics", "describe", "orders", "--json", bootstrap=b).json()[0]["configs"] == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
    }
    assert trikafka("topics", "alter-config", "orders", "--delete", "retention.ms", bootstrap=b).code == 0
    assert trikafka("topics", "describe", "orders", "--json", bootstrap=b).json()[0]["configs"] == {
        "cleanup.policy": "compact"
    }

    deleted = trikafka("topics", "delete", "orders", bootstrap=b)
    assert (deleted.code, deleted.out.strip()) == (0, "Deleted topic orders."), deleted
    assert "orders" not in [t["name"] for t in trikafka("topics", "list", "--json", bootstrap=b).json()]


def test_topics_create_takes_rpks_short_flags(kafka_broker):
    b = kafka_broker.bootstrap_servers
    run = trikafka("topics", "create", "short", "-p", "2", "-r", "1", "-c", "retention.ms=60000", bootstrap=b)
    assert run.code == 0, run
    [topic] = trikafka("topics", "describe", "short", "--json", bootstrap=b).json()
    assert (len(topic["partitions"]), topic["configs"]) == (2, {"retention.ms": "60000"})


def test_topic_errors_are_one_line_and_exit_1(kafka_broker):
    b = kafka_broker.bootstrap_servers
    for args in (("topics", "describe", "missing"), ("topics", "delete", "missing"), ("consume", "missing", "-e")):
        run = trikafka(*args, bootstrap=b)
        assert run.code == 1, run
        assert run.err == "trikafka: UNKNOWN_TOPIC_OR_PARTITION: topic 'missing' does not exist\n", run
        assert run.out == ""
    assert trikafka("topics", "create", "twice", bootstrap=b).code == 0
    again = trikafka("topics", "create", "twice", bootstrap=b)
    assert again.code == 1 and again.err.startswith("trikafka: TOPIC_ALREADY_EXISTS"), again
    assert len(again.err.splitlines()) == 1
    bad = trikafka("topics", "create", "bad", "--config", "retention.ms=soon", bootstrap=b)
    assert bad.code == 1 and "INVALID_CONFIG" in bad.err and len(bad.err.splitlines()) == 1, bad


def test_cluster_shows_brokers_controller_and_cluster_id(kafka_broker):
    b = kafka_broker.bootstrap_servers
    confluent_produce(b, "seen", [(None, b"x", None)])
    run = trikafka("cluster", "--json", bootstrap=b)
    assert run.code == 0, run
    info = run.json()
    host, port = b.rsplit(":", 1)
    assert info["controller"] == 1 and info["cluster_id"]
    assert info["brokers"] == [
        {"node_id": 1, "host": host, "port": int(port), "rack": None, "leaders": info["partitions"]}
    ]
    assert info["topics"] >= 1
    human = trikafka("cluster", bootstrap=b)
    assert f"Cluster: {info['cluster_id']}  Controller: 1" in human.out and "controller" in human.out.splitlines()[-1]


def test_configs_describe_and_alter_a_topic_and_a_broker(kafka_broker):
    b = kafka_broker.bootstrap_servers
    assert trikafka("topics", "create", "cfg", "--partitions", "1", bootstrap=b).code == 0
    assert trikafka("configs", "describe", "topic", "cfg", "--json", bootstrap=b).json() == []
    run = trikafka("configs", "alter", "topic", "cfg", "--set", "max.message.bytes=2048", bootstrap=b)
    assert (run.code, run.out.strip()) == (0, "Altered the configuration of topic cfg."), run
    [entry] = trikafka("configs", "describe", "topic", "cfg", "--json", bootstrap=b).json()
    assert entry == {
        "name": "max.message.bytes",
        "value": "2048",
        "source": "DYNAMIC_TOPIC_CONFIG",
        "read_only": False,
        "sensitive": False,
    }
    every = trikafka("configs", "describe", "topic", "cfg", "--all", "--json", bootstrap=b).json()
    assert {"retention.ms", "cleanup.policy", "max.message.bytes"} <= {e["name"] for e in every}
    broker = trikafka("configs", "describe", "broker", "1", "--all", "--json", bootstrap=b)
    assert broker.code == 0 and "num.io.threads" in {e["name"] for e in broker.json()}, broker
    unknown = trikafka("configs", "alter", "topic", "cfg", "--set", "no.such.key=1", bootstrap=b)
    assert unknown.code == 1 and "INVALID_CONFIG" in unknown.err, unknown
