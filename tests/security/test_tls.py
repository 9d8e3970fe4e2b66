"""SSL listeners: real TLS over real sockets, and over the in-memory transport under MockClock
where time is the point (a stalled handshake).

Rules: a failed handshake is one log line and that connection closed; nobody else notices.
The handshake runs in the connection's own task with a deadline.
"""

from __future__ import annotations

import logging
import ssl

import pytest
import trio
import trustme

from trikafka import BrokerConfig, ConfigError
from trikafka.broker import Broker, open_broker
from trikafka.client import open_connection
from trikafka.security.config import SecurityConfig
from trikafka.security.listener import HANDSHAKE_TIMEOUT
from trikafka.security.tls import (
    openssl_cipher_name,
    principal_from_certificate,
    server_ssl_context,
)
from trikafka.testing.frames import api_versions_frame, api_versions_response, read_frames
from trikafka.testing.memory import MemoryListener

TIMEOUT = 20


def client_context(ca: trustme.CA, cert: trustme.LeafCert | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    if cert is not None:
        cert.configure_cert(ctx)
    return ctx


async def tls_connect(port: int, ctx: ssl.SSLContext) -> trio.SSLStream:
    tcp = await trio.open_tcp_stream("127.0.0.1", port)
    stream = trio.SSLStream(tcp, ctx, server_hostname="127.0.0.1")
    await stream.do_handshake()
    return stream


async def api_versions_over(stream: trio.abc.Stream, correlation_id: int = 7) -> object:
    await stream.send_all(api_versions_frame(correlation_id))
    (frame,) = await read_frames(stream, 1)
    got_id, body = api_versions_response(frame)
    assert got_id == correlation_id
    return body


def connections(broker, listener: str = "SSL") -> list:
    return [c for p in broker.path.socket_server.processors[listener] for c in p.connections.values()]


async def test_a_client_speaks_kafka_over_tls(ca, ssl_config):
    with trio.fail_after(TIMEOUT):
        async with open_broker(ssl_config) as broker:
            stream = await tls_connect(broker.port, client_context(ca))
            body = await api_versions_over(stream)
            assert body.error_code == 0
            (connection,) = connections(broker)
            assert connection.principal == "User:ANONYMOUS"  # no client certificate asked
            await stream.aclose()


async def test_plaintext_on_a_tls_port_is_refused_and_others_are_served(ca, ssl_config, caplog):
    """A client speaking plaintext Kafka (or HTTP, or noise) to the SSL port gets nothing but a
    closed connection and one log line; a TLS client at the same time is served."""
    caplog.set_level(logging.WARNING, "trikafka.network")
    with trio.fail_after(TIMEOUT):
        async with open_broker(ssl_config) as broker:
            garbage = await trio.open_tcp_stream("127.0.0.1", broker.port)
            await garbage.send_all(api_versions_frame(1))  # not a ClientHello
            good = await tls_connect(broker.port, client_context(ca))
            assert (await api_versions_over(good)).error_code == 0
            while await garbage.receive_some(1000):  # perhaps a TLS alert, then EOF
                pass
            assert (await api_versions_over(good, 8)).error_code == 0
            await good.aclose()
            await garbage.aclose()
    failed = [r for r in caplog.records if "TLS handshake failed" in r.getMessage()]
    assert len(failed) == 1, [r.getMessage() for r in caplog.records]
    assert "127.0.0.1" in failed[0].getMessage()


async def test_a_stalled_handshake_times_out_alone(ca, ssl_config, autojump_clock, caplog):
    """Over the in-memory transport under MockClock: a client that connects and says nothing
    is closed after the handshake deadline; a TLS client meanwhile is served at once."""
    caplog.set_level(logging.WARNING, "trikafka.network")
    listener = MemoryListener("memory", 9093)
    config = {**ssl_config, "listeners": "SSL://memory:9093"}
    async with open_broker(config, trio_listeners={"SSL": listener}):
        silent = await listener.connect("10.0.0.9")
        start = trio.current_time()
        raw = await listener.connect("10.0.0.1")
        good = trio.SSLStream(raw, client_context(ca), server_hostname="localhost")
        assert (await api_versions_over(good)).error_code == 0
        assert trio.current_time() - start < 1  # not held behind the silent one
        assert await silent.receive_some(100) == b""  # closed by the broker
        assert trio.current_time() - start == pytest.approx(HANDSHAKE_TIMEOUT, abs=0.5)
        assert (await api_versions_over(good, 9)).error_code == 0
    (line,) = [r.getMessage() for r in caplog.records if "TLS handshake" in r.getMessage()]
    assert "10.0.0.9" in line and f"not done within {HANDSHAKE_TIMEOUT:g} s" in line


async def test_mutual_tls_principal_is_the_certificate_subject(ca, ssl_config, tls_files):
    config = {**ssl_config, "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
              "ssl.truststore.location": str(tls_files["ca"])}
    alice = ca.issue_cert(
        "alice@example.org", common_name="alice", organization_unit_name="eng", organization_name="trikafka tests"
    )
    with trio.fail_after(TIMEOUT):
        async with open_broker(config) as broker:
            stream = await tls_connect(broker.port, client_context(ca, alice))
            assert (await api_versions_over(stream)).error_code == 0
            (connection,) = connections(broker)
            assert connection.principal == "User:CN=alice,OU=eng,O=trikafka tests"
            await stream.aclose()
            # Without a certificate the handshake fails (TLS 1.3: at the first read).
            anonymous = await tls_connect(broker.port, client_context(ca))
            with pytest.raises(trio.BrokenResourceError):
                await api_versions_over(anonymous)


async def test_the_connection_is_usable_by_the_trio_client(ca, ssl_config):
    with trio.fail_after(TIMEOUT):
        async with open_broker(ssl_config) as broker:
            stream = await tls_connect(broker.port, client_context(ca))
            async with open_connection(stream, "tls-test") as connection:
                from kio.schema.metadata.v12.request import MetadataRequest

                response = await connection.request(
                    MetadataRequest(
                        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
                    )
                )
                # Metadata answers with the listener the request came in on.
                assert [b.port for b in response.brokers] == [broker.port]


def test_an_unreadable_keystore_is_refused_at_start(ssl_config, tmp_path):
    ssl_config["ssl.keystore.location"] = str(tmp_path / "missing.pem")
    config = BrokerConfig.from_mapping(ssl_config)
    with pytest.raises(ConfigError) as info:
        Broker(config)  # before anything is bound
    assert "ssl.keystore.location" in str(info.value) and "missing.pem" in str(info.value)


def test_a_wrong_key_password_is_refused(ca, tmp_path):
    cert = ca.issue_cert("localhost")
    from cryptography.hazmat.primitives import serialization as s
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    key = load_pem_private_key(cert.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.BestAvailableEncryption(b"right"))
    path = tmp_path / "k.pem"
    path.write_bytes(encrypted + b"".join(c.bytes() for c in cert.cert_chain_pems))
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(path)}
    server_ssl_context(SecurityConfig.from_properties({**base, "ssl.key.password": "right"}), "SSL")
    with pytest.raises(ConfigError) as info:
        server_ssl_context(SecurityConfig.from_properties({**base, "ssl.key.password": "wrong"}), "SSL")
    assert "ssl.key.password" in str(info.value)


def test_inline_pem_and_pkcs12_keystores(ca, tmp_path):
    cert = ca.issue_cert("localhost")
    inline = SecurityConfig.from_properties({
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": cert.private_key_pem.bytes().decode(),
        "ssl.keystore.certificate.chain": b"".join(c.bytes() for c in cert.cert_chain_pems).decode(),
    })
    server_ssl_context(inline, "SSL")
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        load_pem_private_key,
        pkcs12,
    )

    key = load_pem_private_key(cert.private_key_pem.bytes(), None)
    leaf = x509.load_pem_x509_certificate(cert.cert_chain_pems[0].bytes())
    path = tmp_path / "broker.p12"
    path.write_bytes(pkcs12.serialize_key_and_certificates(b"broker", key, leaf, None, BestAvailableEncryption(b"pw")))
    p12 = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(path)}
    server_ssl_context(SecurityConfig.from_properties({**p12, "ssl.keystore.password": "pw"}), "SSL")
    with pytest.raises(ConfigError, match="wrong password"):
        server_ssl_context(SecurityConfig.from_properties({**p12, "ssl.keystore.password": "no"}), "SSL")


def test_jks_and_a_missing_keystore_are_refused_with_the_listener_named(tls_files):
    with pytest.raises(ConfigError, match="listener SSL uses TLS and needs a keystore"):
        BrokerConfig.from_mapping({"listeners": "SSL://127.0.0.1:0"})
    with pytest.raises(ConfigError, match="JKS keystores are not supported"):
        BrokerConfig.from_mapping(
            {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(tls_files["keystore"])}
        )


def test_per_listener_prefixes_win(tls_files):
    config = BrokerConfig.from_mapping({
        "listeners": "SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "SSL:SSL,INTERNAL:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls_files["keystore"]),
        "listener.name.internal.ssl.client.auth": "required",
        "listener.name.internal.ssl.truststore.type": "PEM",
        "listener.name.internal.ssl.truststore.location": str(tls_files["ca"]),
        "listener.name.internal.ssl.enabled.protocols": "TLSv1.3",
    })
    external = server_ssl_context(config.security, "SSL")
    internal = server_ssl_context(config.security, "INTERNAL")
    assert external.verify_mode == ssl.CERT_NONE
    assert internal.verify_mode == ssl.CERT_REQUIRED
    assert internal.minimum_version == ssl.TLSVersion.TLSv1_3
    assert external.minimum_version == ssl.TLSVersion.TLSv1_2


def test_cipher_suites_take_java_names_and_refuse_what_cannot_be_honoured(tls_files):
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert openssl_cipher_name("TLS_RSA_WITH_AES_256_GCM_SHA384") == "AES256-GCM-SHA384"
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA") == "ECDHE-RSA-AES128-SHA"
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls_files["keystore"])}
    tls12 = SecurityConfig.from_properties({
        **base, "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    })
    ctx = server_ssl_context(tls12, "SSL")
    assert [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"] == ["ECDHE-ECDSA-AES256-GCM-SHA384"]
    with pytest.raises(ConfigError, match="TLS 1.3 suites cannot be restricted"):
        server_ssl_context(SecurityConfig.from_properties({
            **base, "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}), "SSL")
    with pytest.raises(ConfigError, match="unknown or unavailable cipher suites: TLS_FOO_WITH_BAR"):
        server_ssl_context(SecurityConfig.from_properties({
            **base, "ssl.enabled.protocols": "TLSv1.2", "ssl.cipher.suites": "TLS_FOO_WITH_BAR"}), "SSL")


def test_principal_is_the_rfc2253_subject():
    cert = {"subject": (
        (("countryName", "US"),),
        (("organizationName", "Example, Inc."),),
        (("organizationalUnitName", "eng"), ("organizationalUnitName", "ops")),
        (("commonName", "alice"),),
    )}
    assert principal_from_certificate(cert) == r"User:CN=alice,OU=eng+OU=ops,O=Example\, Inc.,C=US"
    assert principal_from_certificate(None) == "User:ANONYMOUS"
    assert principal_from_certificate({}) == "User:ANONYMOUS"
