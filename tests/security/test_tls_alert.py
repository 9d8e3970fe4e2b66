"""A refused TLS handshake tells the client why: the broker sends OpenSSL's alert first.

Kafka's SSLEngine writes the alert (certificate required, unknown CA, protocol version)
before it closes, so a Kafka client prints the real reason; trio's SSLStream leaves it in
OpenSSL's outgoing buffer (see ``pending_tls_bytes``). These tests hold the broker to
Kafka's behaviour with real clients over real sockets, and to its bounds under MockClock:

- the client's own error names the alert, not a bare EOF or reset (stdlib ``ssl``, and
  confluent-kafka's log line);
- the broker logs one line per refused handshake and serves the next client;
- a client that does not read holds the connection at most ``ALERT_GRACE``;
- if trio's internals move, ``test_the_alert_is_within_the_brokers_reach`` fails (the
  broker itself falls back to a silent close, never an exception).
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from pathlib import Path

import confluent_kafka
import pytest
import trio
import trio.testing
import trustme

from trikafka.broker import open_broker
from trikafka.network.authentication import ALERT_GRACE, pending_tls_bytes, send_tls_alert
from trikafka.network.memory import MemoryStream
from trikafka.testing.frames import api_versions_frame

from .test_tls import TIMEOUT, api_versions_over, client_context, tls_connect


@pytest.fixture
def mtls_config(ssl_config: dict[str, str], tls_files: dict[str, Path]) -> dict[str, str]:
    """An SSL listener that requires a client certificate signed by the test CA."""
    return {**ssl_config, "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls_files["ca"])}


def stdlib_client(port: int, ctx: ssl.SSLContext) -> OSError | bytes:
    """A blocking stdlib client, as a Kafka client behaves: handshake, ApiVersions, read.

    Returns what it met: an error (ssl.SSLError and ConnectionResetError are both
    OSErrors) or what it read (b"": a bare EOF). The socket timeout is a safety limit.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(api_versions_frame(1))
                return tls.recv(65536)
        except OSError as exc:
            return exc


def refusal_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "trikafka.network" and r.levelno >= logging.WARNING]


def untrusted_client(ca: trustme.CA) -> ssl.SSLContext:
    ctx = client_context(ca)
    trustme.CA(organization_name="someone else").issue_cert("mallory@example.org").configure_cert(ctx)
    return ctx


def tls12_client(ca: trustme.CA) -> ssl.SSLContext:
    ctx = client_context(ca)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    return ctx


REFUSALS = {
    # name: (client context, broker keys beyond mtls_config, the client's SSLError reason,
    #        what the broker's one log line names)
    "no client certificate": (
        client_context, {}, "TLSV13_ALERT_CERTIFICATE_REQUIRED", "PEER_DID_NOT_RETURN_A_CERTIFICATE"),
    "certificate from an unknown CA": (
        untrusted_client, {}, "TLSV1_ALERT_UNKNOWN_CA", "CERTIFICATE_VERIFY_FAILED"),
    "protocol version refused": (
        tls12_client, {"ssl.enabled.protocols": "TLSv1.3"}, "TLSV1_ALERT_PROTOCOL_VERSION",
        "UNSUPPORTED_PROTOCOL"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
async def test_a_refused_client_is_told_why_and_the_broker_serves_on(
    case, ca, mtls_config, caplog
):
    make_context, extra, alert, logged = REFUSALS[case]
    caplog.set_level(logging.WARNING, "trikafka.network")
    alice = ca.issue_cert("alice@example.org", common_name="alice")
    with trio.fail_after(TIMEOUT):
        async with open_broker({**mtls_config, **extra}) as broker:
            met = await trio.to_thread.run_sync(stdlib_client, broker.port, make_context(ca))
            # Without the alert this is ConnectionResetError, or SSLEOFError (an SSLError
            # too, whose reason is UNEXPECTED_EOF_WHILE_READING): the reason is the point.
            assert isinstance(met, ssl.SSLError), repr(met)
            assert met.reason == alert, repr(met)
            good = await tls_connect(broker.port, client_context(ca, alice))
            assert (await api_versions_over(good)).error_code == 0
            await good.aclose()
    (line,) = refusal_lines(caplog)
    assert "TLS handshake failed" in line and logged in line and "127.0.0.1" in line


def confluent_kafka_failure(port: int, ca_file: Path) -> str:
    """confluent-kafka (librdkafka) without a client certificate: its first FAIL log line.

    poll() waits on the client's own event queue; the deadline is only a safety limit.
    """
    lines: list[str] = []

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(f"test-tls-alert.librdkafka.{port}")
    logger.propagate = False
    logger.addHandler(Lines())
    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca_file),
        "logger": logger,
    })
    deadline = time.monotonic() + TIMEOUT
    while not any("FAIL" in line for line in lines) and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.flush(0)
    return next((line for line in lines if "FAIL" in line), f"no FAIL line in {lines}")


@pytest.mark.compat
async def test_confluent_kafka_names_the_missing_certificate(ca, mtls_config, tls_files):
    """What a librdkafka user reads: before, "connection reset by peer" or "SSL
    connection closed by peer"; now the alert, as against Kafka."""
    with trio.fail_after(TIMEOUT + 5):
        async with open_broker(mtls_config) as broker:
            line = await trio.to_thread.run_sync(confluent_kafka_failure, broker.port, tls_files["ca"])
    assert "tlsv13 alert certificate required" in line, line


def confluent_kafka_error(port: int, ca_file: Path, client_files: dict[str, str]) -> tuple[int, str]:
    """A confluent-kafka producer's first error event (error_cb): its code and message.

    poll() waits on the client's own event queue; the deadline is only a safety limit."""
    errors: list[confluent_kafka.KafkaError] = []
    logger = logging.getLogger(f"test-tls-alert.errors.{port}")
    logger.propagate = False
    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": str(ca_file),
        "logger": logger, "error_cb": errors.append, **client_files,
    })
    deadline = time.monotonic() + TIMEOUT
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.flush(0)
    assert errors, "no error event"
    return errors[0].code(), errors[0].str()


#: (listener's TLS versions, librdkafka's error code, what its message names). Under TLS 1.3 the
#: client has finished its handshake when the broker refuses its certificate, so librdkafka
#: reports the alert as a receive failure (_TRANSPORT); under TLS 1.2 the refusal comes inside
#: its handshake (_SSL, "SSL handshake failed"). Either way the message is the alert — never
#: a bare "Disconnected" or "Connection reset".
UNTRUSTED = {
    "TLSv1.3": (confluent_kafka.KafkaError._TRANSPORT, "Receive failed: "),
    "TLSv1.2": (confluent_kafka.KafkaError._SSL, "SSL handshake failed: "),
}


@pytest.mark.compat
@pytest.mark.parametrize("version", list(UNTRUSTED))
async def test_confluent_kafka_names_the_untrusted_certificate(version, ca, mtls_config, tls_files, tmp_path):
    """librdkafka's test 0097 presents a certificate from a CA the broker does not trust."""
    mallory = trustme.CA(organization_name="someone else").issue_cert("mallory@example.org")
    mallory.cert_chain_pems[0].write_to_path(tmp_path / "mallory.pem")
    mallory.private_key_pem.write_to_path(tmp_path / "mallory.key")
    client = {"ssl.certificate.location": str(tmp_path / "mallory.pem"),
              "ssl.key.location": str(tmp_path / "mallory.key")}
    code, text = UNTRUSTED[version]
    with trio.fail_after(TIMEOUT + 5):
        async with open_broker({**mtls_config, "ssl.enabled.protocols": version}) as broker:
            got = await trio.to_thread.run_sync(confluent_kafka_error, broker.port, tls_files["ca"], client)
    assert got[0] == code, got
    assert text in got[1] and "tlsv1 alert unknown ca" in got[1], got


async def test_the_alert_is_within_the_brokers_reach(ca):
    """The broker reads the alert from trio's private outgoing buffer. If a trio release
    moves it, the broker closes silently as before — and this test fails, so CI notices."""
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_ctx)
    ca.configure_trust(server_ctx)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    client_raw, server_raw = trio.testing.memory_stream_pair()
    client = trio.SSLStream(client_raw, client_context(ca), server_hostname="localhost")
    server = trio.SSLStream(server_raw, server_ctx, server_side=True)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.do_handshake)  # TLS 1.3: the client is done first
            with pytest.raises(trio.BrokenResourceError):
                await server.do_handshake()
        pending = pending_tls_bytes(server)
        assert pending is not None, "trio's SSLStream no longer keeps OpenSSL's output in _outgoing"
        await server_raw.send_all(pending)  # b"" if trio ever sends the alert itself
        with pytest.raises(trio.BrokenResourceError) as info:
            await client.receive_some()
    assert info.value.__cause__.reason == "TLSV13_ALERT_CERTIFICATE_REQUIRED"


async def test_out_of_reach_the_broker_closes_as_before(ca):
    """The fallback: no outgoing buffer where trio kept it → nothing sent, nothing raised."""
    client_raw, server_raw = trio.testing.memory_stream_pair()
    server = trio.SSLStream(server_raw, ssl.create_default_context(ssl.Purpose.CLIENT_AUTH),
                            server_side=True)
    server._outgoing = None  # as if trio renamed it
    assert pending_tls_bytes(server) is None
    await send_tls_alert(server)
    await server_raw.send_eof()
    assert await client_raw.receive_some() == b""  # nothing went before the close


class LockstepListener(trio.abc.Listener[trio.abc.Stream]):
    """Connections whose writes wait until the other end reads (trio's lockstep streams):
    the model of a client that has stopped reading."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[trio.abc.Stream](0)

    async def connect(self) -> trio.abc.Stream:
        client, server = trio.testing.lockstep_stream_pair()
        await self._send.send(MemoryStream(server, ("memory", 9093), ("10.0.0.7", 50000)))
        return client

    async def accept(self) -> trio.abc.Stream:
        return await self._receive.receive()

    async def aclose(self) -> None:
        await self._receive.aclose()


class Signal(logging.Handler):
    """Sets a trio Event when the broker logs a line containing ``text`` (same thread)."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.WARNING)
        self.text = text
        self.event = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


@pytest.mark.parametrize(("idle_ms", "held"), [(600_000, ALERT_GRACE), (400, 0.4)])
async def test_a_client_that_does_not_read_holds_the_alert_only_for_the_grace(
    idle_ms, held, ca, mtls_config, autojump_clock
):
    """At most ALERT_GRACE, and never past the handshake's own deadline (here
    connections.max.idle.ms, when that is shorter)."""
    listener = LockstepListener()
    config = {**mtls_config, "listeners": "SSL://memory:9093", "connections.max.idle.ms": idle_ms}
    signal = Signal("TLS handshake failed")
    logger = logging.getLogger("trikafka.network")
    logger.addHandler(signal)
    try:
        async with open_broker(config, trio_listeners={"SSL": listener}):
            start = trio.current_time()
            raw = await listener.connect()
            client = trio.SSLStream(raw, client_context(ca), server_hostname="localhost")
            await client.do_handshake()  # TLS 1.3: done here; the broker refuses after
            await signal.event.wait()  # logged once the broker gave up on the alert
            assert trio.current_time() - start == pytest.approx(held)
            while await raw.receive_some(100):  # what the broker had written, then EOF
                pass
    finally:
        logger.removeHandler(signal)
