"""One set of dev defaults (``trikafka.config.dev.DEV_DEFAULTS``) for every entry point that starts
a broker for development — the CLI, ``open_broker()``, ``open_cluster()``, the fixtures,
``KafkaContainer`` — and ``kafka_defaults=True`` / ``--kafka-defaults`` for Kafka's own.

Client telemetry as Kafka does it: GetTelemetrySubscriptions and PushTelemetry advertised only
with ``client.telemetry.enable``; the readers of what clients push say how to turn it on.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import uuid

import pytest
import trio

from trikafka import cli, open_broker
from trikafka.client import open_consumer, open_producer
from trikafka.config import BrokerConfig
from trikafka.config.dev import DEV_DEFAULTS
from trikafka.errors import ConfigError
from trikafka.protocol.entities import build
from trikafka.protocol.headers import encode_request
from trikafka.protocol.registry import ApiKey
from trikafka.testing import ThreadedBroker, open_test_broker
from trikafka.testing.cluster import start_cluster
from trikafka.testing.container import KafkaContainer
from trikafka.testing.frames import REGISTRY, api_versions_frame, api_versions_response, read_frames, read_until_closed

KAFKA = BrokerConfig().as_properties()  # Kafka's defaults
ZERO = uuid.UUID(int=0)
TELEMETRY = {ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY}


def dev_values(config: BrokerConfig) -> dict[str, str]:
    properties = config.as_properties()
    return {key: properties[key] for key in DEV_DEFAULTS}


DEV = {key: value for key, (value, _) in DEV_DEFAULTS.items()}
KAFKA_VALUES = {key: KAFKA[key] for key in DEV_DEFAULTS}


def test_the_table_departs_from_kafka_in_every_row():
    assert all(DEV[key] != KAFKA[key] for key in DEV_DEFAULTS)
    assert DEV["group.initial.rebalance.delay.ms"] == "0" and KAFKA["group.initial.rebalance.delay.ms"] == "3000"


async def test_open_broker_has_the_dev_defaults_and_kafka_defaults_gives_kafkas():
    async with open_broker() as broker:
        assert dev_values(broker.config) == DEV
    async with open_broker({"listeners": "PLAINTEXT://127.0.0.1:0"}, num_io_threads=2) as broker:
        assert dev_values(broker.config) == DEV and broker.config.num_io_threads == 2
    async with open_broker(kafka_defaults=True) as broker:
        assert dev_values(broker.config) == KAFKA_VALUES
    # A key the caller sets wins; a BrokerConfig is taken as it is.
    async with open_broker(group_initial_rebalance_delay_ms=500) as broker:
        assert broker.config.group_initial_rebalance_delay_ms == 500
    async with open_broker(BrokerConfig(listeners="PLAINTEXT://127.0.0.1:0")) as broker:
        assert dev_values(broker.config) == KAFKA_VALUES


async def test_open_cluster_has_the_dev_defaults_and_kafka_defaults_gives_kafkas():
    from trikafka import open_cluster

    async with open_cluster(2, transport="memory") as cluster:
        assert all(dev_values(node.config) == DEV for node in cluster.nodes.values())
    async with open_cluster(2, transport="memory", kafka_defaults=True) as cluster:
        assert all(dev_values(node.config) == KAFKA_VALUES for node in cluster.nodes.values())


def test_queued_max_request_bytes_never_below_the_largest_request():
    big = 512 * 1024 * 1024
    config = BrokerConfig.coerce({"socket.request.max.bytes": big})
    assert config.queued_max_request_bytes == big


def test_the_test_kit_and_kafka_container_have_the_same_dev_defaults():
    with ThreadedBroker() as broker:
        assert dev_values(broker.config) == DEV
    assert dev_values(ThreadedBroker(kafka_defaults=True).config) == KAFKA_VALUES
    cluster = start_cluster(1)
    try:
        assert cluster.thread.call(lambda: dev_values(cluster.cluster.config)) == DEV
    finally:
        cluster.stop()
    with KafkaContainer() as kafka:
        assert dev_values(kafka.broker.config) == DEV
    # A KAFKA_* variable is a key the caller set: it wins over the dev default.
    with KafkaContainer().with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "3000") as kafka:
        assert kafka.broker.config.group_initial_rebalance_delay_ms == 3000


def test_the_cli_lists_them_and_kafka_defaults_drops_them():
    config, reasons = cli.resolve_config(cli.parse_args([]))
    assert dev_values(config) == DEV and all(reasons[key] == "dev default" for key in DEV_DEFAULTS)
    config, reasons = cli.resolve_config(cli.parse_args(["--kafka-defaults"]))
    assert dev_values(config) == KAFKA_VALUES and not set(reasons) & set(DEV_DEFAULTS)
    assert cli.changed_from_defaults(config, reasons).keys().isdisjoint(DEV_DEFAULTS)


async def first_join_seconds(tb) -> float:
    """Virtual seconds from a lone consumer's subscribe to its first record."""
    async with open_producer(tb) as producer:
        await producer.send("joins", b"x", partition=0)
    start = trio.current_time()
    async with open_consumer(tb, group_id="first-join", auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["joins"])
        while not await consumer.getmany(timeout_ms=100):
            pass
        return trio.current_time() - start


async def test_a_lone_consumer_joins_at_once_with_dev_defaults(autojump_clock):
    async with open_test_broker() as tb:
        assert tb.broker.config.group_initial_rebalance_delay_ms == 0
        assert await first_join_seconds(tb) < 1.0
    async with open_test_broker(kafka_defaults=True) as tb:
        assert await first_join_seconds(tb) >= 3.0  # Kafka's group.initial.rebalance.delay.ms


# --- client telemetry ------------------------------------------------------------------------


async def advertised(tb) -> set[int]:
    stream = await tb.connect()
    await stream.send_all(api_versions_frame(1))
    _, body = api_versions_response((await read_frames(stream, 1))[0])
    await stream.aclose()
    return {int(entry.api_key) for entry in body.api_keys}


async def test_telemetry_apis_are_advertised_only_when_telemetry_is_on(autojump_clock):
    async with open_test_broker() as tb:
        assert not TELEMETRY & await advertised(tb)
        assert tb.broker.config.client_telemetry_enable is False
    async with open_test_broker(client_telemetry=True) as tb:
        assert TELEMETRY <= await advertised(tb)
    async with open_test_broker(kafka_version="3.9") as tb:  # a profile does not bring them back
        assert not TELEMETRY & await advertised(tb)
    # With telemetry on, a profile of Kafka 3.7 or later has them (that Kafka with a receiver did).
    async with open_test_broker(kafka_version="3.9", client_telemetry=True) as tb:
        assert TELEMETRY <= await advertised(tb)
    async with open_test_broker(kafka_version="3.6", client_telemetry=True) as tb:
        assert not TELEMETRY & await advertised(tb)


async def test_a_request_for_them_when_off_gets_kafkas_answer(autojump_clock):
    """Kafka answers an API it does not advertise by closing the connection (an
    InvalidRequestException in its SocketServer); the same request is answered when on."""
    body = build(REGISTRY.get(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0).request_type, client_instance_id=ZERO)
    frame = encode_request(REGISTRY.get(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0), 7, body, "app")
    async with open_test_broker() as tb:
        stream = await tb.connect()
        await stream.send_all(frame)
        with trio.fail_after(5):
            assert await read_until_closed(stream) == b""  # closed, no answer
    async with open_test_broker(client_telemetry=True) as tb:
        stream = await tb.connect()
        await stream.send_all(frame)
        with trio.fail_after(5):
            assert len(await read_frames(stream, 1)) == 1


async def test_client_metrics_and_the_wait_say_how_to_turn_it_on(autojump_clock):
    async with open_test_broker() as tb:
        with pytest.raises(ConfigError, match=r"client.telemetry.enable.*--client-telemetry.*client_telemetry=True"):
            tb.broker.client_metrics()
        with trio.fail_after(1), pytest.raises(ConfigError, match="client.telemetry.enable"):
            await tb.wait_for_client_metric("org.apache.kafka.producer.", timeout=10)
    async with open_test_broker(client_telemetry=True) as tb:
        assert tb.broker.client_metrics() == []


def run_pytest(directory, source: str, *args: str) -> subprocess.CompletedProcess:
    """pytest in a subprocess on one test file (the plugin loads through its entry point)."""
    (directory / "test_marked.py").write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "test_marked.py"],
        cwd=directory, capture_output=True, text=True, timeout=300, check=False,
    )


MARKED = """
import pytest

@pytest.mark.trikafka(client_telemetry=True)
def test_on(kafka_broker):
    assert kafka_broker.client_metrics() == []

def test_off(kafka_broker):
    with pytest.raises(ValueError, match="client.telemetry.enable"):
        kafka_broker.client_metrics()

@pytest.mark.trikafka(kafka_defaults=True)
def test_kafka_defaults(kafka_broker, kafka_cluster):
    assert kafka_broker.thread.call(lambda: kafka_broker.broker.config.group_initial_rebalance_delay_ms) == 3000
    cluster = kafka_cluster(brokers=1)
    assert cluster.thread.call(lambda: cluster.cluster.config.group_initial_rebalance_delay_ms) == 3000

def test_dev_defaults(kafka_broker):
    assert kafka_broker.thread.call(lambda: kafka_broker.broker.config.group_initial_rebalance_delay_ms) == 0
"""


def test_the_cli_flag_and_the_mark_turn_it_on(tmp_path):
    assert cli.resolve_config(cli.parse_args(["--client-telemetry"]))[0].client_telemetry_enable is True
    assert cli.resolve_config(cli.parse_args([]))[0].client_telemetry_enable is False
    run = run_pytest(tmp_path, MARKED)
    assert run.returncode == 0 and "4 passed" in run.stdout, run.stdout + run.stderr


@pytest.mark.compat
@pytest.mark.parametrize("telemetry", [False, True])
def test_confluent_kafka_logs_no_telemetry_line_against_a_default_broker(telemetry):
    """librdkafka's own log (its ``logger``, with the ``telemetry`` debug context on): against
    a default broker it never starts the exchange; with telemetry on it does (the capture works)."""
    from confluent_kafka import Consumer, Producer

    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(f"librdkafka-telemetry-{telemetry}")
    logger.addHandler(Capture())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    with ThreadedBroker({"client.telemetry.enable": telemetry}) as broker:
        settings = {"bootstrap.servers": broker.bootstrap_servers, "logger": logger, "debug": "telemetry"}
        producer = Producer(settings)
        producer.produce("quiet", b"x")
        assert producer.flush(30) == 0
        consumer = Consumer({**settings, "group.id": "quiet", "auto.offset.reset": "earliest"})
        consumer.subscribe(["quiet"])
        message = None
        for _ in range(60):  # bounded: 0.5 s a poll
            if (message := consumer.poll(0.5)) is not None:
                break
        assert message is not None and message.error() is None
        consumer.close()
        producer.flush(30)
        del producer
    telemetry_lines = [line for line in lines if not line.startswith("INIT ")]
    if telemetry:
        assert any("Telemetry client instance id changed" in line for line in telemetry_lines), lines
    else:
        assert telemetry_lines == [], telemetry_lines
