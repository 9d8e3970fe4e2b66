"""The Trio client's telemetry (KIP-714, ``enable.metrics.push``) against the in-memory broker
under the MockClock: it subscribes, pushes Java's metric names at the subscription's interval
in virtual time, re-subscribes when the subscription changes, and ends with a terminating push;
the broker's ``wait_for_client_metric`` sees what it pushed."""

from __future__ import annotations

import uuid

import trio
import trio.testing

from trikafka.client import ConfigResource, ConfigResourceType, open_admin, open_consumer, open_producer
from trikafka.testing import controls, open_test_broker

PRODUCER = "org.apache.kafka.producer."
CONSUMER = "org.apache.kafka.consumer."


async def subscribe(tb, metrics: str, interval_ms: int, name: str = "all") -> None:
    async with open_admin(tb) as admin:
        resource = ConfigResource(ConfigResourceType.CLIENT_METRICS, name)
        await admin.incremental_alter_configs({resource: {"metrics": metrics, "interval.ms": str(interval_ms)}})


def instance(tb, client_id: str):
    (found,) = [c for c in tb.broker.client_metrics() if c.client_id == client_id]
    return found


async def test_a_producer_pushes_at_the_interval_and_terminates_on_close(autojump_clock):
    async with open_test_broker(client_telemetry=True) as tb:
        await subscribe(tb, PRODUCER, 1000)
        waits = controls(tb.broker)
        async with open_producer(tb, client_id="billing", linger_ms=5) as producer:
            for i in range(5):
                await producer.send("orders", b"order-%d" % i)
            seen = await waits.wait_for_client_metric(f"{PRODUCER}record.queue.time.avg", client_id="billing")
            assert seen.client_software_name == "trikafka"
            assert {f"{PRODUCER}node.request.latency.avg", f"{PRODUCER}node.request.latency.max",
                    f"{PRODUCER}record.queue.time.max", f"{PRODUCER}produce.throttle.time.avg",
                    f"{PRODUCER}connection.creation.total"} <= set(seen.metrics)
            assert all(name.startswith(PRODUCER) for name in seen.metrics)
            latency = [p for p in seen.points if p[0] == f"{PRODUCER}node.request.latency.max"]
            assert latency and all(dict(p[1]).keys() == {"node.id"} for p in latency)
            # The cadence, in virtual time: one push a second after the first.
            first = instance(tb, "billing").pushes
            await trio.sleep(10.5)
            assert instance(tb, "billing").pushes == first + 10
            # A changed subscription: the next push is refused, the client subscribes again.
            await subscribe(tb, PRODUCER, 2000)
            await trio.sleep(3.5)  # the refused push (≤ 1 s), the jittered first one (≤ 3 s)
            changed = instance(tb, "billing")
            assert changed.push_interval_ms == 2000
            assert changed.client_instance_id == seen.client_instance_id
            before = changed.pushes
            await trio.sleep(10.5)
            assert instance(tb, "billing").pushes in (before + 5, before + 6)
            assert not instance(tb, "billing").terminating
            waits.start_recording()
        # Closing pushes once more, terminating; then its connection closes and the broker
        # drops the instance, as Kafka's ClientMetricsManager does.
        (last,) = [r for r in waits.recorded("PushTelemetry", client_id="billing")]
        assert last.body.terminating and last.body.client_instance_id == uuid.UUID(seen.client_instance_id)
        await trio.testing.wait_all_tasks_blocked()
        assert [c for c in tb.broker.client_metrics() if c.client_id == "billing"] == []


async def test_a_consumer_pushes_fetch_and_commit_latencies(autojump_clock):
    async with open_test_broker(client_telemetry=True) as tb:
        await subscribe(tb, "*", 500)
        async with open_producer(tb, enable_metrics_push=False) as producer:
            for i in range(3):
                await producer.send("events", b"e%d" % i, partition=0)
        waits = controls(tb.broker)
        async with open_consumer(tb, group_id="readers", client_id="reader", auto_offset_reset="earliest",
                                 enable_auto_commit=False) as consumer:
            consumer.subscribe(["events"])
            got = 0
            while got < 3:
                batches = await consumer.getmany(timeout_ms=1000)
                got += sum(len(records) for records in batches.values())
            await consumer.commit()
            await consumer.getmany(timeout_ms=100)  # an idle poll: time for poll.idle.ratio to measure
            seen = await waits.wait_for_client_metric(f"{CONSUMER}coordinator.commit.latency.max", client_id="reader")
            assert {f"{CONSUMER}fetch.manager.fetch.latency.avg", f"{CONSUMER}node.request.latency.max",
                    f"{CONSUMER}connection.creation.total"} <= set(seen.metrics)
            ratio = await waits.wait_for_client_metric(f"{CONSUMER}poll.idle.ratio.avg", client_id="reader")
            assert 0 <= ratio.metrics[f"{CONSUMER}poll.idle.ratio.avg"] <= 1
            consumed = await waits.wait_for_client_metric(f"{CONSUMER}fetch.manager.records.consumed.total",
                                                          client_id="reader", at_least=3)
            assert consumed.metrics[f"{CONSUMER}fetch.manager.records.consumed.total"] == 3
            assigned = await waits.wait_for_client_metric(f"{CONSUMER}coordinator.assigned.partitions",
                                                          client_id="reader", at_least=1)
            assert assigned.metrics[f"{CONSUMER}coordinator.assigned.partitions"] == 1
            assert [c.client_id for c in tb.broker.client_metrics()] == ["reader"]  # not the producer: push off
        await trio.testing.wait_all_tasks_blocked()
        assert tb.broker.client_metrics() == []  # dropped with the consumer's connections


async def test_no_subscription_no_push_and_the_client_asks_again(autojump_clock):
    async with open_test_broker(client_telemetry=True) as tb, open_producer(tb, client_id="quiet") as producer:
        await producer.send("t", b"x")
        await trio.sleep(1)
        quiet = instance(tb, "quiet")
        assert quiet.requested_metrics == () and quiet.pushes == 0
        await subscribe(tb, PRODUCER, 1000)
        # Without metrics the client asks again at the default interval (5 minutes).
        seen = await controls(tb.broker).wait_for_client_metric(PRODUCER, client_id="quiet", timeout=400)
        assert seen.pushes >= 1
