"""A closed connection is freed by reference counting alone (issue 33).

With the cyclic garbage collector off, a connection that was served and closed — plaintext,
TLS and SASL — leaves nothing behind: its Connection, its sans-IO state and frame decoder,
its authenticator, transport and response channel are gone (weakrefs die) and the
memory its buffers held (a 1 MiB produce's reused frame buffer) is back (tracemalloc).
An object holding a reference back to its connection (as an authentication helper once
did) would leave a gigabyte of frame buffers waiting for the collector. In-memory transport, MockClock.
"""

from __future__ import annotations

import gc
import tracemalloc
import weakref

import pytest
import trio
import trio.testing

from trikafka.broker import open_broker
from trikafka.errors import ErrorCode
from trikafka.protocol.entities import build
from trikafka.protocol.headers import encode_request
from trikafka.protocol.records import build_batch
from trikafka.protocol.registry import ApiRegistry
from trikafka.testing.frames import api_versions_frame, api_versions_response, read_frames
from trikafka.testing.memory import MemoryListener

from .test_sasl import CONFIG as SASL_CONFIG
from .test_sasl import PASSWORD, authenticate
from .test_tls import client_context

REGISTRY = ApiRegistry()
MB = 1024 * 1024
#: A bounded request memory pool: every byte a connection reserved is back once it closed.
POOL = {"queued.max.request.bytes": 16 * MB}


def _produce_frame(value_size: int) -> bytes:
    """A Produce v9 to a topic that does not exist: answered, and its 1 MiB frame read whole."""
    batch = build_batch([(b"k", b"v" * value_size, [], 1_700_000_000_000)])
    body = build(
        REGISTRY.get(0, 9).request_type, transactional_id=None, acks=1, timeout=1000,
        topic_data=[{"name": "absent", "partition_data": [{"index": 0, "records": batch}]}],
    )
    return encode_request(REGISTRY.get(0, 9), 2, body, "freed")


def _parts(connection) -> list[weakref.ref]:
    """Weak references to everything a connection is made of (what supports them)."""
    objects = [
        connection, connection.protocol, connection.protocol._decoder,
        connection.transport, connection.stream, connection.response_receive, connection.response_send,
        connection.authenticator,
    ]
    return [weakref.ref(o) for o in objects if o is not None]


@pytest.fixture
def no_gc():
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def _serve_and_close(broker, listener_name: str, connect, before_requests=None) -> list[weakref.ref]:
    processors = broker.path.socket_server.processors[listener_name]
    stream = await connect()
    if before_requests is not None:
        await before_requests(stream)
    await stream.send_all(api_versions_frame(1))
    (raw,) = await read_frames(stream, 1)
    assert api_versions_response(raw)[0] == 1
    await stream.send_all(_produce_frame(MB))  # a large frame: the decoder keeps a spare buffer
    await read_frames(stream, 1)
    (connection,) = [c for p in processors for c in p.connections.values()]
    assert connection.protocol._decoder.allocated >= MB  # the spare buffer is held now
    refs = _parts(connection)
    del connection
    await stream.aclose()
    await trio.testing.wait_all_tasks_blocked()
    assert not any(p.connections for p in processors)
    return refs


async def _check_freed(broker, listener_name, connect, before_requests=None) -> None:
    await _serve_and_close(broker, listener_name, connect, before_requests)  # warm caches up
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        refs = await _serve_and_close(broker, listener_name, connect, before_requests)
        await trio.testing.wait_all_tasks_blocked()
        left = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    alive = [r() for r in refs if r() is not None]
    holders = [type(r).__name__ for obj in alive for r in gc.get_referrers(obj) if r is not alive]
    assert not alive, f"survived the close without the garbage collector: {alive}, held by {holders}"
    assert left < 256 * 1024, f"{left} bytes still held after the connection closed"
    stats = broker.path.request_channel.statistics()
    assert (stats.memory_pool_used, stats.memory_pool_high_water > 0) == (0, True)


async def test_a_plaintext_connection_is_freed_without_the_collector(no_gc, autojump_clock):
    listener = MemoryListener("memory", 9092)
    config = {"listeners": "PLAINTEXT://memory:9092", "socket.request.max.bytes": 4 * MB, **POOL}
    async with open_broker(config, trio_listeners={"PLAINTEXT": listener}) as broker:
        await _check_freed(broker, "PLAINTEXT", lambda: listener.connect("10.0.0.1"))


async def test_a_tls_connection_is_freed_without_the_collector(no_gc, ca, ssl_config, autojump_clock):
    listener = MemoryListener("memory", 9093)
    config = {**ssl_config, "listeners": "SSL://memory:9093", "socket.request.max.bytes": 4 * MB, **POOL}

    async def connect():
        raw = await listener.connect("10.0.0.2")
        return trio.SSLStream(raw, client_context(ca), server_hostname="localhost")

    async with open_broker(config, trio_listeners={"SSL": listener}) as broker:
        await _check_freed(broker, "SSL", connect)


async def test_a_sasl_connection_is_freed_without_the_collector(no_gc, autojump_clock):
    listener = MemoryListener("memory", 9092)
    config = {**SASL_CONFIG, "socket.request.max.bytes": 4 * MB, **POOL}

    async def login(stream):
        assert (await authenticate(stream, "SCRAM-SHA-512", PASSWORD)).error_code == ErrorCode.none

    async with open_broker(config, trio_listeners={"SASL_PLAINTEXT": listener}) as broker:
        await _check_freed(broker, "SASL_PLAINTEXT", lambda: listener.connect("10.0.0.3"), login)
