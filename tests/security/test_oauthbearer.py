"""OAUTHBEARER with Kafka's unsecured JWS validator (development only): the mechanism alone,
and confluent-kafka (librdkafka's unsecured JWT) producing through a SASL_PLAINTEXT listener."""

from __future__ import annotations

import base64
import json

import pytest

from trikafka.security.sasl import SaslAuthenticationError
from trikafka.security.sasl.oauthbearer import OAuthBearerServer
from trikafka.testing import ThreadedBroker

NOW = 1_700_000_000.0


def b64(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def token(claims: dict, alg: str = "none") -> str:
    return f"{b64({'alg': alg})}.{b64(claims)}."


def first_message(jws: str, authzid: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {jws}\x01\x01".encode()


def server(**options: str) -> OAuthBearerServer:
    return OAuthBearerServer(options, now=lambda: NOW)


def test_a_valid_unsecured_token_authenticates_its_subject():
    mechanism = server()
    assert mechanism.evaluate(first_message(token({"sub": "alice", "exp": NOW + 60, "iat": NOW}))) == b""
    assert mechanism.complete and mechanism.authorization_id == "alice"


@pytest.mark.parametrize(
    "claims_and_alg",
    [
        ({"sub": "alice", "exp": NOW - 1}, "none"),  # expired
        ({"exp": NOW + 60}, "none"),  # no principal
        ({"sub": "alice"}, "none"),  # no exp
        ({"sub": "alice", "exp": NOW + 60}, "HS256"),  # not unsecured
        ({"sub": "alice", "exp": NOW + 60, "iat": NOW + 3600}, "none"),  # issued in the future
    ],
)
def test_a_bad_token_gets_the_error_challenge_then_fails(claims_and_alg):
    claims, alg = claims_and_alg
    mechanism = server()
    challenge = mechanism.evaluate(first_message(token(claims, alg)))
    assert json.loads(challenge) == {"status": "invalid_token"}
    assert not mechanism.complete
    with pytest.raises(SaslAuthenticationError, match="invalid_token"):
        mechanism.evaluate(b"\x01")


def test_required_scope_and_principal_claim_options():
    mechanism = server(unsecuredValidatorRequiredScope="write", unsecuredValidatorPrincipalClaimName="user")
    assert mechanism.evaluate(first_message(token({"user": "bob", "exp": NOW + 5, "scope": "read write"}))) == b""
    assert mechanism.authorization_id == "bob"
    lacking = server(unsecuredValidatorRequiredScope="write")
    assert b"invalid_token" in lacking.evaluate(first_message(token({"sub": "bob", "exp": NOW + 5, "scope": "read"})))


def test_confluent_kafka_with_an_unsecured_jwt():
    from confluent_kafka import Producer

    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
    }
    with ThreadedBroker(config) as broker:
        port = broker.broker.endpoints["SASL_PLAINTEXT"].port
        errors: list[object] = []
        producer = Producer({
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=alice",
            "error_cb": errors.append,
        })
        producer.produce("oauth-topic", b"hello")
        assert producer.flush(30) == 0, errors
        connections = [c.principal for p in broker.broker.path.socket_server.processors["SASL_PLAINTEXT"]
                       for c in p.connections.values()]
        assert "User:alice" in connections
