"""REBOOTSTRAP_REQUIRED (KIP-1102, error 129) through the fault surface: only where a version
carries it (Metadata v13+'s top-level error code), refused by name elsewhere, and a client
that implements KIP-1102 (librdkafka 2.10+, here through confluent-kafka) rebootstraps."""

from __future__ import annotations

import logging
from typing import Any

import pytest

TIMEOUT = 15


@pytest.mark.parametrize("api", ["Produce", "Fetch", "FindCoordinator", 0])
def test_an_api_that_cannot_carry_it_is_refused_by_name(kafka_broker: Any, api: str | int) -> None:
    with pytest.raises(ValueError, match=r"REBOOTSTRAP_REQUIRED \(129\) cannot be injected into .*Metadata v13\+"):
        kafka_broker.inject_error(api, 129 if isinstance(api, int) else "REBOOTSTRAP_REQUIRED")
    with pytest.raises(ValueError, match="KIP-1102"):
        kafka_broker.push_request_errors("Fetch", ["NONE", ("REBOOTSTRAP_REQUIRED", 0.1)])
    assert kafka_broker.active_faults() == []


def test_confluent_kafka_rebootstraps_on_it(kafka_broker: Any) -> None:
    from confluent_kafka import KafkaError, KafkaException, Producer

    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("test-rebootstrap-rdkafka")
    logger.addHandler(Capture())
    logger.setLevel(logging.DEBUG)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "client.id": "rb",
                         "debug": "metadata", "logger": logger})
    producer.produce("rebooted", b"before")
    assert producer.flush(TIMEOUT) == 0
    seen = {r.connection_id for r in kafka_broker.recorded(client_id="rb")}
    fault = kafka_broker.inject_error("Metadata", "REBOOTSTRAP_REQUIRED", count=1)
    with pytest.raises(KafkaException) as info:
        producer.list_topics(timeout=TIMEOUT)
    assert info.value.args[0].code() == KafkaError.REBOOTSTRAP_REQUIRED
    assert fault.applied == 1
    producer.produce("rebooted", b"after")
    assert producer.flush(TIMEOUT) == 0
    producer.poll(0)  # serve the log queue
    assert any("re-bootstrap" in line for line in lines), lines[-20:]
    # It started over from bootstrap.servers: ApiVersions on a connection it had not used.
    after = [r for r in kafka_broker.recorded(client_id="rb") if r.connection_id not in seen]
    every = [(r.api, r.connection_id) for r in kafka_broker.recorded(client_id="rb")]
    assert after and after[0].api == "ApiVersions", (every, seen)
