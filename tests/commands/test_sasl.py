"""Commands on a SASL_PLAINTEXT listener: the right login works (Java's keys or kcat's), a wrong
one is one line and exit 1, and a client without SASL ends within --timeout."""

from __future__ import annotations

import pytest

from tests.commands.support import trikafka

pytestmark = pytest.mark.trikafka(config={
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="s3cret";',
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
        'org.apache.kafka.common.security.scram.ScramLoginModule required user_alice="s3cret";',
})

JAVA = [
    "-X",
    "security.protocol=SASL_PLAINTEXT",
    "-X",
    "sasl.mechanism=SCRAM-SHA-256",
    "-X",
    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="s3cret";',
]
KCAT = [
    "-X",
    "security.protocol=SASL_PLAINTEXT",
    "-X",
    "sasl.mechanisms=PLAIN",
    "-X",
    "sasl.username=alice",
    "-X",
    "sasl.password=s3cret",
]


def test_produce_and_consume_with_scram_and_plain(kafka_broker):
    b = kafka_broker.bootstrap_servers
    produced = trikafka("produce", "secured", *JAVA, input="one\ntwo\n", bootstrap=b)
    assert produced.code == 0, produced
    consumed = trikafka("consume", "secured", "-e", "--group", "readers", *KCAT, bootstrap=b)
    assert (consumed.code, consumed.out) == (0, "one\ntwo\n"), consumed
    described = trikafka("groups", "describe", "readers", "--json", *JAVA, bootstrap=b)
    assert described.json()[0]["lag"] == 0, described


def test_a_wrong_password_is_one_line_and_exit_1(kafka_broker):
    b = kafka_broker.bootstrap_servers
    wrong = KCAT[:-1] + ["sasl.password=nope"]
    for args in (("topics", "list"), ("consume", "secured", "-e"), ("produce", "secured")):
        run = trikafka(*args, *wrong, input="x\n", bootstrap=b)
        assert run.code == 1, (args, run)
        assert run.err.startswith("trikafka: SASL_AUTHENTICATION_FAILED: ") and len(run.err.splitlines()) == 1, (
            args,
            run,
        )
        assert "Invalid username or password" in run.err


def test_sasl_settings_are_checked_before_connecting(kafka_broker):
    b = kafka_broker.bootstrap_servers
    run = trikafka("topics", "list", "-X", "security.protocol=SASL_PLAINTEXT", bootstrap=b)
    assert run.code == 2 and "sasl.mechanism" in run.err and "GSSAPI" in run.err, run
    tls = trikafka("topics", "list", "-X", "security.protocol=SASL_SSL", bootstrap=b)
    assert tls.code == 2 and "sasl.mechanism" in tls.err and "GSSAPI" in tls.err, tls  # SASL_SSL: the same rule
    unsupported = trikafka(
        "topics",
        "list",
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-512",
        "-X",
        "sasl.username=alice",
        "-X",
        "sasl.password=s3cret",
        bootstrap=b,
    )
    assert (
        unsupported.code == 1
        and "UNSUPPORTED_SASL_MECHANISM" in unsupported.err
        and "PLAIN, SCRAM-SHA-256" in unsupported.err
    ), unsupported


def test_without_sasl_the_command_ends_within_its_timeout(kafka_broker):
    run = trikafka("topics", "list", "--timeout", "1", bootstrap=kafka_broker.bootstrap_servers)
    # the admin call's deadline (default.api.timeout.ms, set from --timeout) ends it, saying what it saw
    assert (
        run.code == 1
        and run.err.startswith("trikafka: ")
        and "after 1.0 s" in run.err
        and len(run.err.splitlines()) == 1
    ), run
