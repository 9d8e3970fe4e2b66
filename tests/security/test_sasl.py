"""SASL: the mechanisms as pure state machines, and the exchange through a broker on the
in-memory transport under MockClock (the failed-authentication delay is trio's time).

Rules checked here: before authentication only ApiVersions, SaslHandshake and
SaslAuthenticate are served and anything else closes the connection unanswered; a wrong
password is SASL_AUTHENTICATION_FAILED with Kafka's message and one log line naming the
principal and the peer, never the secret; SaslHandshake v0 is followed by bare tokens.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import struct

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from trikafka.broker import open_broker
from trikafka.errors import ErrorCode
from trikafka.network.connection_state import SASL_TRANSITIONS, Closed, ConnectionState, RawFrame
from trikafka.protocol.headers import DecodedRequest, decode_response, encode_request
from trikafka.protocol.registry import ApiKey, ApiRegistry
from trikafka.security.sasl import SaslAuthenticationError, SaslError
from trikafka.security.sasl.authenticator import MAX_RECEIVE_SIZE
from trikafka.security.sasl.plain import PlainServer
from trikafka.security.sasl.scram import ScramServer, scram_credential
from trikafka.testing import Faults
from trikafka.testing.frames import (
    api_versions_frame,
    api_versions_response,
    read_frames,
    read_until_closed,
)
from trikafka.testing.memory import MemoryListener

REGISTRY = ApiRegistry()
PASSWORD = "alice-secret"
JAAS = {
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
        f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";'
    ),
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": (
        f'org.apache.kafka.common.security.scram.ScramLoginModule required user_alice="{PASSWORD}";'
    ),
}
CONFIG = {
    "listeners": "SASL_PLAINTEXT://memory:9092",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    **JAAS,
}


# -- the mechanisms alone -----------------------------------------------------------------


def test_scram_sha_256_follows_rfc_7677():
    """RFC 7677 section 3: user "user", password "pencil" — every byte of the exchange."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = scram_credential("SCRAM-SHA-256", "pencil", 4096, salt)
    server = ScramServer(
        "SCRAM-SHA-256",
        lambda user, mechanism: credential if user == "user" else None,
        server_nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


def test_scram_keeps_no_password():
    credential = scram_credential("SCRAM-SHA-512", PASSWORD)
    assert PASSWORD.encode() not in repr(credential).encode()
    assert PASSWORD.encode() not in credential.stored_key + credential.server_key + credential.salt


def test_scram_refuses_a_wrong_proof_and_an_unknown_user_alike():
    credential = scram_credential("SCRAM-SHA-512", PASSWORD)
    server = ScramServer("SCRAM-SHA-512", lambda u, m: credential if u == "alice" else None)
    server_first = server.evaluate(b"n,,n=alice,r=abc").decode()
    with pytest.raises(SaslError) as wrong:
        server.evaluate(scram_client_final("SCRAM-SHA-512", "wrong", "n=alice,r=abc", server_first).encode())
    assert not isinstance(wrong.value, SaslAuthenticationError)  # the client gets the generic text
    unknown = ScramServer("SCRAM-SHA-512", lambda u, m: None)
    with pytest.raises(SaslError) as nobody:
        unknown.evaluate(b"n,,n=mallory,r=abc")
    assert not isinstance(nobody.value, SaslAuthenticationError)


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
        (b"\0bob\0" + PASSWORD.encode(), "Authentication failed: Invalid username or password"),
        (b"\0\0x", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"bob\0alice\0" + PASSWORD.encode(),
         "Authentication failed: Client requested an authorization id that is different from username"),
    ],
)
def test_plain_answers_with_kafkas_messages(token, message):
    with pytest.raises(SaslAuthenticationError, match=f"^{message}$"):
        PlainServer({"alice": PASSWORD}).evaluate(token)


def test_plain_accepts_the_right_password():
    server = PlainServer({"alice": PASSWORD})
    assert server.evaluate(b"alice\0alice\0" + PASSWORD.encode()) == b""
    assert server.complete and server.authorization_id == "alice"


# -- a client for the tests ------------------------------------------------------------------


def scram_client_final(mechanism: str, password: str, client_first_bare: str, server_first: str) -> str:
    digest = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    attributes = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(attributes["s"]), int(attributes["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c={base64.b64encode(b'n,,').decode()},r={attributes['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def frame(api_key: int, version: int, body: object, correlation_id: int = 1) -> bytes:
    return encode_request(REGISTRY.get(api_key, version), correlation_id, body, "sasl-test")


async def call(stream: trio.abc.Stream, api_key: int, version: int, body: object, correlation_id: int = 1):
    await stream.send_all(frame(api_key, version, body, correlation_id))
    (raw,) = await read_frames(stream, 1)
    got, response = decode_response(REGISTRY.get(api_key, version), raw)
    assert got == correlation_id
    return response


async def authenticate(stream: trio.abc.Stream, mechanism: str, password: str):
    """SaslHandshake v1 then SaslAuthenticate v2; the last response."""
    handshake = await call(stream, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism))
    assert handshake.error_code == ErrorCode.none
    if mechanism == "PLAIN":
        token = f"\0alice\0{password}".encode()
        return await call(stream, ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token), 2)
    first = await call(
        stream, ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=nonce1"), 2
    )
    assert first.error_code == ErrorCode.none
    final = scram_client_final(mechanism, password, "n=alice,r=nonce1", first.auth_bytes.decode())
    return await call(stream, ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=final.encode()), 3)


METADATA = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def principals(broker) -> list[str]:
    return [c.principal for p in broker.path.socket_server.processors["SASL_PLAINTEXT"] for c in p.connections.values()]


# -- through a broker ----------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_authenticated_clients_are_served(mechanism, autojump_clock):
    listener = MemoryListener("memory", 9092)
    async with open_broker(CONFIG, trio_listeners={"SASL_PLAINTEXT": listener}) as broker:
        stream = await listener.connect("10.1.2.3")
        await stream.send_all(api_versions_frame(9))  # ApiVersions first, as clients do
        (raw,) = await read_frames(stream, 1)
        versions = {k.api_key: (k.min_version, k.max_version) for k in api_versions_response(raw)[1].api_keys}
        assert versions[ApiKey.SASL_HANDSHAKE] == (0, 1) and versions[ApiKey.SASL_AUTHENTICATE] == (0, 2)
        done = await authenticate(stream, mechanism, PASSWORD)
        assert done.error_code == ErrorCode.none
        assert principals(broker) == ["User:alice"]
        metadata = await call(stream, ApiKey.METADATA, 12, METADATA, 4)
        assert [b.node_id for b in metadata.brokers] == [1]
        # Once authenticated, SaslAuthenticate is out of place: Kafka's ILLEGAL_SASL_STATE
        # (a SaslHandshake begins a re-authentication, KIP-368: test_reauthentication.py).
        again = await call(stream, ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"x"), 5)
        assert again.error_code == ErrorCode.illegal_sasl_state


@pytest.mark.parametrize(
    ("mechanism", "message"),
    [
        ("PLAIN", "Authentication failed: Invalid username or password"),
        ("SCRAM-SHA-512",
         "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"),
    ],
)
async def test_a_wrong_password_fails_with_kafkas_error_and_one_log_line(mechanism, message, autojump_clock, caplog):
    caplog.set_level(logging.INFO, "trikafka")
    listener = MemoryListener("memory", 9092)
    async with open_broker(CONFIG, trio_listeners={"SASL_PLAINTEXT": listener}):
        stream = await listener.connect("10.9.9.9")
        other = await listener.connect("10.1.1.1")  # unaffected, authenticates meanwhile
        failed = await authenticate(stream, mechanism, "hunter2-wrong")
        assert failed.error_code == ErrorCode.sasl_authentication_failed
        assert failed.error_message == message
        start = trio.current_time()
        assert await read_until_closed(stream) == b""
        assert trio.current_time() - start == pytest.approx(0.1)  # connection.failed.authentication.delay.ms
        assert (await authenticate(other, mechanism, PASSWORD)).error_code == ErrorCode.none
    lines = [r.getMessage() for r in caplog.records if "authentication failed" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "User:alice" in lines[0] and "10.9.9.9" in lines[0] and mechanism in lines[0]
    assert "hunter2" not in caplog.text and PASSWORD not in caplog.text


async def test_other_apis_before_authentication_close_the_connection_unanswered(autojump_clock, caplog):
    listener = MemoryListener("memory", 9092)
    async with open_broker(CONFIG, trio_listeners={"SASL_PLAINTEXT": listener}) as broker:
        Faults.of(broker).recorder.start()
        stream = await listener.connect()
        await stream.send_all(frame(ApiKey.METADATA, 12, METADATA))
        assert await read_until_closed(stream) == b""
        # After a handshake, still nothing but SaslAuthenticate.
        stream = await listener.connect()
        await call(stream, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        await stream.send_all(frame(ApiKey.METADATA, 12, METADATA, 2))
        assert await read_until_closed(stream) == b""
        assert Faults.of(broker).recorder.requests("Metadata") == []
        assert [r.api for r in Faults.of(broker).recorder.requests()] == []  # not even to the recorder


async def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones(autojump_clock):
    listener = MemoryListener("memory", 9092)
    async with open_broker(CONFIG, trio_listeners={"SASL_PLAINTEXT": listener}):
        stream = await listener.connect()
        answer = await call(stream, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-512"]
        assert await read_until_closed(stream) == b""


def raw(token: bytes) -> bytes:
    return struct.pack(">i", len(token)) + token


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_sasl_handshake_v0_then_bare_tokens(mechanism, autojump_clock):
    """Kafka before 1.0: after SaslHandshake v0 the tokens are size-prefixed bytes, no header."""
    listener = MemoryListener("memory", 9092)
    async with open_broker(CONFIG, trio_listeners={"SASL_PLAINTEXT": listener}) as broker:
        stream = await listener.connect()
        answer = await call(stream, ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeV0(mechanism=mechanism))
        assert answer.error_code == ErrorCode.none
        if mechanism == "PLAIN":
            await stream.send_all(raw(f"\0alice\0{PASSWORD}".encode()))
            assert await read_frames(stream, 1) == [b""]
        else:
            await stream.send_all(raw(b"n,,n=alice,r=abc"))
            (server_first,) = await read_frames(stream, 1)
            final = scram_client_final(mechanism, PASSWORD, "n=alice,r=abc", server_first.decode())
            await stream.send_all(raw(final.encode()))
            (server_final,) = await read_frames(stream, 1)
            assert server_final.startswith(b"v=")
        assert principals(broker) == ["User:alice"]
        metadata = await call(stream, ApiKey.METADATA, 12, METADATA, 7)
        assert [b.node_id for b in metadata.brokers] == [1]


async def test_plaintext_listeners_answer_sasl_with_illegal_sasl_state(autojump_clock):
    listener = MemoryListener("memory", 9092)
    async with open_broker({"listeners": "PLAINTEXT://memory:9092"}, trio_listeners={"PLAINTEXT": listener}):
        stream = await listener.connect()
        answer = await call(stream, ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"x"))
        assert answer.error_code == ErrorCode.illegal_sasl_state
        assert answer.error_message == "SaslAuthenticate request received after successful authentication"


# -- the state machine, fuzzed ---------------------------------------------------------------

ALLOWED = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


def _header_frame(api_key: int, version: int, body: bytes) -> bytes:
    payload = struct.pack(">hhih", api_key, version, 1, 4) + b"fuzz" + body
    return struct.pack(">i", len(payload)) + payload


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 80), st.integers(0, 20), st.binary(max_size=40)),
        min_size=1, max_size=8,
    ),
    st.integers(1, 64),
)
def test_no_request_but_versions_and_sasl_is_handed_out_before_authentication(requests, chunk):
    """Whatever frames arrive, split however: before authentication the state machine hands
    out only ApiVersions/SASL requests — anything else is Closed, never a request."""
    state = ConnectionState("fuzz", REGISTRY, 2**20, transitions=SASL_TRANSITIONS)  # type: ignore[arg-type]
    state.start_authentication(ALLOWED, MAX_RECEIVE_SIZE)
    data = b"".join(_header_frame(*request) for request in requests)
    for start in range(0, len(data), chunk):
        state.receive_data(data[start : start + chunk])
        while True:
            event = state.next_event()
            if isinstance(event, Closed):
                return
            if isinstance(event, DecodedRequest):
                assert event.header.request_api_key in ALLOWED
                state.answered()  # as the connection does after the authenticator's answer
                continue
            assert not isinstance(event, RawFrame)
            break


def test_an_oversized_frame_before_authentication_closes():
    state = ConnectionState("big", REGISTRY, 2**30, transitions=SASL_TRANSITIONS)  # type: ignore[arg-type]
    state.start_authentication(ALLOWED, MAX_RECEIVE_SIZE)
    state.receive_data(struct.pack(">i", MAX_RECEIVE_SIZE + 1))
    event = state.next_event()
    assert isinstance(event, Closed) and event.client_fault
