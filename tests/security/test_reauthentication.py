"""KIP-368: ``connections.max.reauth.ms`` — session lifetimes, expiry and re-authentication on
the same connection, in virtual time over the in-memory transport."""

from __future__ import annotations

import pytest
import trio
from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest as SaslAuthenticateV0
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.security.test_sasl import CONFIG, METADATA, PASSWORD, authenticate, call, frame
from trikafka.broker import open_broker
from trikafka.errors import ErrorCode
from trikafka.network.connection_state import MuteState
from trikafka.protocol.registry import ApiKey
from trikafka.testing.frames import read_until_closed
from trikafka.testing.memory import MemoryListener

LIFETIME_MS = 60_000
REAUTH = {
    **CONFIG,
    "connections.max.reauth.ms": str(LIFETIME_MS),
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_alice="{PASSWORD}" user_bob="bob-secret";'
    ),
}


def connections(broker):
    return [c for p in broker.path.socket_server.processors["SASL_PLAINTEXT"] for c in p.connections.values()]


async def plain(stream, user, password, correlation_id=2):
    token = f"\0{user}\0{password}".encode()
    return await call(stream, ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token), correlation_id)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_the_session_lifetime_is_answered_and_an_expired_session_is_closed(mechanism, autojump_clock):
    listener = MemoryListener("memory", 9092)
    async with open_broker(REAUTH, trio_listeners={"SASL_PLAINTEXT": listener}):
        stream = await listener.connect()
        done = await authenticate(stream, mechanism, PASSWORD)
        assert done.error_code == ErrorCode.none
        assert done.session_lifetime.total_seconds() * 1000 == LIFETIME_MS
        start = trio.current_time()
        await call(stream, ApiKey.METADATA, 12, METADATA, 4)
        await trio.sleep_until(start + LIFETIME_MS / 1000)
        # Expired: the next request other than SaslHandshake closes the connection, unanswered.
        await stream.send_all(frame(ApiKey.METADATA, 12, METADATA, 5))
        assert await read_until_closed(stream) == b""


async def test_without_the_setting_a_session_never_expires(autojump_clock):
    listener = MemoryListener("memory", 9092)
    async with open_broker(CONFIG, trio_listeners={"SASL_PLAINTEXT": listener}):
        stream = await listener.connect()
        done = await authenticate(stream, "PLAIN", PASSWORD)
        assert done.session_lifetime.total_seconds() == 0
        await trio.sleep(500)  # long past any lifetime above, short of connections.max.idle.ms
        metadata = await call(stream, ApiKey.METADATA, 12, METADATA, 4)
        assert [b.node_id for b in metadata.brokers] == [1]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_re_authentication_on_the_same_connection_renews_the_session(mechanism, autojump_clock):
    listener = MemoryListener("memory", 9092)
    async with open_broker(REAUTH, trio_listeners={"SASL_PLAINTEXT": listener}) as broker:
        stream = await listener.connect()
        await authenticate(stream, mechanism, PASSWORD)
        [connection] = connections(broker)
        await trio.sleep(LIFETIME_MS / 1000 * 0.9)  # librdkafka renews at 85-95 % of the lifetime
        renewed = await authenticate(stream, mechanism, PASSWORD)
        assert renewed.error_code == ErrorCode.none
        assert renewed.session_lifetime.total_seconds() * 1000 == LIFETIME_MS
        assert connections(broker) == [connection] and connection.state == MuteState.NOT_MUTED
        assert connection.principal == "User:alice"
        await trio.sleep(LIFETIME_MS / 1000 * 0.5)  # past the first session's end
        metadata = await call(stream, ApiKey.METADATA, 12, METADATA, 9)
        assert [b.node_id for b in metadata.brokers] == [1]
        # Within a second of the last re-authentication a SaslHandshake is no new one: the
        # handlers answer it as out of place (Kafka's MIN_REAUTH_INTERVAL_ONE_SECOND).
        await authenticate(stream, mechanism, PASSWORD)
        again = await call(stream, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism), 10)
        assert again.error_code == ErrorCode.illegal_sasl_state


async def test_re_authentication_may_not_change_the_principal(autojump_clock):
    listener = MemoryListener("memory", 9092)
    async with open_broker(REAUTH, trio_listeners={"SASL_PLAINTEXT": listener}):
        stream = await listener.connect()
        await authenticate(stream, "PLAIN", PASSWORD)
        handshake = await call(stream, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"), 3)
        assert handshake.error_code == ErrorCode.none
        refused = await plain(stream, "bob", "bob-secret", 4)
        assert refused.error_code == ErrorCode.sasl_authentication_failed
        assert refused.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"
        assert await read_until_closed(stream) == b""


async def test_re_authentication_may_not_change_the_mechanism(autojump_clock):
    listener = MemoryListener("memory", 9092)
    async with open_broker(REAUTH, trio_listeners={"SASL_PLAINTEXT": listener}):
        stream = await listener.connect()
        await authenticate(stream, "PLAIN", PASSWORD)
        handshake = await call(stream, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 3)
        assert handshake.error_code == ErrorCode.unsupported_sasl_mechanism
        assert await read_until_closed(stream) == b""


async def test_an_old_client_is_told_no_lifetime_but_its_session_still_ends(autojump_clock):
    """SaslAuthenticate v0 has no session_lifetime_ms field; Kafka expires the session all the same."""
    listener = MemoryListener("memory", 9092)
    async with open_broker(REAUTH, trio_listeners={"SASL_PLAINTEXT": listener}):
        stream = await listener.connect()
        await call(stream, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        done = await call(stream, ApiKey.SASL_AUTHENTICATE, 0,
                          SaslAuthenticateV0(auth_bytes=f"\0alice\0{PASSWORD}".encode()), 2)
        assert done.error_code == ErrorCode.none
        await trio.sleep(LIFETIME_MS / 1000)
        await stream.send_all(frame(ApiKey.METADATA, 12, METADATA, 3))
        assert await read_until_closed(stream) == b""


@pytest.mark.parametrize(("max_reauth_ms", "lifetime"), [(0, 30_000), (10_000, 10_000), (90_000, 30_000)])
def test_an_oauthbearer_session_ends_no_later_than_its_token(max_reauth_ms, lifetime):
    """Kafka's session lifetime: the smaller of connections.max.reauth.ms and what is left of
    the credential — an OAUTHBEARER token's exp, even with the setting at 0."""
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest as Handshake

    from tests.security.test_oauthbearer import NOW, first_message, token
    from trikafka.protocol.headers import decode_request
    from trikafka.protocol.registry import ApiRegistry
    from trikafka.security.sasl.authenticator import SaslServerAuthenticator
    from trikafka.security.sasl.oauthbearer import OAuthBearerServer

    registry = ApiRegistry()
    authenticator = SaslServerAuthenticator(
        ("OAUTHBEARER",), {"OAUTHBEARER": lambda: OAuthBearerServer({}, now=lambda: NOW)}, max_reauth_ms
    )

    def decoded(api_key, version, body):
        return decode_request(frame(api_key, version, body)[4:], registry)

    authenticator.receive(decoded(ApiKey.SASL_HANDSHAKE, 1, Handshake(mechanism="OAUTHBEARER")))
    jws = token({"sub": "alice", "exp": NOW + 30})
    authenticator.receive(decoded(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=first_message(jws))))
    assert authenticator.complete and authenticator.principal == "User:alice"
    assert authenticator.session_lifetime_ms == lifetime
