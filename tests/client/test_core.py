"""The client core: metadata, versions, coordinators, backoff and timeouts — all in virtual time."""

from __future__ import annotations

import random

import pytest
import trio
import trio.testing

from trikafka.client.backoff import ExponentialBackoff
from trikafka.client.client import CoordinatorType, open_client
from trikafka.client.cluster import ClusterMetadata, TopicPartition
from trikafka.client.config import ClientConfig
from trikafka.client.errors import KafkaConnectionError, KafkaTimeoutError, error_for
from trikafka.client.transport import memory_connector, parse_bootstrap
from trikafka.client.versions import negotiate
from trikafka.errors import ConfigError, ErrorCode
from trikafka.protocol.registry import ApiKey
from trikafka.testing import open_test_broker

from .faults import LosingConnector


def test_negotiate_takes_the_highest_common_version():
    chosen = negotiate([(0, 3, 13), (3, 0, 9), (1, 13, 17), (999, 0, 1)])
    assert chosen[ApiKey.PRODUCE] == 11  # capped: v12+ is KIP-890's implicit AddPartitionsToTxn
    assert chosen[ApiKey.METADATA] == 9  # the broker's maximum
    assert ApiKey.FETCH not in chosen  # no overlap: refused at use, not at connect
    assert 999 not in chosen


def test_backoff_doubles_to_its_cap_with_bounded_jitter():
    exact = ExponentialBackoff(50, 1000, jitter=0)
    assert [exact.delay_ms(n) for n in range(7)] == [50, 100, 200, 400, 800, 1000, 1000]
    jittered = ExponentialBackoff(100, 1000, rng=random.Random(1))
    for attempts in range(5):
        expected = min(100 * 2**attempts, 1000)
        assert 0.8 * expected <= jittered.delay_ms(attempts) <= min(1.2 * expected, 1000)


def test_errors_are_classified_as_kafka_does():
    assert error_for(ErrorCode.not_leader_or_follower).retriable
    assert error_for(ErrorCode.not_leader_or_follower).stale_metadata
    assert error_for(ErrorCode.not_coordinator).coordinator_moved
    assert not error_for(ErrorCode.topic_authorization_failed).retriable
    assert type(error_for(ErrorCode.producer_fenced)).__name__ == "ProducerFencedError"


def test_cluster_refresh_policy():
    cluster = ClusterMetadata(metadata_max_age_ms=1000)
    assert cluster.next_refresh(5.0) == 5.0  # nothing known yet: due now
    assert cluster.request_topics() == []
    assert cluster.add_interest(["a"]) and not cluster.add_interest(["a"])
    assert cluster.request_topics() == ["a"]


def test_parse_bootstrap():
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["[::1]:9092"]) == [("::1", 9092)]
    assert parse_bootstrap(("a:1",)) == [("a", 1)]


@pytest.mark.parametrize(
    ("servers", "says"),
    [
        ("localhost", "'localhost' has no port"),
        ("a:1,b:x", "'b:x' has no port"),
        ("a:0", "'a:0' has no port"),
        (":9092", "':9092' has no port"),
        ("", "none given"),
        ([" "], "none given"),
        ([("a", 1)], "is not a string"),
        (9092, "comma-separated or in a list"),
        (None, "comma-separated or in a list"),
    ],
)
def test_a_wrong_bootstrap_list_is_a_config_error_naming_it(servers, says):
    with pytest.raises(ConfigError, match="bootstrap.servers") as raised:
        parse_bootstrap(servers)
    assert says in str(raised.value)
    assert raised.value.value == servers


async def test_open_client_refuses_a_method_passed_for_its_value():
    """A callable passed for the servers says so at once, instead of a TypeError from inside
    the client's nursery."""
    with pytest.raises(ConfigError, match=r"bootstrap.servers.*\(a method: call it\)"):
        async with open_client(lambda: "127.0.0.1:9092", ClientConfig.for_role("producer")):
            pass


class _Servers:
    def __init__(self, bootstrap_servers: object) -> None:
        self.bootstrap_servers = bootstrap_servers


async def test_open_client_takes_anything_with_a_bootstrap_servers_string(autojump_clock):
    """``open_producer(broker)``: a Broker, Cluster, kafka_broker... is read duck-typed
    through its ``bootstrap_servers`` property (the client imports no broker)."""
    async with open_test_broker() as test_broker:
        broker = test_broker.broker
        assert broker.bootstrap_servers == broker.address("PLAINTEXT") == "memory:9092"
        assert test_broker.bootstrap_servers == "memory:9092"
        connector = memory_connector(test_broker.listener)
        for given in (broker, _Servers("memory:9092")):
            async with open_client(given, ClientConfig.for_role("producer"), connector) as client:
                assert await client.wait_for_topic("duck") == 1
        with pytest.raises(ConfigError, match="bootstrap.servers"):
            async with open_client(_Servers(["not", "a", "str"]), ClientConfig.for_role("producer"), connector):
                pass


async def test_metadata_leaders_versions_and_coordinators(autojump_clock):
    async with open_test_broker(num_partitions=3) as broker:
        async with open_client(broker, ClientConfig.for_role("producer")) as client:
            assert await client.wait_for_topic("events") == 3  # auto-created
            assert client.cluster.leader_for(TopicPartition("events", 2)) == 1
            assert client.cluster.broker(1).host == "memory"
            await client.connection(1)
            assert client.version(1, ApiKey.METADATA) == 12
            assert await client.find_coordinator("g", CoordinatorType.GROUP) == 1
            assert await client.find_coordinator("tx", CoordinatorType.TRANSACTION) == 1


async def test_metadata_is_refreshed_every_max_age(autojump_clock):
    async with open_test_broker() as broker:
        config = ClientConfig.for_role("producer", metadata_max_age_ms=10_000)
        async with open_client(broker, config) as client:
            await client.refresh_metadata()
            first = client.cluster.last_refresh
            version = client.cluster.version
            await trio.sleep(35)
            assert client.cluster.version == version + 3
            assert client.cluster.last_refresh == pytest.approx(first + 30)


async def test_reconnect_backs_off_exponentially(autojump_clock):
    attempts: list[float] = []
    async with open_test_broker() as broker:
        real = memory_connector(broker.listener)

        async def flaky(host, port):
            attempts.append(trio.current_time())
            if len(attempts) <= 4:
                raise OSError("connection refused")
            return await real(host, port)

        config = ClientConfig.for_role(
            "admin", reconnect_backoff_ms=100, reconnect_backoff_max_ms=1000, retry_backoff_ms=1
        )
        async with open_client(broker, config, connector=flaky) as client:
            await client.refresh_metadata()
            assert client.cluster.brokers
    gaps = [b - a for a, b in zip(attempts, attempts[1:], strict=False)]
    for n, gap in enumerate(gaps[:4]):
        expected = min(0.1 * 2**n, 1.0)
        assert 0.8 * expected - 0.01 <= gap <= 1.2 * expected + 0.01, (n, gaps)


async def test_request_timeout_drops_the_connection(autojump_clock):
    async def black_hole(host, port):
        client_end, server_end = trio.testing.memory_stream_pair()
        holes.append(server_end)  # read by nobody: no answer ever comes
        return client_end

    holes: list = []
    config = ClientConfig.for_role("admin", request_timeout_ms=7000)
    async with open_client("nowhere:9092", config, connector=black_hole) as client:
        start = trio.current_time()
        with pytest.raises(KafkaTimeoutError):
            await client.connection(-1)
        assert trio.current_time() - start == pytest.approx(7.0)


async def test_a_lost_answer_fails_its_request_and_the_next_one_reconnects(autojump_clock):
    async with open_test_broker() as broker:
        connector = LosingConnector(memory_connector(broker.listener))
        async with open_client(broker, ClientConfig.for_role("admin"), connector=connector) as client:
            await client.refresh_metadata()
            connector.lose(ApiKey.METADATA)
            with pytest.raises(KafkaConnectionError):
                await client.send(1, ApiKey.METADATA, topics=[])
            assert connector.lost == 1
            answer = await client.send(1, ApiKey.METADATA, topics=[])
            assert answer.brokers[0].node_id == 1
