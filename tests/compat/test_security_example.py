"""``python -m trikafka --config examples/secure/server.properties`` serves what it says.

The example's own ``make_certs.py`` makes the certificates in a temporary directory; the
broker process (this worktree's trikafka: ``BrokerProcess`` puts it first on PYTHONPATH)
runs the example file unchanged except for ports (0) and advertised listeners (the bound
ones). The example's ACLs are on: ``admin`` (its super user) lets every principal use the
topics starting ``example-`` and the group ``example``. confluent-kafka then produces and
consumes over SASL_SSL with SCRAM-SHA-512 and over mutual TLS, is refused a topic outside
the ACLs, and a plaintext client is not served on the TLS port.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trikafka.testing.process import BrokerProcess

from .support import TIMEOUT

pytestmark = pytest.mark.compat

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "secure"


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("secure")
    for name in ("server.properties", "make_certs.py"):
        shutil.copy(EXAMPLE / name, directory / name)
    subprocess.run([sys.executable, "make_certs.py"], cwd=directory, check=True, timeout=TIMEOUT)
    broker = BrokerProcess(
        "--in-memory", "--config", "server.properties",
        "--listeners", "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--override", "advertised.listeners=",
        cwd=directory,
    )
    try:
        broker.wait_ready()
        _grant_example_acls(broker)
        yield broker, directory
    finally:
        code = broker.stop()
    assert code == 0, broker.output


def _grant_example_acls(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    host, port = broker.endpoints["SASL_PLAINTEXT"]
    admin = AdminClient({"bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})
    bindings = [
        AclBinding(ResourceType.TOPIC, "example-", ResourcePatternType.PREFIXED, "User:*", "*",
                   AclOperation.ALL, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "example", ResourcePatternType.LITERAL, "User:*", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
    ]
    for future in admin.create_acls(bindings, request_timeout=TIMEOUT).values():
        future.result(timeout=TIMEOUT)


def _roundtrip(config: dict[str, str], topic: str) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    errors: list[object] = []
    producer = Producer({**config, "message.timeout.ms": 15000, "error_cb": errors.append})
    producer.produce(topic, b"secret-record")
    assert producer.flush(TIMEOUT) == 0, errors
    consumer = Consumer({**config, "group.id": "example", "error_cb": errors.append})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        for _ in range(40):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return [message.value()]
        raise AssertionError(f"nothing consumed; errors: {errors}")
    finally:
        consumer.close()


def test_sasl_ssl_with_scram(secure_broker):
    broker, directory = secure_broker
    host, port = broker.endpoints["SASL_SSL"]
    config = {
        "bootstrap.servers": f"{host}:{port}",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(directory / "certs" / "ca.pem"),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    assert _roundtrip(config, "example-scram") == [b"secret-record"]


def test_mutual_tls(secure_broker):
    broker, directory = secure_broker
    host, port = broker.endpoints["SSL"]
    certs = directory / "certs"
    config = {
        "bootstrap.servers": f"{host}:{port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs / "ca.pem"),
        "ssl.certificate.location": str(certs / "client.pem"),
        "ssl.key.location": str(certs / "client-key.pem"),
    }
    assert _roundtrip(config, "example-mtls") == [b"secret-record"]


def test_a_topic_outside_the_acls_is_refused(secure_broker):
    from confluent_kafka import KafkaError, Producer

    broker, directory = secure_broker
    host, port = broker.endpoints["SASL_SSL"]
    reports: list[object] = []
    producer = Producer({
        "bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(directory / "certs" / "ca.pem"), "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": "alice-secret", "message.timeout.ms": 15000,
    })
    producer.produce("private", b"x", on_delivery=lambda error, _message: reports.append(error))
    producer.flush(TIMEOUT)
    assert reports and reports[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, reports
