"""trikafka.testing.KafkaContainer, testcontainers-python's Kafka container with no Docker:
a suite written for testcontainers runs with one import line changed, the methods it claims
have testcontainers' signatures, and what needs Docker is refused by name."""

from __future__ import annotations

import inspect
import logging
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from trikafka.testing import KafkaContainer

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # testcontainers.kafka → .community.kafka
    from testcontainers.kafka import KafkaContainer as DockerKafkaContainer

ROOT = Path(__file__).resolve().parents[2]
SUITE = Path(__file__).with_name("testcontainers_kafka_suite.py")
DOCKER_IMPORT = "from testcontainers.kafka import KafkaContainer\n"
TRIKAFKA_IMPORT = "from trikafka.testing import KafkaContainer\n"

#: Every method KafkaContainer claims to give as testcontainers does.
CLAIMED = [
    "__init__", "start", "stop", "__enter__", "__exit__", "get_bootstrap_server", "with_kraft",
    "with_cluster_id", "with_env", "with_envs", "with_bind_ports", "with_exposed_ports", "with_name",
    "get_container_host_ip", "get_exposed_port", "get_container_id", "get_logs", "reload",
    "maybe_emulate_amd64",
]  # fmt: skip
#: What needs Docker: refused, with what to do instead.
REFUSED = [
    "exec", "get_wrapped_container", "get_docker_client", "with_command", "with_volume_mapping",
    "with_tmpfs_mount", "with_network", "with_network_aliases", "with_kwargs", "with_copy_into_container",
    "copy_into_container", "copy_from_container", "create_file", "waiting_for", "wait",
]  # fmt: skip


def test_a_testcontainers_suite_passes_with_only_its_import_changed(tmp_path):
    original = SUITE.read_text()
    assert original.count(DOCKER_IMPORT) == 1
    swapped = original.replace(DOCKER_IMPORT, TRIKAFKA_IMPORT)
    changed = [(a, b) for a, b in zip(original.splitlines(), swapped.splitlines(), strict=True) if a != b]
    assert changed == [(DOCKER_IMPORT.strip(), TRIKAFKA_IMPORT.strip())]
    (tmp_path / "test_kafka_suite.py").write_text(swapped)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_kafka_suite.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout, done.stdout


@pytest.mark.parametrize("method", CLAIMED)
def test_claimed_methods_have_testcontainers_signatures(method):
    def shape(cls: type) -> list[tuple[str, object, object]]:
        params = inspect.signature(getattr(cls, method)).parameters.values()
        return [(p.name, p.kind, p.default) for p in params]

    assert shape(KafkaContainer) == shape(DockerKafkaContainer)


@pytest.mark.parametrize("method", REFUSED)
def test_what_needs_docker_is_refused_by_name(method):
    assert hasattr(DockerKafkaContainer, method)
    with pytest.raises(NotImplementedError, match=rf"KafkaContainer\.{method}: there is no Docker container here; "):
        getattr(KafkaContainer(), method)("x")


def test_docker_options_and_other_protocols_are_refused():
    with pytest.raises(NotImplementedError, match=r"KafkaContainer\(volumes=\.\.\.\)"):
        KafkaContainer(volumes=[("/tmp", "/data", "rw")])
    with pytest.raises(NotImplementedError, match="security_protocol='SASL_PLAINTEXT'"):
        KafkaContainer(security_protocol="SASL_PLAINTEXT")
    with pytest.raises(NotImplementedError, match="one port, the Kafka port 9093"):
        KafkaContainer().with_bind_ports(8080, 8080)


def test_env_variables_map_to_broker_keys_or_are_refused(caplog):
    kafka = KafkaContainer().with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "false").with_env("KAFKA_NODE_ID", 7)
    with pytest.raises(ValueError, match=r"'KAFKA_NO_SUCH_THING'.*'no\.such\.thing' is not a broker key"):
        kafka.with_env("KAFKA_NO_SUCH_THING", "1")
    with pytest.raises(ValueError, match=r"'TZ'.*not a Kafka setting"):
        kafka.with_env("TZ", "UTC")
    with pytest.raises(ValueError, match="choose that port with port= or with_bind_ports"):
        kafka.with_env("KAFKA_ADVERTISED_LISTENERS", "PLAINTEXT://example:9092")
    with caplog.at_level(logging.INFO, "trikafka.testing.container"):
        kafka.with_env("KAFKA_HEAP_OPTS", "-Xmx256m")
    assert "KAFKA_HEAP_OPTS=-Xmx256m: a setting of the Kafka JVM, with no effect" in caplog.text
    with kafka:
        config = kafka.broker.thread.call(lambda: kafka.broker.broker.config)
        assert (config.auto_create_topics_enable, config.node_id, config.offsets_topic_num_partitions) == (False, 7, 1)


def test_bind_ports_cluster_id_and_name():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    kafka = KafkaContainer().with_bind_ports(9093, free).with_cluster_id("fixed-cluster").with_name("orders")
    assert kafka.status == "not_started"
    with kafka:
        assert kafka.status == "running"
        assert kafka.get_bootstrap_server() == f"127.0.0.1:{free}"
        assert kafka.get_container_id() == "trikafka-orders"
        admin = AdminClient({"bootstrap.servers": kafka.get_bootstrap_server()})
        assert admin.describe_cluster().result(30).cluster_id == "fixed-cluster"
    assert kafka.status == "exited"
    kafka.stop()  # a second stop does nothing, as testcontainers'


def test_get_logs_returns_the_brokers_own_lines(caplog):
    with caplog.at_level(logging.INFO, "trikafka"), KafkaContainer() as kafka:
        stdout, stderr = kafka.get_logs()
    assert stderr == b""
    assert kafka.wait_for.search(stdout.decode())  # testcontainers' "[KafkaServer id=1] started"
    assert b"trikafka.broker" in stdout
    with pytest.raises(RuntimeError, match="not started"):
        kafka.get_logs()


def test_constructor_env_and_a_second_start_after_stop():
    kafka = KafkaContainer(env={"KAFKA_NUM_PARTITIONS": "2"}, name="twice")
    assert kafka.env["KAFKA_NUM_PARTITIONS"] == "2" and kafka.env["KAFKA_BROKER_ID"] == "1"
    with pytest.raises(ValueError, match="'KAFKA_NOPE'"):
        KafkaContainer(env={"KAFKA_NOPE": "1"})
    assert kafka.start() is kafka
    with pytest.raises(RuntimeError, match="running already"):
        kafka.start()
    first = kafka.get_bootstrap_server()
    kafka.stop()
    with kafka:  # a new broker, as a new container would be
        assert kafka.broker.thread.call(lambda: kafka.broker.broker.config.num_partitions) == 2
        assert kafka.status == "running" and first.startswith("127.0.0.1:")
