"""The Trio client at a wrong address says what it met, within its bound, and logs an outage once.

Rules these tests hold the client to:

* a peer that is not Kafka (an HTTP server, anything whose bytes are no Kafka response) is
  :class:`BrokerUnreachableError` naming the address and what came back — recognised at its
  first bytes, not after allocating the 1.2 GB that ``HTTP`` read as a size would declare;
* refused, unresolvable and silent peers are :class:`BrokerUnreachableError` too, never
  "broker -1" (a bootstrap entry's id is the client's bookkeeping, not an address);
* every call ends at its bound (virtual time: ``autojump_clock``);
* an outage is one WARNING per address (each retry at DEBUG), its end one INFO line; a
  consumer that reached no broker for ``default.api.timeout.ms`` says so once, and
  ``connected`` tells a program;
* a record that expires (``delivery.timeout.ms``) carries the last error it met.
"""

from __future__ import annotations

import functools
import logging
import socket

import pytest
import trio
import trio.testing

from trikafka.client import (
    BrokerUnreachableError,
    KafkaError,
    KafkaTimeoutError,
    NewTopic,
    TopicPartition,
    open_admin,
    open_consumer,
    open_producer,
)
from trikafka.client.transport import memory_connector
from trikafka.errors import ErrorCode
from trikafka.testing import open_test_broker

HTTP_ANSWER = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"


def http_peer(nursery: trio.Nursery):
    """A connector whose every connection is answered as an HTTP server answers (and kept open)."""

    async def connect(host: str, port: int) -> trio.abc.Stream:
        client, server = trio.testing.memory_stream_pair()

        async def answer() -> None:
            await server.receive_some()
            await server.send_all(HTTP_ANSWER)
            await trio.sleep_forever()

        nursery.start_soon(answer)
        return client

    return connect


async def refused(host: str, port: int) -> trio.abc.Stream:
    raise ConnectionRefusedError(111, "Connection refused")


async def unresolvable(host: str, port: int) -> trio.abc.Stream:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def warnings_about(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


# --- what the error says ---------------------------------------------------------------------


async def test_an_http_server_is_named_as_such_within_max_block_ms(autojump_clock):
    async with trio.open_nursery() as nursery:
        async with open_producer("kafka-1:9092", connector=http_peer(nursery), max_block_ms=3000) as producer:
            start = trio.current_time()
            with pytest.raises(BrokerUnreachableError) as raised:
                await producer.send("t", b"v")
            assert trio.current_time() - start == pytest.approx(3.0)
            assert not producer.connected
        nursery.cancel_scope.cancel()
    text = str(raised.value)
    assert "kafka-1:9092" in text and "max.block.ms" in text, text
    assert "not a Kafka broker" in text and "HTTP/1.1 400" in text and "an HTTP server" in text, text
    assert "broker -1" not in text


@pytest.mark.parametrize(
    ("connector", "reason"),
    [(refused, "connection refused"), (unresolvable, "cannot resolve the host name")],
)
async def test_each_cause_is_broker_unreachable_naming_address_and_reason(autojump_clock, connector, reason):
    async with open_admin("kafka-1:9092", connector=connector, default_api_timeout_ms=2000) as admin:
        start = trio.current_time()
        with pytest.raises(BrokerUnreachableError) as raised:
            await admin.list_topics()
        assert trio.current_time() - start == pytest.approx(2.0)
    assert "kafka-1:9092" in str(raised.value) and reason in str(raised.value)
    assert "broker -1" not in str(raised.value)


async def test_a_waiter_on_a_failed_attempt_gets_its_reason_not_broker_minus_one(autojump_clock):
    async with open_admin("kafka-1:9092", connector=refused, default_api_timeout_ms=2000) as admin:
        errors: list[BaseException] = []

        async def connect() -> None:
            try:
                await admin.client.connection(-1)
            except KafkaError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(connect)
            nursery.start_soon(connect)
    assert len(errors) == 2
    for error in errors:
        assert isinstance(error, BrokerUnreachableError)
        assert "bootstrap server kafka-1:9092: connection refused" in str(error), str(error)


async def test_an_http_port_over_real_sockets_is_not_a_kafka_broker():
    """The case users meet: the broker's metrics port, or any HTTP server, given as bootstrap."""

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.receive_some()
            await stream.send_all(HTTP_ANSWER)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(functools.partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            async with open_producer(f"127.0.0.1:{port}", max_block_ms=1000) as producer:
                with pytest.raises(BrokerUnreachableError) as raised:
                    await producer.send("t", b"v")
            nursery.cancel_scope.cancel()
    assert f"127.0.0.1:{port}" in str(raised.value) and "an HTTP server" in str(raised.value), str(raised.value)


# --- the log and `connected` -----------------------------------------------------------------


async def test_an_outage_is_one_warning_and_its_end_one_info_line(autojump_clock, caplog):
    caplog.set_level(logging.DEBUG, logger="trikafka.client")
    async with open_test_broker() as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("t", 1, 1)])
        memory = memory_connector(tb.listener)
        up = False

        async def flaky(host: str, port: int) -> trio.abc.Stream:
            if not up:
                raise ConnectionRefusedError(111, "Connection refused")
            return await memory(host, port)

        address = f"{tb.listener.host}:{tb.listener.port}"
        async with open_consumer(address, connector=flaky, default_api_timeout_ms=5000) as consumer:
            consumer.assign([TopicPartition("t", 0)])
            for _ in range(30):  # 30 s of retries
                assert await consumer.getmany(timeout_ms=1000) == {}
            assert not consumer.connected
            refusals = warnings_about(caplog, f"cannot connect to {address}")
            assert refusals == [
                f"cannot connect to {address}: connection refused (retrying with backoff; each retry logged at DEBUG)"
            ]
            retries = [r for r in caplog.records if r.levelno == logging.DEBUG and "cannot connect to" in r.message]
            assert len(retries) >= 10
            unreached = warnings_about(caplog, "no broker reached")
            assert unreached == [
                f"no broker reached for 5.0 s (default.api.timeout.ms); bootstrap servers {address} — "
                f"{address}: connection refused"
            ]
            up = True
            with trio.fail_after(10):
                while not consumer.connected:
                    await consumer.getmany(timeout_ms=500)
            back = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "again" in r.getMessage()]
            assert len(back) == 1 and back[0].startswith(f"connected to {address} again after"), back
            assert len(warnings_about(caplog, "cannot connect to")) == 1  # still the one


async def test_a_producer_to_an_unreachable_cluster_logs_the_outage_once(autojump_clock, caplog):
    caplog.set_level(logging.DEBUG, logger="trikafka.client")
    async with open_producer("kafka-1:9092", connector=refused) as producer:  # max.block.ms: Kafka's 60 s
        start = trio.current_time()
        with pytest.raises(BrokerUnreachableError, match=r"after 60\.0 s \(max\.block\.ms\): connection refused"):
            await producer.send("t", b"v")
        assert trio.current_time() - start == pytest.approx(60.0)
    assert len(warnings_about(caplog, "cannot connect to kafka-1:9092")) == 1
    assert len(warnings_about(caplog, "metadata refresh failed")) == 0  # the connect warning said it


# --- delivery.timeout.ms ---------------------------------------------------------------------


async def test_an_expired_record_carries_the_last_error_it_met(autojump_clock, caplog):
    caplog.set_level(logging.DEBUG, logger="trikafka.client")
    async with open_test_broker() as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("t", 1, 1)])
        tb.faults.inject_error("PRODUCE", "NOT_ENOUGH_REPLICAS")
        async with open_producer(tb, delivery_timeout_ms=5000, request_timeout_ms=1000, linger_ms=0) as producer:
            with pytest.raises(KafkaTimeoutError) as raised:
                await producer.send("t", b"v")
    error = raised.value
    assert "t-0: 1 record(s) not delivered within 5.0 s (delivery.timeout.ms)" in str(error), str(error)
    assert "last error: NOT_ENOUGH_REPLICAS" in str(error), str(error)
    assert isinstance(error.__cause__, KafkaError) and error.__cause__.error_code == ErrorCode.not_enough_replicas
    produce_warnings = warnings_about(caplog, "produce to t-0 failed")
    assert len(produce_warnings) == 1, produce_warnings
