"""Commands on TLS listeners (a broker process, tests/client/tls_kit.py): librdkafka's ssl.* keys
as ``-X`` reach SSL and SASL_SSL; a wrong CA or a plaintext port is one line and exit 1."""

from __future__ import annotations

import pytest

from tests.client.tls_kit import tls_broker
from tests.commands.support import trikafka


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory):
    with tls_broker(tmp_path_factory.mktemp("tls-commands")) as (broker, certs):
        yield broker, certs


def _address(broker, listener: str) -> str:
    host, port = broker.endpoints[listener]
    return f"{host}:{port}"


def test_topics_list_over_ssl(secure):
    broker, certs = secure
    ssl = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={certs['ca']}"]
    created = trikafka("topics", "create", "over-tls", "--partitions", "2", *ssl, bootstrap=_address(broker, "SSL"))
    assert created.code == 0, created
    listed = trikafka("topics", "list", *ssl, bootstrap=_address(broker, "SSL"))
    assert listed.code == 0 and "over-tls" in listed.out, listed


def test_produce_and_consume_over_sasl_ssl_and_mutual_tls(secure):
    broker, certs = secure
    sasl_ssl = [
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        f"ssl.ca.location={certs['ca']}",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-512",
        "-X",
        "sasl.username=alice",
        "-X",
        "sasl.password=alice-secret",
    ]
    produced = trikafka("produce", "tls-records", *sasl_ssl, input="one\ntwo\n", bootstrap=_address(broker, "SASL_SSL"))
    assert produced.code == 0, produced
    mtls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={certs['ca']}",
            "-X", f"ssl.certificate.location={certs['client']}", "-X", f"ssl.key.location={certs['client_key']}"]
    consumed = trikafka("consume", "tls-records", "-e", *mtls, bootstrap=_address(broker, "SSL"))
    assert (consumed.code, consumed.out) == (0, "one\ntwo\n"), consumed


def test_a_wrong_ca_is_one_line_and_exit_1(secure):
    broker, certs = secure
    bootstrap = _address(broker, "SSL")
    run = trikafka(
        "topics",
        "list",
        "-X",
        "security.protocol=SSL",
        "-X",
        f"ssl.ca.location={certs['other_ca']}",
        bootstrap=bootstrap,
    )
    assert run.code == 1 and len(run.err.splitlines()) == 1, run
    assert f"SSL handshake with {bootstrap} failed: certificate verify failed" in run.err, run
    assert "Traceback" not in run.err


def test_ssl_to_a_plaintext_port_is_one_line_and_exit_1(secure):
    broker, certs = secure
    bootstrap = _address(broker, "SASL_PLAINTEXT")
    run = trikafka(
        "topics", "list", "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={certs['ca']}", bootstrap=bootstrap
    )
    assert run.code == 1 and len(run.err.splitlines()) == 1 and f"SSL handshake with {bootstrap} failed" in run.err, run


def test_a_missing_ca_file_is_a_usage_error_naming_the_key(secure):
    broker, _certs = secure
    run = trikafka("topics", "list", "-X", "security.protocol=SSL", "-X", "ssl.ca.location=/nonexistent/ca.pem",
                   bootstrap=_address(broker, "SSL"))
    assert run.code == 2 and "ssl.ca.location" in run.err and len(run.err.splitlines()) == 1, run
