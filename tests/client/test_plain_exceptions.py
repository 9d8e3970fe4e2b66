"""Plain exceptions out of every ``async with open_*`` of the client (issue 31, item 2).

The client's context managers run background tasks in nurseries; trio wraps what leaves a
nursery in an ``ExceptionGroup``. The rules (``trikafka/client/lifetime.py``): the caller's
exception leaves as itself; a cancellation from outside is a plain cancellation; the client's
own failure leaves as a :class:`KafkaError` — a bug in a background task as
:class:`KafkaClientError` naming it — never as a group. Each context manager is tried with the
three cases: an exception in the block, a cancel scope around it, a background task failing
while the block awaits something unrelated.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
import trio

from trikafka.client import (
    KafkaClientError,
    KafkaError,
    NewTopic,
    open_admin,
    open_client,
    open_connection,
    open_consumer,
    open_producer,
)
from trikafka.client.config import ClientConfig
from trikafka.testing import open_test_broker


class ExplodingStream(trio.abc.Stream):
    """A memory stream whose reads raise ``RuntimeError`` once its owner is armed: a bug in
    the task reading the connection, as the client would meet it."""

    def __init__(self, inner: trio.abc.Stream, owner: Exploding) -> None:
        self.inner, self.owner = inner, owner

    async def send_all(self, data) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes=None):
        data = await self.inner.receive_some(max_bytes)
        if self.owner.armed:
            raise RuntimeError("boom in the connection reader")
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


class Exploding:
    """A connector to the test broker whose connections explode when ``armed``."""

    def __init__(self, tb) -> None:
        self.tb = tb
        self.armed = False

    async def __call__(self, host: str, port: int) -> trio.abc.Stream:
        return ExplodingStream(await self.tb.listener.connect(), self)


@asynccontextmanager
async def client_core(tb, connector=None, **config):
    async with open_client(tb, ClientConfig.for_role("admin", config), connector) as client:
        yield client


@asynccontextmanager
async def raw_connection(tb, connector=None, **config):
    stream = await (connector or Exploding(tb))("memory", 9092)
    async with open_connection(stream) as connection:
        yield connection


OPENERS = {
    "open_producer": open_producer,
    "open_consumer": open_consumer,
    "open_admin": open_admin,
    "open_client": client_core,
    "open_connection": raw_connection,
}


@pytest.mark.parametrize("name", sorted(OPENERS))
async def test_a_users_exception_leaves_as_itself(name, autojump_clock):
    async with open_test_broker() as tb:
        with pytest.raises(ValueError) as raised:
            async with OPENERS[name](tb):
                raise ValueError("x")
        assert type(raised.value) is ValueError and str(raised.value) == "x"

        class Mine(KafkaError):
            pass

        with pytest.raises(Mine):  # a KafkaError of the user's own is still the user's
            async with OPENERS[name](tb):
                raise Mine(0, "mine")


@pytest.mark.parametrize("name", sorted(OPENERS))
async def test_a_cancellation_from_outside_is_plain(name, autojump_clock):
    async with open_test_broker() as tb:
        with trio.move_on_after(5) as scope:
            async with OPENERS[name](tb):
                await trio.sleep_forever()
        assert scope.cancelled_caught
        with trio.CancelScope() as scope:  # cancelled while the block does client work
            async with open_producer(tb) as producer:
                scope.cancel()
                await producer.send("t", b"v")
        assert scope.cancelled_caught


async def test_a_failing_background_task_leaves_as_a_kafka_error_naming_it(autojump_clock):
    async with open_test_broker() as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("t", 1, 1)])

        async def producer_block(exploding):
            async with open_producer(tb, connector=exploding, metadata_max_age_ms=1000) as producer:
                await producer.send("t", b"v")
                exploding.armed = True
                await trio.sleep_forever()  # the metadata refresher's next answer explodes

        async def consumer_block(exploding):
            async with open_consumer(tb, connector=exploding, group_id="g", auto_offset_reset="earliest") as consumer:
                consumer.subscribe(["t"])
                while not consumer.assignment():
                    await consumer.getmany(timeout_ms=500)
                exploding.armed = True
                await trio.sleep_forever()  # the heartbeat task's next answer explodes

        async def admin_block(exploding):
            async with open_admin(tb, connector=exploding, metadata_max_age_ms=1000) as admin:
                await admin.list_topics()
                exploding.armed = True
                await trio.sleep_forever()

        async def client_block(exploding):
            async with client_core(tb, exploding, metadata_max_age_ms=1000) as client:
                await client.refresh_metadata()
                exploding.armed = True
                await trio.sleep_forever()

        async def connection_block(exploding):
            from trikafka.client.requests import make
            from trikafka.protocol.registry import ApiVersionSpec

            async with raw_connection(tb, exploding) as connection:
                exploding.armed = True
                body = make(
                    ApiVersionSpec.resolve(18, 3).request_type, client_software_name="t", client_software_version="1"
                )
                await connection.send_no_response(body)  # its answer arrives all the same
                await trio.sleep_forever()

        for block in (producer_block, consumer_block, admin_block, client_block, connection_block):
            with trio.fail_after(120):
                with pytest.raises(KafkaError) as raised:
                    await block(Exploding(tb))
            assert type(raised.value) is KafkaClientError, block.__name__
            assert "boom in the connection reader" in str(raised.value)
            assert isinstance(raised.value.__cause__, RuntimeError)


async def test_the_clients_own_kafka_error_leaves_as_itself(autojump_clock):
    """A transactional producer that cannot initialise: its KafkaError, not a group."""
    async with open_test_broker() as tb:
        tb.faults.inject_error("INIT_PRODUCER_ID", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
        with pytest.raises(KafkaError, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED") as raised:
            async with open_producer(tb, transactional_id="x"):
                raise AssertionError("not reached")
        assert not isinstance(raised.value, BaseExceptionGroup)
