"""The Trio client's SASL mechanisms, sans-IO, against the broker's own SCRAM server and RFC
7677's example; the full exchange over a socket is in tests/commands/test_sasl.py."""

from __future__ import annotations

import pytest

from trikafka.client.errors import KafkaError
from trikafka.client.sasl import PlainClient, ScramClient, credentials_from_jaas
from trikafka.errors import ConfigError
from trikafka.security.sasl.scram import ScramServer, scram_credential


def test_rfc_7677_example():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.respond(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert (
        final
        == b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert client.respond(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None and client.done


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_against_the_brokers_server(mechanism):
    stored = scram_credential(mechanism, "s3cret")
    server = ScramServer(mechanism, lambda name, _mech: stored if name == "alice" else None)
    client = ScramClient(mechanism, "alice", "s3cret")
    final = client.respond(server.evaluate(client.first()))
    assert client.respond(server.evaluate(final)) is None and client.done and server.complete


def test_scram_refuses_a_forged_server_signature():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    client.respond(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(KafkaError, match="SASL_AUTHENTICATION_FAILED.*signature"):
        client.respond(b"v=AAAA")


def test_plain_token_and_jaas():
    username, password = credentials_from_jaas(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="p w";'
    )
    assert PlainClient(username, password).first() == b"\0alice\0p w"
    with pytest.raises(ConfigError, match="sasl.jaas.config"):
        credentials_from_jaas("org.apache.kafka.common.security.plain.PlainLoginModule required;")
