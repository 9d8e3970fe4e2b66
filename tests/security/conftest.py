"""Certificates for the security tests, made fresh by ``trustme`` (never checked in)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme


@pytest.fixture(scope="session")
def ca() -> trustme.CA:
    return trustme.CA(organization_name="trikafka tests")


@pytest.fixture(scope="session")
def tls_files(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """PEM files: the broker's key and chain (one file, Kafka's PEM keystore), the CA, and a
    client certificate for mutual TLS."""
    directory = tmp_path_factory.mktemp("tls")
    server = ca.issue_cert("127.0.0.1", "localhost", common_name="broker")
    client = ca.issue_cert("alice@example.org", common_name="alice", organization_unit_name="eng")
    files = {
        "keystore": directory / "broker.pem",
        "ca": directory / "ca.pem",
        "client": directory / "client.pem",  # key and chain
        "client_cert": directory / "client-cert.pem",
        "client_key": directory / "client-key.pem",
    }
    server.private_key_and_cert_chain_pem.write_to_path(files["keystore"])
    ca.cert_pem.write_to_path(files["ca"])
    client.private_key_and_cert_chain_pem.write_to_path(files["client"])
    client.cert_chain_pems[0].write_to_path(files["client_cert"])
    client.private_key_pem.write_to_path(files["client_key"])
    return files


@pytest.fixture
def ssl_config(tls_files: dict[str, Path]) -> dict[str, str]:
    """Kafka keys for an SSL listener on 127.0.0.1, any port."""
    return {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls_files["keystore"]),
    }
