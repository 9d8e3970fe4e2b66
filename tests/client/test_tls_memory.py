"""TLS in the Trio client where determinism is the point: the in-memory transport under
MockClock. The broker's own SSL listener (a MemoryListener named ``memory``) checks the
hostname rule; a peer that never answers the ClientHello checks that the handshake is bounded
by the connect deadline on trio's clock and its stream closed."""

from __future__ import annotations

import pytest
import trio
import trio.testing
import trustme

from trikafka.broker import open_broker
from trikafka.client import open_admin
from trikafka.client.errors import KafkaError
from trikafka.client.transport import memory_connector
from trikafka.testing.memory import MemoryListener


def _broker_config(tmp_path, ca: trustme.CA, name: str) -> dict[str, str]:
    keystore = tmp_path / f"{name}.pem"
    ca.issue_cert(name, common_name="broker").private_key_and_cert_chain_pem.write_to_path(keystore)
    return {"listeners": "SSL://memory:9093", "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore)}


@pytest.fixture
def ca_file(tmp_path):
    ca = trustme.CA(organization_name="trikafka memory tests")
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(path)
    return ca, str(path)


@pytest.mark.parametrize("name", ["memory", "elsewhere.example"])
async def test_the_certificate_must_name_the_host_unless_identification_is_none(
    tmp_path, ca_file, autojump_clock, name
):
    ca, ca_path = ca_file
    listener = MemoryListener("memory", 9093)
    async with open_broker(_broker_config(tmp_path, ca, name), trio_listeners={"SSL": listener}):
        connect = memory_connector(listener)
        tls = {"security_protocol": "SSL", "ssl_ca_location": ca_path}
        async with open_admin("memory:9093", connector=connect, **tls) as admin:
            if name == "memory":
                assert await admin.list_topics() == {}
            else:
                with pytest.raises(
                    KafkaError,
                    match="SSL handshake with memory:9093 failed: certificate verify failed: Hostname mismatch",
                ):
                    await admin.list_topics()
        async with open_admin(
            "memory:9093", connector=connect, ssl_endpoint_identification_algorithm="none", **tls
        ) as admin:
            assert await admin.list_topics() == {}  # any name, but still our CA's certificate


async def test_a_silent_peer_is_dropped_at_the_connect_deadline(ca_file, autojump_clock):
    """The handshake runs inside request.timeout.ms (trio's clock): the stalled stream is closed
    then, and the client goes on trying (a timeout is retriable)."""
    _ca, ca_path = ca_file
    closed_after: list[float] = []

    async def silent(stream: trio.abc.Stream, opened: float) -> None:
        while await stream.receive_some(65536):  # the ClientHello, then nothing until closed
            pass
        closed_after.append(trio.current_time() - opened)

    async with trio.open_nursery() as peers:

        async def connector(host: str, port: int) -> trio.abc.Stream:
            ours, theirs = trio.testing.memory_stream_pair()
            peers.start_soon(silent, theirs, trio.current_time())
            return ours

        async with open_admin("memory:9093", connector=connector, security_protocol="SSL", ssl_ca_location=ca_path,
                              request_timeout_ms=2000, reconnect_backoff_ms=50) as admin:
            with trio.move_on_after(3):
                await admin.list_topics()
        peers.cancel_scope.cancel()
    assert closed_after and closed_after[0] == pytest.approx(2.0)


async def test_a_broker_that_requires_a_client_certificate(tmp_path, ca_file, autojump_clock):
    """Under TLS 1.3 the broker refuses a missing certificate after the client's handshake,
    with the alert Kafka sends too (certificate required): the client meets it on its first
    read and raises it at once, naming what to set — no retry, as against Kafka. With
    ssl.certificate.location and ssl.key.location it is served."""
    ca, ca_path = ca_file
    config = {
        **_broker_config(tmp_path, ca, "memory"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": ca_path,
        "ssl.client.auth": "required",
    }
    client = ca.issue_cert("client.example", common_name="client")
    client.cert_chain_pems[0].write_to_path(tmp_path / "client.pem")
    client.private_key_pem.write_to_path(tmp_path / "client-key.pem")
    listener = MemoryListener("memory", 9093)
    async with open_broker(config, trio_listeners={"SSL": listener}):
        connect = memory_connector(listener)
        tls = {"security_protocol": "SSL", "ssl_ca_location": ca_path}
        async with open_admin("memory:9093", connector=connect, **tls) as admin:
            with trio.fail_after(5), pytest.raises(KafkaError) as caught:
                await admin.list_topics()
        message = str(caught.value)
        assert "NETWORK_EXCEPTION" in message and "tlsv13 alert certificate required" in message, message
        assert "ssl.certificate.location" in message, message
        async with open_admin("memory:9093", connector=connect, ssl_certificate_location=str(tmp_path / "client.pem"),
                              ssl_key_location=str(tmp_path / "client-key.pem"), **tls) as admin:
            assert await admin.list_topics() == {}
