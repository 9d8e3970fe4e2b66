"""Exit codes and one-line errors: what scripts rely on (0 ok, 1 Kafka error, 2 usage error)."""

from __future__ import annotations

import socket

import pytest

from tests.commands.support import trikafka


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_broker_is_one_line_and_exit_1():
    port = _closed_port()
    for args in (("topics", "list"), ("consume", "t", "-e"), ("produce", "t"), ("top", "-n", "1")):
        run = trikafka(*args, "--timeout", "3", bootstrap=f"127.0.0.1:{port}", input="x\n")
        assert run.code == 1, run
        assert (
            run.err == f"trikafka: cannot reach the cluster: 127.0.0.1:{port}: error connecting to ('127.0.0.1', "
            f"{port}): connection refused\n"
        ), run
        assert run.out == ""


def test_usage_errors_exit_2_naming_what_is_wrong(kafka_broker):
    b = kafka_broker.bootstrap_servers
    cases = {
        ("topics", "list", "-X", "linger.ms=5"): "linger.ms is a producer setting; a admin does not take it",
        ("topics", "list", "-X", "request.timeout.ms=soon"): "invalid configuration request.timeout.ms='soon'",
        ("topics", "list", "-X", "requst.timeout.ms=1"): "did you mean 'request.timeout.ms'?",
        ("topics", "list", "-X", "novalue"): "-X takes KEY=VALUE",
        ("consume", "t", "--from", "yesterday"): "--from 'yesterday'",
        ("produce", "t", "--file", "/nonexistent/file"): "--file",
        ("topics", "alter-config", "t"): "needs --set",
    }
    for args, needle in cases.items():
        run = trikafka(*args, bootstrap=b)
        assert run.code == 2, (args, run)
        assert needle in run.err and len(run.err.splitlines()) == 1 and "Traceback" not in run.err, (args, run)
    argparse_error = trikafka("topics", "frobnicate", bootstrap=b)
    assert argparse_error.code == 2 and "invalid choice" in argparse_error.err


def test_a_silent_broker_times_out_in_one_line():
    """A listener that accepts and never answers: the client's request.timeout.ms (from
    --timeout) ends it, not a hang."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        run = trikafka("topics", "list", "--timeout", "1", bootstrap=f"127.0.0.1:{port}")
    assert run.code == 1, run
    assert len(run.err.splitlines()) == 1 and run.err.startswith("trikafka: "), run
    assert "Traceback" not in run.err


def test_no_command_is_still_the_broker():
    run = trikafka("--list-config")
    assert run.code == 0 and "num.io.threads=" in run.out
    helped = trikafka("--help")
    assert "topics, produce, consume, groups, configs, cluster, top" in helped.out


def test_a_topic_config_typo_gets_did_you_mean(kafka_broker):
    b = kafka_broker.bootstrap_servers
    created = trikafka("topics", "create", "typos", "--config", "retension.ms=1000", bootstrap=b)
    assert created.code == 1 and "did you mean 'retention.ms'?" in created.err, created
    assert trikafka("topics", "create", "typos", bootstrap=b).code == 0
    altered = trikafka("configs", "alter", "topic", "typos", "--set", "cleanup.polcy=compact", bootstrap=b)
    assert altered.code == 1 and "did you mean 'cleanup.policy'?" in altered.err, altered
    assert len(altered.err.splitlines()) == 1


@pytest.mark.trikafka(config={"auto.create.topics.enable": False})
def test_produce_to_a_missing_topic_without_auto_creation_fails_at_once(kafka_broker):
    b = kafka_broker.bootstrap_servers
    produced = trikafka("produce", "nowhere", "--timeout", "30", bootstrap=b, input="x\n")
    assert produced.code == 1, produced
    assert produced.err.startswith("trikafka: UNKNOWN_TOPIC_OR_PARTITION: topic 'nowhere' does not exist"), produced
    # at once: one Metadata request, not max.block.ms of retries
    assert len(kafka_broker.recorded(api="Metadata")) <= 3, kafka_broker.recorded(api="Metadata")
    consumed = trikafka("consume", "nowhere", "-e", bootstrap=b)
    assert consumed.err.split(":")[1] == produced.err.split(":")[1]  # the same answer as consume


def test_produce_to_a_missing_topic_with_auto_creation_creates_it(kafka_broker):
    b = kafka_broker.bootstrap_servers
    produced = trikafka("produce", "made-on-the-fly", bootstrap=b, input="x\n")
    assert produced.code == 0, produced
    assert trikafka("consume", "made-on-the-fly", "-e", bootstrap=b).out == "x\n"
