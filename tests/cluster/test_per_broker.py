"""What each broker of a cluster does for itself, as in Kafka, although the nodes share one
core: client-quota rates are measured per broker, each broker cleans its own replicas of
compacted topics, and a stopping broker answers its delayed requests."""

from __future__ import annotations

import dataclasses
import datetime
import math

import trio
import trio.testing

from tests.log.test_cleaner import _read_all
from tests.security.test_client_quotas import frame_size
from trikafka import open_cluster
from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch

from .support import connected, fetch_request, request

CLIENT_ID = "trikafka-test"  # the client id of support.connected


async def create_placed_topic(client, name: str, replicas: list[int], configs: dict[str, str] | None = None):
    response = await client.request(request(
        19, 7, timeout=1000, validate_only=False,
        topics=[{
            "name": name, "num_partitions": -1, "replication_factor": -1,
            "assignments": [{"partition_index": 0, "broker_ids": replicas}],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
        }],
    ))
    assert response.topics[0].error_code == ErrorCode.none, response.topics[0]


def produce_request(topic: str, records: bytes):
    return request(0, 9, transactional_id=None, acks=-1, timeout=1000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}])


def padded_to(size: int, topic: str) -> object:
    """A Produce request of exactly ``size`` bytes as the broker counts them."""
    payload = 1000
    for _ in range(5):  # varint lengths grow with the payload: converge
        body = produce_request(topic, build_batch([(None, b"x" * payload, (), 1_700_000_000_000)]))
        if frame_size(body, CLIENT_ID) == size:
            return body
        payload += size - frame_size(body, CLIENT_ID)
    raise AssertionError(f"no payload makes a {size}-byte request")


async def test_a_producer_is_throttled_only_by_the_broker_it_overloads(autojump_clock):
    """Quota 1000 B/s for the client id. A first sample is measured over ten padded one-second
    windows, so 20000 bytes to broker 1 is 2000 B/s there: (2000 - 1000) / 1000 * 10000 =
    10000 ms. 6000 bytes to broker 2 is 600 B/s *there* — not 2600 B/s, as one shared rate
    for the whole cluster would make it."""
    quota = 1000
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 1) as admin:
            await create_placed_topic(admin, "on1", [1])
            await create_placed_topic(admin, "on2", [2])
            altered = await admin.request(request(49, 1, validate_only=False, entries=[{
                "entity": [{"entity_type": "client-id", "entity_name": CLIENT_ID}],
                "ops": [{"key": "producer_byte_rate", "value": float(quota), "remove": False}],
            }]))
            assert altered.entries[0].error_code == ErrorCode.none
        async with connected(cluster, 1) as to1, connected(cluster, 2) as to2:
            start = trio.current_time()
            first = await to1.request(padded_to(20_000, "on1"))
            assert first.responses[0].partition_responses[0].error_code == ErrorCode.none
            assert first.throttle_time.total_seconds() * 1000 == 10_000
            second = await to2.request(padded_to(6_000, "on2"))
            assert second.responses[0].partition_responses[0].error_code == ErrorCode.none
            assert second.throttle_time.total_seconds() == 0
            assert trio.current_time() == start  # both answered at once (KIP-219)
        # The quota itself is the cluster's: every broker holds the client to it.
        for node_id in cluster.broker_ids():
            quotas = cluster.broker(node_id).path.context.throttler.quotas
            assert quotas.produce.quota("ANONYMOUS", CLIENT_ID) == quota
        assert cluster.broker(1).path.context.throttler.quotas.produce.statistics().throttled == 1
        assert cluster.broker(2).path.context.throttler.quotas.produce.statistics().throttled == 0


async def test_a_compacted_topic_is_compacted_on_every_replica(autojump_clock):
    """Each broker's cleaner compacts its own replica, leader and followers alike, once the
    cleaner's backoff (log.cleaner.backoff.ms, 15 s) has passed in virtual time."""
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 1) as admin:
            await create_placed_topic(admin, "c", [1, 2, 3], {
                "cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0"})
        leader = cluster.leader("c", 0)
        async with connected(cluster, leader) as client:
            for values in (
                [(b"k0", b"a"), (b"k1", b"a"), (b"k2", b"a")],
                [(b"k0", b"b"), (b"k1", b"b")],
                [(b"k2", b"c")],
            ):
                batch = build_batch([(key, value, (), 1_700_000_000_000) for key, value in values])
                answer = await client.request(produce_request("c", batch))
                assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none
                await trio.sleep(2)  # past segment.ms: the next append rolls the segment
        written = [
            (0, b"k0", b"a"),
            (1, b"k1", b"a"),
            (2, b"k2", b"a"),
            (3, b"k0", b"b"),
            (4, b"k1", b"b"),
            (5, b"k2", b"c"),
        ]
        for node_id in cluster.broker_ids():
            assert _read_all(cluster.replica_log(node_id, "c", 0)) == written
        cleaners = [cluster.broker(node_id).log_cleaner for node_id in cluster.broker_ids()]
        assert [c.statistics().cleanings for c in cleaners] == [0, 0, 0]
        await trio.sleep(cluster.config.log_cleaner_backoff_ms / 1000 + 1)
        # A cleaning computes in a worker thread, which an autojumping clock does not wait
        # for: stop jumping until each node's cleaning is done (virtual time meanwhile runs
        # at real speed, so the bound still holds).
        clock = trio.lowlevel.current_clock()
        clock.autojump_threshold, clock.rate = math.inf, 1.0
        try:
            with trio.fail_after(60):
                for cleaner in cleaners:
                    await cleaner.cleaned.wait_value(lambda done: done >= 1)
        finally:
            clock.autojump_threshold, clock.rate = 0, 0.0
        # k2@2 stays: its newer value is in the active segment, which is never cleaned.
        compacted = [(2, b"k2", b"a"), (3, b"k0", b"b"), (4, b"k1", b"b"), (5, b"k2", b"c")]
        for node_id in cluster.broker_ids():
            assert _read_all(cluster.replica_log(node_id, "c", 0)) == compacted, f"broker {node_id}"
            assert cluster.broker(node_id).log_cleaner.statistics().cleanings == 1


async def test_log_cleaner_enable_false_leaves_a_cluster_uncompacted(autojump_clock):
    async with open_cluster(brokers=1, transport="memory", log_cleaner_enable=False) as cluster:
        async with connected(cluster, 1) as client:
            await create_placed_topic(client, "c", [1], {
                "cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0"})
            for value in (b"a", b"b"):
                await client.request(produce_request("c", build_batch([(b"k", value, (), 1_700_000_000_000)])))
                await trio.sleep(2)
        await trio.sleep(cluster.config.log_cleaner_backoff_ms / 1000 + 1)
        assert _read_all(cluster.replica_log(1, "c", 0)) == [(0, b"k", b"a"), (1, b"k", b"b")]


async def test_a_long_poll_fetch_is_answered_when_its_broker_stops(autojump_clock):
    """As a Broker shutting down: the purgatory completes its delayed operations, so the
    waiting Fetch is answered (empty) at once, not after max_wait nor dropped after the grace."""
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 1) as admin:
            await create_placed_topic(admin, "idle", [2, 1, 3])
        body = fetch_request("idle", 0)
        body = dataclasses.replace(body, max_wait=datetime.timedelta(seconds=60))
        answered = []
        async with connected(cluster, 2) as client:
            async with trio.open_nursery() as nursery:
                async def long_poll():
                    answered.append((await client.request(body), trio.current_time()))

                nursery.start_soon(long_poll)
                await trio.testing.wait_all_tasks_blocked()
                assert not answered
                stopped_at = trio.current_time()
                cluster.broker(2).stop()
        [(response, at)] = answered
        assert at == stopped_at
        assert response.error_code == ErrorCode.none
        [partition] = response.responses[0].partitions
        assert partition.error_code == ErrorCode.none and not partition.records
