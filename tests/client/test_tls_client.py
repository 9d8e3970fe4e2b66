"""The Trio client over TLS, real sockets, a broker process (tests/client/tls_kit.py).

SASL_SSL with SCRAM-SHA-512 and SSL with a client certificate carry a producer and a consumer
end to end; the certificate's subject is the principal the broker authorizes (only that
principal has an ACL on the mutual-TLS topic). A CA that did not sign the broker's certificate
is one non-retriable SslAuthenticationError naming the broker, and bad ssl.* settings are
ConfigErrors naming the key before anything connects.
"""

from __future__ import annotations

import pytest
import trio

from tests.client.tls_kit import principal_of, tls_broker
from trikafka.client import TopicPartition, open_admin, open_producer
from trikafka.client.consumer import open_consumer
from trikafka.client.errors import KafkaError
from trikafka.errors import ConfigError

TIMEOUT = 60
MTLS_TOPIC = "mtls-only"


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory):
    with tls_broker(tmp_path_factory.mktemp("tls"), acls=True) as (broker, certs):
        _grant(broker, principal_of(certs["client"]))
        yield broker, certs


def _grant(broker, mtls_principal: str) -> None:
    """alice (SCRAM) may use topics ``tls-*``; only the certificate's subject may use
    ``mtls-only``; both may read group ``tls``. Granted by the super user over SASL_PLAINTEXT."""
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
    allow = AclPermissionType.ALLOW
    bindings = [
        AclBinding(
            ResourceType.TOPIC, "tls-", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.ALL, allow
        ),
        AclBinding(
            ResourceType.TOPIC, MTLS_TOPIC, ResourcePatternType.LITERAL, mtls_principal, "*", AclOperation.ALL, allow
        ),
    ] + [
        AclBinding(ResourceType.GROUP, "tls", ResourcePatternType.LITERAL, who, "*", AclOperation.READ, allow)
        for who in ("User:alice", mtls_principal)
    ]
    for future in admin.create_acls(bindings, request_timeout=TIMEOUT).values():
        future.result(timeout=TIMEOUT)


def _address(broker, listener: str) -> str:
    host, port = broker.endpoints[listener]
    return f"{host}:{port}"


def _scram(certs) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(certs["ca"]),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
        'password="alice-secret";',
    }


def _mtls(certs) -> dict[str, str]:
    return {
        "security.protocol": "SSL", "ssl.ca.location": str(certs["ca"]),
        "ssl.certificate.location": str(certs["client"]), "ssl.key.location": str(certs["client_key"]),
    }


async def _roundtrip(bootstrap: str, config: dict[str, str], topic: str) -> list[bytes]:
    async with open_producer(bootstrap, **config) as producer:
        await producer.send(topic, b"over tls")
    async with open_consumer(bootstrap, **config, group_id="tls", enable_auto_commit=False) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        while not got:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(r.value for r in records)
        await consumer.commit({tp: 1})
        return got


async def test_sasl_ssl_with_scram_sha_512(secure):
    broker, certs = secure
    with trio.fail_after(TIMEOUT):
        assert await _roundtrip(_address(broker, "SASL_SSL"), _scram(certs), "tls-scram") == [b"over tls"]


async def test_mutual_tls_principal_is_the_certificate_subject(secure):
    """Only the certificate's subject has an ACL on ``mtls-only``: the produce and the fetch
    succeed, so the broker authorized that principal; alice (SCRAM) is refused the topic."""
    broker, certs = secure
    with trio.fail_after(TIMEOUT):
        assert await _roundtrip(_address(broker, "SSL"), _mtls(certs), MTLS_TOPIC) == [b"over tls"]
        async with open_producer(
            _address(broker, "SASL_SSL"),
            **_scram(certs),
            request_timeout_ms=5000,
            delivery_timeout_ms=10005,
            max_block_ms=5000,
        ) as producer:
            with pytest.raises(KafkaError, match="TOPIC_AUTHORIZATION_FAILED"):
                await producer.send(MTLS_TOPIC, b"not alice's")


async def test_without_a_client_certificate_the_ssl_client_is_anonymous(secure):
    broker, certs = secure
    with trio.fail_after(TIMEOUT):
        async with open_admin(
            _address(broker, "SSL"), security_protocol="SSL", ssl_ca_location=str(certs["ca"])
        ) as admin:
            assert await admin.list_topics() == {}  # User:ANONYMOUS may describe nothing


async def test_a_wrong_ca_is_one_clear_error_naming_the_broker(secure):
    broker, certs = secure
    bootstrap = _address(broker, "SSL")
    with trio.fail_after(TIMEOUT):
        async with open_admin(bootstrap, security_protocol="SSL", ssl_ca_location=str(certs["other_ca"])) as admin:
            with pytest.raises(KafkaError) as caught:
                await admin.list_topics()
    assert not caught.value.retriable
    assert f"SSL handshake with {bootstrap} failed: certificate verify failed" in str(caught.value)


async def test_verification_off_accepts_a_certificate_of_an_unknown_ca(secure):
    """enable.ssl.certificate.verification=false (librdkafka's key): testing only, but it must
    do what it says."""
    broker, certs = secure
    with trio.fail_after(TIMEOUT):
        async with open_admin(_address(broker, "SSL"), security_protocol="SSL", ssl_ca_location=str(certs["other_ca"]),
                              enable_ssl_certificate_verification="false") as admin:
            assert await admin.list_topics() == {}


async def test_plaintext_client_settings_on_a_tls_port_fail_fast(secure):
    """SSL client to the plaintext SASL port: the handshake fails, the broker is named."""
    broker, certs = secure
    bootstrap = _address(broker, "SASL_PLAINTEXT")
    with trio.fail_after(TIMEOUT):
        async with open_admin(bootstrap, security_protocol="SSL", ssl_ca_location=str(certs["ca"])) as admin:
            with pytest.raises(KafkaError, match=f"SSL handshake with {bootstrap} failed"):
                await admin.list_topics()


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location"),
        ({"ssl.key.location": "/nonexistent/key.pem"}, "ssl.key.location"),
        ({"ssl.certificate.location": "/nonexistent/client.pem"}, "ssl.certificate.location"),
        ({"ssl.endpoint.identification.algorithm": "sha1"}, "ssl.endpoint.identification.algorithm"),
        ({"enable.ssl.certificate.verification": "maybe"}, "enable.ssl.certificate.verification"),
    ],
)
def test_bad_ssl_settings_name_the_key(settings, key):
    from trikafka.client import ClientConfig

    with pytest.raises(ConfigError) as caught:
        ClientConfig.for_role("admin", {"security.protocol": "SSL", **settings})
    assert key in str(caught.value)


def test_a_key_that_does_not_match_its_certificate_names_the_key(tmp_path):
    from tests.client.tls_kit import certificates
    from trikafka.client import ClientConfig

    certs = certificates(tmp_path)
    with pytest.raises(ConfigError, match="ssl.key.location"):
        ClientConfig.for_role("admin", {"security.protocol": "SSL", "ssl.certificate.location": str(certs["client"]),
                                        "ssl.key.location": str(certs["other_ca"])})
