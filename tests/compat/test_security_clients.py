"""Real clients over TLS and SASL: confluent-kafka, kafka-python, aiokafka, kcat and kafkajs
each produce and consume through an SSL, a SASL_PLAINTEXT and a SASL_SSL listener, and get
the right error for a wrong password; confluent-kafka also over mutual TLS.

One broker serves every listener (on a thread of this process, real sockets on 127.0.0.1);
certificates are made fresh by ``trustme``. Each case uses its own topic. Every wait is
bounded by the clients' own timeouts or a subprocess timeout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from trikafka.testing import ThreadedBroker

from .support import KCAT, NODE, TIMEOUT

pytestmark = [
    pytest.mark.compat,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

COUNT = 5
KAFKAJS_SECURE = Path(__file__).parent / "kafkajs" / "secure.js"
USERS = {"alice": "alice-secret", "admin": "admin-secret"}
JAAS_PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
JAAS_SCRAM = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)


@dataclass(frozen=True)
class Security:
    """How a client connects: the protocol and what it needs for it."""

    protocol: str
    ca: str | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    cert: str | None = None  # mutual TLS
    key: str | None = None


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    ca = trustme.CA(organization_name="trikafka compat")
    directory = tmp_path_factory.mktemp("certs")
    server = ca.issue_cert("127.0.0.1", "localhost", common_name="broker")
    client = ca.issue_cert("alice@example.org", common_name="alice")
    paths = {name: str(directory / f"{name}.pem") for name in ("keystore", "ca", "cert", "key")}
    server.private_key_and_cert_chain_pem.write_to_path(paths["keystore"])
    ca.cert_pem.write_to_path(paths["ca"])
    client.cert_chain_pems[0].write_to_path(paths["cert"])
    client.private_key_pem.write_to_path(paths["key"])
    return paths


@pytest.fixture(scope="module")
def broker(certificates: dict[str, str]) -> Iterator[ThreadedBroker]:
    listeners = ["SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL"]
    config = {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in listeners),
        "listener.security.protocol.map": (
            "SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certificates["keystore"],
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": certificates["ca"],
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        config[f"listener.name.{listener}.plain.sasl.jaas.config"] = JAAS_PLAIN
        for mechanism in ("scram-sha-256", "scram-sha-512"):
            config[f"listener.name.{listener}.{mechanism}.sasl.jaas.config"] = JAAS_SCRAM
    with ThreadedBroker(config) as handle:
        yield handle


def bootstrap(broker: ThreadedBroker, listener: str) -> str:
    endpoint = broker.broker.endpoints[listener]
    return f"127.0.0.1:{endpoint.port}"


def new_topic() -> str:
    return f"secure-{uuid.uuid4().hex[:10]}"


# -- the clients ------------------------------------------------------------------------------


def confluent_roundtrip(servers: str, topic: str, security: Security) -> list[str]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

    config = {"bootstrap.servers": servers, "security.protocol": security.protocol}
    if security.ca:
        config["ssl.ca.location"] = security.ca
    if security.cert:
        config.update({"ssl.certificate.location": security.cert, "ssl.key.location": security.key})
    if security.mechanism:
        config.update({"sasl.mechanism": security.mechanism, "sasl.username": security.username,
                       "sasl.password": security.password})
    errors: list[object] = []
    producer = Producer({**config, "message.timeout.ms": 15000, "error_cb": errors.append})
    for i in range(COUNT):
        producer.produce(topic, f"confluent-{i}".encode())
    remaining = producer.flush(TIMEOUT)
    if remaining or errors:
        raise KafkaException(errors[0] if errors else f"{remaining} records not delivered")
    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False,
                         "error_cb": errors.append})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[str] = []
        for _ in range(40):
            if len(values) >= COUNT or errors:
                break
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
        if errors:
            raise KafkaException(errors[0])
        return values
    finally:
        consumer.close()


def kafka_python_config(servers: str, security: Security) -> dict[str, object]:
    config: dict[str, object] = {"bootstrap_servers": servers, "security_protocol": security.protocol,
                                 "request_timeout_ms": 15000}
    if security.ca:
        config["ssl_cafile"] = security.ca
    if security.mechanism:
        config.update({"sasl_mechanism": security.mechanism, "sasl_plain_username": security.username,
                       "sasl_plain_password": security.password})
    return config


def kafka_python_roundtrip(servers: str, topic: str, security: Security) -> list[str]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    config = kafka_python_config(servers, security)
    producer = KafkaProducer(**config)
    try:
        for i in range(COUNT):
            producer.send(topic, f"kafka-python-{i}".encode()).get(timeout=TIMEOUT)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(**config, consumer_timeout_ms=10000)
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        values = []
        for message in consumer:
            values.append(message.value.decode())
            if len(values) >= COUNT:
                break
        return values
    finally:
        consumer.close()


def aiokafka_roundtrip(servers: str, topic: str, security: Security) -> list[str]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    config: dict[str, object] = {"bootstrap_servers": servers, "security_protocol": security.protocol,
                                 "request_timeout_ms": 15000}
    if security.ca:
        config["ssl_context"] = create_ssl_context(cafile=security.ca)
    if security.mechanism:
        config.update({"sasl_mechanism": security.mechanism, "sasl_plain_username": security.username,
                       "sasl_plain_password": security.password})

    async def run() -> list[str]:
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            for i in range(COUNT):
                await producer.send_and_wait(topic, f"aiokafka-{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**config)
        await consumer.start()
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            values: list[str] = []
            while len(values) < COUNT:
                message = await asyncio.wait_for(consumer.getone(), TIMEOUT)
                values.append(message.value.decode())
            return values
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(run(), 2 * TIMEOUT))


def kcat_options(servers: str, security: Security) -> list[str]:
    options = ["-b", servers, "-X", f"security.protocol={security.protocol}"]
    if security.ca:
        options += ["-X", f"ssl.ca.location={security.ca}"]
    if security.mechanism:
        options += ["-X", f"sasl.mechanism={security.mechanism}", "-X", f"sasl.username={security.username}",
                    "-X", f"sasl.password={security.password}"]
    return options


class ClientError(Exception):
    pass


def kcat_roundtrip(servers: str, topic: str, security: Security) -> list[str]:
    options = kcat_options(servers, security)
    lines = "".join(f"kcat-{i}\n" for i in range(COUNT)).encode()
    produced = subprocess.run([KCAT, *options, "-P", "-t", topic, "-X", "message.timeout.ms=15000"],
                              input=lines, capture_output=True, timeout=TIMEOUT)
    if produced.returncode != 0 or b"ERROR" in produced.stderr:
        raise ClientError(produced.stderr.decode())
    consumed = subprocess.run([KCAT, *options, "-C", "-t", topic, "-o", "beginning", "-c", str(COUNT), "-e"],
                              capture_output=True, timeout=TIMEOUT)
    if consumed.returncode != 0:
        raise ClientError(consumed.stderr.decode())
    return consumed.stdout.decode().split()


def kafkajs_roundtrip(servers: str, topic: str, security: Security) -> list[str]:
    args = [NODE, str(KAFKAJS_SECURE), "--bootstrap", servers, "--topic", topic, "--count", str(COUNT)]
    if security.ca:
        args += ["--ca", security.ca]
    if security.mechanism:
        args += ["--mechanism", security.mechanism.lower(), "--username", security.username,
                 "--password", security.password]
    done = subprocess.run(args, capture_output=True, timeout=2 * TIMEOUT, cwd=KAFKAJS_SECURE.parent)
    result = json.loads(done.stdout.decode().strip().splitlines()[-1])
    if not result["ok"]:
        raise ClientError(json.dumps(result["error"]))
    return result["values"]


CLIENTS = {
    "confluent-kafka": confluent_roundtrip,
    "kafka-python": kafka_python_roundtrip,
    "aiokafka": aiokafka_roundtrip,
    "kcat": kcat_roundtrip,
    "kafkajs": kafkajs_roundtrip,
}
PREFIX = {"confluent-kafka": "confluent", "kafka-python": "kafka-python", "aiokafka": "aiokafka",
          "kcat": "kcat", "kafkajs": "kafkajs"}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_produce_and_consume_over_tls(client, broker, certificates):
    security = Security("SSL", ca=certificates["ca"])
    values = CLIENTS[client](bootstrap(broker, "SSL"), new_topic(), security)
    assert values == [f"{PREFIX[client]}-{i}" for i in range(COUNT)]


def test_confluent_kafka_over_mutual_tls(broker, certificates):
    security = Security("SSL", ca=certificates["ca"], cert=certificates["cert"], key=certificates["key"])
    values = confluent_roundtrip(bootstrap(broker, "MTLS"), new_topic(), security)
    assert values == [f"confluent-{i}" for i in range(COUNT)]


def test_confluent_kafka_without_a_client_certificate_is_refused_on_mutual_tls(broker, certificates):
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException):
        confluent_roundtrip(bootstrap(broker, "MTLS"), new_topic(), Security("SSL", ca=certificates["ca"]))


SASL_CASES = [
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SASL_SSL", "SCRAM-SHA-256"),
]


def sasl_security(protocol: str, mechanism: str, certificates: dict[str, str], password: str) -> Security:
    ca = certificates["ca"] if protocol == "SASL_SSL" else None
    return Security(protocol, ca=ca, mechanism=mechanism, username="alice", password=password)


@pytest.mark.parametrize(("protocol", "mechanism"), SASL_CASES)
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_produce_and_consume_over_sasl(client, protocol, mechanism, broker, certificates):
    security = sasl_security(protocol, mechanism, certificates, USERS["alice"])
    values = CLIENTS[client](bootstrap(broker, protocol), new_topic(), security)
    assert values == [f"{PREFIX[client]}-{i}" for i in range(COUNT)]


def _wrong_password_error(client: str, servers: str, security: Security, caplog) -> str:
    """What the client reports when its password is wrong (it must fail)."""
    if client == "kcat":
        options = kcat_options(servers, security)
        done = subprocess.run([KCAT, *options, "-L", "-m", "10"], capture_output=True, timeout=TIMEOUT)
        assert done.returncode != 0
        return done.stderr.decode()
    if client == "confluent-kafka":
        from confluent_kafka import KafkaError, Producer

        errors: list[KafkaError] = []
        config = {"bootstrap.servers": servers, "security.protocol": security.protocol,
                  "sasl.mechanism": security.mechanism, "sasl.username": security.username,
                  "sasl.password": security.password, "error_cb": errors.append}
        if security.ca:
            config["ssl.ca.location"] = security.ca
        producer = Producer(config)
        for _ in range(40):  # librdkafka reports the failure through error_cb, on poll
            if errors:
                break
            producer.poll(0.25)
        assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
        return str(errors[0])
    if client == "aiokafka":  # its producer reports only "Unable to bootstrap": ask a connection
        from aiokafka.conn import create_conn
        from aiokafka.helpers import create_ssl_context

        host, port = servers.split(":")
        ssl_context = create_ssl_context(cafile=security.ca) if security.ca else None

        async def connect() -> None:
            conn = await create_conn(
                host, int(port), security_protocol=security.protocol, ssl_context=ssl_context,
                sasl_mechanism=security.mechanism, sasl_plain_username=security.username,
                sasl_plain_password=security.password,
            )
            conn.close()

        with pytest.raises(Exception) as info:  # noqa: PT011 - aiokafka's own error class
            asyncio.run(asyncio.wait_for(connect(), TIMEOUT))
        return f"{type(info.value).__name__}: {info.value}"
    if client == "kafka-python":  # it retries until its timeout; the reason is in its log
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        with caplog.at_level(logging.WARNING, "kafka"), pytest.raises(KafkaError):
            config = {**kafka_python_config(servers, security), "request_timeout_ms": 3000}
            KafkaProducer(**config, max_block_ms=3000).close()
        return "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("kafka"))
    with pytest.raises(Exception) as info:  # noqa: PT011 - each client has its own class
        CLIENTS[client](servers, new_topic(), security)
    return f"{type(info.value).__name__}: {info.value}"


@pytest.mark.parametrize(("protocol", "mechanism"), SASL_CASES)
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_wrong_password_is_sasl_authentication_failed(client, protocol, mechanism, broker, certificates, caplog):
    security = sasl_security(protocol, mechanism, certificates, "not-the-password")
    report = _wrong_password_error(client, bootstrap(broker, protocol), security, caplog)
    expected = {
        "PLAIN": "Invalid username or password",
        "SCRAM-SHA-256": "invalid credentials with SASL mechanism SCRAM-SHA-256",
        "SCRAM-SHA-512": "invalid credentials with SASL mechanism SCRAM-SHA-512",
    }[mechanism]
    lowered = report.lower()
    assert "authentication" in lowered, report
    assert expected.lower() in lowered, report
