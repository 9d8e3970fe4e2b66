"""Every awaitable public call is bounded by the Kafka key that bounds it in the Java client.

Two kinds of test, as the issue (31) reported the problem:

* real sockets against a closed port on 127.0.0.1 — what a user meets when nothing listens;
  each call must end with :class:`BrokerUnreachableError` naming the address and "connection
  refused" (``trio.fail_after`` guards them: on the code before the fix they hung);
* virtual time (``autojump_clock``) where the time is the point: the call ends exactly when
  its key says, whatever the cluster does (refuses connections, never completes a connect,
  accepts and never answers, holds Produce answers).
"""

from __future__ import annotations

import socket

import pytest
import trio

from trikafka.client import (
    BrokerUnreachableError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NewTopic,
    TopicPartition,
    open_admin,
    open_consumer,
    open_producer,
)
from trikafka.testing import open_test_broker

T0 = TopicPartition("t", 0)


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_unreachable(error: BaseException, port: int) -> None:
    assert isinstance(error, BrokerUnreachableError)
    assert isinstance(error, KafkaConnectionError) and isinstance(error, KafkaTimeoutError)
    assert f"127.0.0.1:{port}" in str(error) and "connection refused" in str(error), str(error)


# --- real sockets, closed port ---------------------------------------------------------------

ADMIN_CALLS = {
    "list_topics": lambda a: a.list_topics(),
    "create_topics": lambda a: a.create_topics([NewTopic("t", 1, 1)]),
    "list_groups": lambda a: a.list_groups(),
    "describe_groups": lambda a: a.describe_groups(["g"]),
}


@pytest.mark.parametrize("call", sorted(ADMIN_CALLS))
async def test_admin_call_ends_at_default_api_timeout_naming_the_address(call):
    port = closed_port()
    with trio.fail_after(30):
        async with open_admin(f"127.0.0.1:{port}", default_api_timeout_ms=300, request_timeout_ms=300) as admin:
            with pytest.raises(BrokerUnreachableError) as raised:
                await ADMIN_CALLS[call](admin)
    assert_unreachable(raised.value, port)
    assert f"Admin.{call}()" in str(raised.value) and "default.api.timeout.ms" in str(raised.value)


async def test_consumer_getmany_returns_and_position_raises_against_a_closed_port():
    port = closed_port()
    with trio.fail_after(30):
        async with open_consumer(f"127.0.0.1:{port}", default_api_timeout_ms=300) as consumer:
            consumer.assign([T0])
            assert await consumer.getmany(timeout_ms=200) == {}
            with pytest.raises(BrokerUnreachableError) as raised:
                await consumer.position(T0)
    assert_unreachable(raised.value, port)


async def test_producer_send_ends_at_max_block_ms_naming_the_address():
    port = closed_port()
    with trio.fail_after(30):
        async with open_producer(f"127.0.0.1:{port}", max_block_ms=300) as producer:
            with pytest.raises(BrokerUnreachableError) as raised:
                await producer.send("t", b"v")
    assert_unreachable(raised.value, port)
    assert "max.block.ms" in str(raised.value)


# --- virtual time ----------------------------------------------------------------------------


async def refused(host: str, port: int) -> trio.abc.Stream:
    raise ConnectionRefusedError(111, "Connection refused")


async def never_connects(host: str, port: int) -> trio.abc.Stream:
    await trio.sleep_forever()
    raise AssertionError


class SilentStream(trio.abc.Stream):
    """Accepts every byte, answers none (a broker process that is stopped, not dead)."""

    async def send_all(self, data) -> None:
        await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes=None) -> bytes:
        await trio.sleep_forever()
        raise AssertionError

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def silent(host: str, port: int) -> trio.abc.Stream:
    await trio.lowlevel.checkpoint()
    return SilentStream()


async def test_admin_calls_end_at_default_api_timeout_in_virtual_time(autojump_clock):
    async with open_admin(
        "kafka-1:9092", connector=refused, default_api_timeout_ms=2000, request_timeout_ms=2000
    ) as admin:
        for call in ADMIN_CALLS.values():
            start = trio.current_time()
            with pytest.raises(
                BrokerUnreachableError,
                match=r"kafka-1:9092 after 2\.0 s \(default\.api\.timeout\.ms\): connection refused",
            ):
                await call(admin)
            assert trio.current_time() - start == pytest.approx(2.0)


async def test_a_connect_that_never_completes_is_reported_as_such(autojump_clock):
    async with open_admin(
        "kafka-1:9092", connector=never_connects, default_api_timeout_ms=5000, request_timeout_ms=1000
    ) as admin:
        start = trio.current_time()
        with pytest.raises(
            BrokerUnreachableError,
            match=r"kafka-1:9092 after 5.0 s.*no connection within 1\.0 s \(request.timeout.ms\)",
        ):
            await admin.list_topics()
        assert trio.current_time() - start == pytest.approx(5.0)


async def test_a_broker_that_never_answers_times_out_each_request_and_the_call(autojump_clock):
    """A peer that accepts the connection and never answers (a stopped process, a firewall
    that swallows) is unreachable: the call ends at its bound saying so."""
    async with open_admin(
        "kafka-1:9092", connector=silent, default_api_timeout_ms=5000, request_timeout_ms=1000
    ) as admin:
        start = trio.current_time()
        with pytest.raises(
            BrokerUnreachableError,
            match=r"kafka-1:9092 after 5\.0 s \(default\.api\.timeout\.ms\): connected, but no answer to "
            r"ApiVersions within 1\.0 s \(request\.timeout\.ms\)",
        ):
            await admin.list_topics()
        assert trio.current_time() - start == pytest.approx(5.0)


async def test_consumer_calls_in_virtual_time(autojump_clock):
    async with open_consumer("kafka-1:9092", connector=refused, group_id="g", default_api_timeout_ms=2000) as consumer:
        consumer.assign([T0])
        start = trio.current_time()
        assert await consumer.getmany(timeout_ms=1000) == {}
        assert trio.current_time() - start == pytest.approx(1.0)
        for call in (lambda: consumer.position(T0), lambda: consumer.committed([T0]), lambda: consumer.commit({T0: 1})):
            start = trio.current_time()
            with pytest.raises(BrokerUnreachableError, match="kafka-1:9092 after 2.0 s"):
                await call()
            assert trio.current_time() - start == pytest.approx(2.0)
        consumer.unsubscribe()
        consumer.subscribe(["t"])  # a group join that cannot find its coordinator
        start = trio.current_time()
        assert await consumer.getmany(timeout_ms=1500) == {}
        assert trio.current_time() - start == pytest.approx(1.5)


async def test_consumer_close_is_bounded_by_default_api_timeout(autojump_clock):
    async with open_test_broker() as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("t", 1, 1)])
        start = None
        async with open_consumer(
            tb, group_id="g", default_api_timeout_ms=2000, auto_offset_reset="earliest"
        ) as consumer:
            consumer.subscribe(["t"])
            while not consumer.assignment():
                await consumer.getmany(timeout_ms=500)
            tb.faults.add_latency(3600, api="OFFSET_COMMIT")  # the close's auto-commit never answers
            tb.faults.add_latency(3600, api="LEAVE_GROUP")
            start = trio.current_time()
        assert trio.current_time() - start == pytest.approx(2.0, abs=0.01)


async def test_producer_waits_at_most_max_block_ms_for_buffer_room(autojump_clock):
    async with open_test_broker() as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("t", 1, 1)])
        async with open_producer(
            tb, max_block_ms=2000, buffer_memory=1000, linger_ms=0, delivery_timeout_ms=120_000
        ) as producer:
            await producer.send("t", b"warm-up")  # metadata known, connection up
            tb.faults.add_latency(3600, api="PRODUCE")
            await producer.enqueue("t", b"x" * 1500)  # over buffer.memory: the next one waits
            start = trio.current_time()
            with pytest.raises(KafkaTimeoutError, match=r"over buffer.memory \(1000\), after 2.0 s \(max.block.ms\)"):
                await producer.enqueue("t", b"y")
            assert trio.current_time() - start == pytest.approx(2.0)
            tb.faults.clear()


async def test_getmany_returns_at_its_timeout_while_the_coordinator_holds_joingroup(autojump_clock):
    """A rebalance waits for a member that does not poll: the coordinator holds the newcomer's
    JoinGroup. The newcomer's getmany returns at its timeout all the same, and its join goes on
    in the background, so once the other member rejoins the next getmany finds it done."""
    async with open_test_broker(num_partitions=2) as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("t", 2, 1)])
        config = {"group_id": "g", "auto_offset_reset": "earliest", "default_api_timeout_ms": 2000}
        async with open_consumer(tb, **config) as first, open_consumer(tb, **config) as second:
            first.subscribe(["t"])
            while len(first.assignment()) < 2:
                await first.getmany(timeout_ms=500)
            second.subscribe(["t"])
            for _ in range(3):  # each poll waits on the one JoinGroup still in flight
                start = trio.current_time()
                assert await second.getmany(timeout_ms=1000) == {}
                assert trio.current_time() - start == pytest.approx(1.0)
            assert second.assignment() == set()
            while not second.assignment() or len(first.assignment()) != 1:  # the first member polls, rejoins
                await first.getmany(timeout_ms=100)
                await second.getmany(timeout_ms=100)
            assert first.assignment() | second.assignment() == {T0, TopicPartition("t", 1)}
            assert not first.assignment() & second.assignment()


async def test_getmany_and_close_are_bounded_while_a_joingroup_is_held(autojump_clock):
    async with open_test_broker() as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("t", 1, 1)])
        tb.faults.hold_responses("JOIN_GROUP")
        start = None
        async with open_consumer(tb, group_id="g", default_api_timeout_ms=2000) as consumer:
            consumer.subscribe(["t"])
            for timeout in (1000, 0, 2500):
                start = trio.current_time()
                assert await consumer.getmany(timeout_ms=timeout) == {}
                # timeout 0 still lets one retry.backoff.ms (100 ms) of round trips complete
                assert trio.current_time() - start == pytest.approx(max(timeout, 100) / 1000)
            # The coordinator answers a connection's requests in order (Kafka mutes a channel
            # while one is out): an OffsetFetch behind the held JoinGroup waits, bounded.
            start = trio.current_time()
            with pytest.raises(KafkaTimeoutError, match=r"committed\(\): no result after 2\.0 s"):
                await consumer.committed([T0])
            assert trio.current_time() - start == pytest.approx(2.0)
            start = trio.current_time()
        assert trio.current_time() - start <= 2.0  # the held JoinGroup is abandoned, not awaited
