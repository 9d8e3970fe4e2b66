"""Scenarios through the pytest mark (``@pytest.mark.trikafka(scenario=...)``) on the three
fixtures, and on the thread-hosted handles with a real client (confluent-kafka) over TCP."""

from __future__ import annotations

import asyncio

import pytest
import trio
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from trikafka.testing import Scenario
from trikafka.testing.pytest_plugin import marked_scenario

from .test_faults import metadata

TIMEOUT = 30
POLICY = {"trigger": {"at": 0}, "action": {"do": "inject_error", "api": "CreateTopics", "error": "POLICY_VIOLATION"}}


@pytest.mark.compat
@pytest.mark.trikafka(scenario={"steps": [POLICY]})
def test_the_mark_starts_a_json_scenario_on_kafka_broker(kafka_broker):
    status = kafka_broker.wait_for_scenario()
    assert status["complete"] and status["fired"][0]["action"] == "inject_error"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    future = admin.create_topics([NewTopic("refused", 1, 1)])["refused"]
    with pytest.raises(KafkaException, match="POLICY_VIOLATION"):
        future.result(TIMEOUT)


@pytest.mark.compat
@pytest.mark.trikafka(scenario=Scenario().after(2, api="Produce").inject_error("Produce", "MESSAGE_TOO_LARGE", count=1))
def test_a_request_trigger_with_a_real_client(kafka_broker):
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "linger.ms": 0, "retries": 0,
                         "enable.idempotence": False})
    delivered = []
    for i in range(3):
        producer.produce("t", b"%d" % i, on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(TIMEOUT)
    assert [e is None for e in delivered] == [True, True, False]
    assert kafka_broker.scenario_status()["complete"]
    assert kafka_broker.high_watermark("t", 0) == 2


@pytest.mark.compat
@pytest.mark.trikafka(scenario=Scenario().at(0.2).stop_broker(2).at(0.4).start_broker(2))
def test_the_mark_runs_cluster_steps_on_each_kafka_cluster(kafka_cluster):
    cluster = kafka_cluster(brokers=3)
    status = cluster.wait_for_scenario()
    assert [f["action"] for f in status["fired"]] == ["stop_broker", "start_broker"]
    assert cluster.thread.call(lambda: sorted(cluster.cluster.state.alive)) == [1, 2, 3]


@pytest.mark.compat
def test_a_single_broker_refuses_cluster_steps_through_its_thread(kafka_broker):
    with pytest.raises(ValueError, match=r"step 0 \(at 0: move_leader .*\): move_leader needs a cluster"):
        kafka_broker.apply_scenario(Scenario().at(0).move_leader("t", 0, 2))


@pytest.mark.compat
@pytest.mark.asyncio
async def test_aio_follows_a_scenario(kafka_broker):
    await kafka_broker.aio.apply_scenario(Scenario().at(0.1).set_round_trip_time(0.0))
    status = await asyncio.wait_for(kafka_broker.aio.wait_for_scenario(), TIMEOUT)
    assert status["complete"]


@pytest.mark.trikafka(scenario=Scenario().at(3).add_latency(2.0, api="Metadata", count=1))
async def test_the_mark_on_trikafka_broker_runs_on_the_tests_clock(trikafka_broker, autojump_clock):
    async with trikafka_broker.client() as client:
        await client.request(metadata())
        assert trio.current_time() < 3  # the latency step has not fired yet
        await trio.sleep(3)
        start = trio.current_time()
        await client.request(metadata())
        assert trio.current_time() - start == 2.0
    assert trikafka_broker.scenario_status()["fired"][0]["at"] == 3.0


class _Node:
    def __init__(self, **kwargs: object) -> None:
        self.mark = pytest.mark.trikafka(**kwargs).mark

    def iter_markers(self, name: str):
        return iter([self.mark])


def test_a_bad_scenario_in_the_mark_is_a_usage_error_naming_the_step():
    with pytest.raises(pytest.UsageError, match=r"scenario=\.\.\.\): step 0: do='nap' is not an action"):
        marked_scenario(_Node(scenario=[{"trigger": {"at": 1}, "action": {"do": "nap"}}]))
    assert marked_scenario(_Node(config={"num.partitions": 2})) is None
