"""Certificates (fresh from ``trustme``) and a broker *process* with TLS listeners, for the Trio
client's and the commands' TLS tests.

The broker serves ``SSL`` with ``ssl.client.auth=requested`` (a client certificate makes the
principal its subject; without one the client is ``User:ANONYMOUS``), ``SASL_SSL`` with
SCRAM-SHA-512 for ``alice`` and, for the test's own administration, ``SASL_PLAINTEXT`` with
PLAIN for the super user ``admin``. With ``acls`` the StandardAuthorizer is on and nothing is
allowed that no ACL allows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trustme
from cryptography import x509

from trikafka.testing.process import BrokerProcess

__all__ = ["certificates", "principal_of", "tls_broker"]


def certificates(directory: Path) -> dict[str, Path]:
    """PEM files: ``ca``, ``broker`` (key and chain), ``client`` + ``client_key`` (mutual TLS)
    and ``other_ca`` (a CA that signed nothing here: the wrong trust)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="trikafka client tests")
    files = {name: directory / f"{name}.pem" for name in ("ca", "broker", "client", "client_key", "other_ca")}
    ca.cert_pem.write_to_path(files["ca"])
    ca.issue_cert("127.0.0.1", "localhost", common_name="broker").private_key_and_cert_chain_pem.write_to_path(
        files["broker"]
    )
    client = ca.issue_cert("alice@example.org", common_name="alice", organization_unit_name="eng")
    client.cert_chain_pems[0].write_to_path(files["client"])
    client.private_key_pem.write_to_path(files["client_key"])
    trustme.CA(organization_name="somebody else").cert_pem.write_to_path(files["other_ca"])
    return files


def principal_of(certificate: Path) -> str:
    """``User:<RFC 2253 subject>``: the principal Kafka's default builder makes of it."""
    return "User:" + x509.load_pem_x509_certificate(certificate.read_bytes()).subject.rfc4514_string()


def _properties(certs: dict[str, Path], acls: bool) -> str:
    lines = [
        "listeners=SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map=SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={certs['broker']}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={certs['ca']}",
        "listener.name.ssl.ssl.client.auth=requested",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required user_alice=\"alice-secret\";",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config="
        "org.apache.kafka.common.security.plain.PlainLoginModule required user_admin=\"admin-secret\";",
    ]
    if acls:
        lines += [
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin",
            "allow.everyone.if.no.acl.found=false",
        ]
    return "\n".join(lines) + "\n"


@contextmanager
def tls_broker(directory: Path, *, acls: bool = False) -> Iterator[tuple[BrokerProcess, dict[str, Path]]]:
    """A ready broker process with the listeners above, and its certificates; stopped after."""
    certs = certificates(directory / "certs")
    (directory / "server.properties").write_text(_properties(certs, acls))
    broker = BrokerProcess(
        "--in-memory", "--config", "server.properties",
        "--listeners", "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--override", "advertised.listeners=",
        cwd=directory,
    )
    try:
        broker.wait_ready()
        yield broker, certs
    finally:
        code = broker.stop()
    assert code == 0, broker.output
