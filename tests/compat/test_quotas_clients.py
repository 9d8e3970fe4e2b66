"""Real clients over real sockets: client quotas (KIP-219) and SASL re-authentication (KIP-368).

confluent-kafka (librdkafka) honours a throttle time the broker answers and reports it to
``throttle_cb``; it re-authenticates on its connection when the broker advertises a session
lifetime. The broker runs on a thread of this process (127.0.0.1, port 0); quotas are set
with AlterClientQuotas from the project's Trio client (no Python Kafka admin client has that
API). Every wait is bounded by the clients' own timeouts or TIMEOUT.
"""

from __future__ import annotations

import uuid

import pytest
import trio

from trikafka.client.connection import connect_tcp
from trikafka.protocol.entities import build
from trikafka.protocol.registry import ApiRegistry
from trikafka.testing import ThreadedBroker

from .support import TIMEOUT

pytestmark = [pytest.mark.compat]

REGISTRY = ApiRegistry()
PASSWORD = "alice-secret"


def request(api_key: int, version: int, **fields):
    return build(REGISTRY.get(api_key, version).request_type, **fields)


def setup(broker: ThreadedBroker, topic: str, entity, key: str, value: float) -> None:
    """Create ``topic`` and set one quota, over TCP, as an operator's tool would."""
    host, port = broker.bootstrap_servers.split(",")[0].rsplit(":", 1)

    async def main() -> None:
        async with connect_tcp(host, int(port), "quota-admin") as client:
            created = await client.request(request(
                19, 7, timeout=5000, validate_only=False,
                topics=[{"name": topic, "num_partitions": 1, "replication_factor": 1,
                         "assignments": [], "configs": []}]))
            assert created.topics[0].error_code == 0
            altered = await client.request(request(
                49, 1, validate_only=False,
                entries=[{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                          "ops": [{"key": key, "value": value, "remove": False}]}]))
            assert altered.entries[0].error_code == 0, altered

    trio.run(main)


def test_confluent_producer_over_its_quota_sees_throttle_events():
    from confluent_kafka import Producer

    topic = f"quota-{uuid.uuid4().hex[:8]}"
    with ThreadedBroker() as broker:
        setup(broker, topic, [("client-id", "throttled")], "producer_byte_rate", 10_000)
        throttles = []
        errors = []
        producer = Producer({
            "bootstrap.servers": broker.bootstrap_servers, "client.id": "throttled", "linger.ms": 20,
            "throttle_cb": throttles.append, "error_cb": errors.append,
        })
        for _ in range(20):
            producer.produce(topic, b"x" * 10_000)  # 200 kB at once: twice what 10 s allow
        assert producer.flush(TIMEOUT) == 0
        assert not errors
        assert throttles, "no throttle event reached throttle_cb"
        assert all(event.throttle_time > 0 for event in throttles)
        assert {event.broker_id for event in throttles} == {broker.node_id}
        assert broker.thread.call(lambda: broker.broker.path.context.client_quotas.produce.statistics().throttled) >= 1


def test_confluent_re_authenticates_on_its_connection_before_the_session_ends():
    from confluent_kafka import Producer
    from trio_util import wait_any

    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";'
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "connections.max.reauth.ms": "3000",
    }
    with ThreadedBroker(config) as broker:
        errors = []
        producer = Producer({
            "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": PASSWORD,
            "error_cb": errors.append,
        })
        topic = f"reauth-{uuid.uuid4().hex[:8]}"
        producer.produce(topic, b"before")
        assert producer.flush(TIMEOUT) == 0
        processors = broker.thread.call(lambda: broker.broker.path.socket_server.processors["SASL_PLAINTEXT"])

        async def renewed() -> None:  # librdkafka renews at 85-95 % of the 3 s lifetime
            await wait_any(*[
                lambda p=p: p.reauthentications.wait_value(lambda n: n >= 1) for p in processors
            ])

        broker.thread.run(renewed, timeout=TIMEOUT)
        producer.produce(topic, b"after")
        assert producer.flush(TIMEOUT) == 0
        assert not errors
        stats = broker.thread.call(lambda: [p.statistics() for p in processors])
        assert sum(s.expired_connections_killed for s in stats) == 0
