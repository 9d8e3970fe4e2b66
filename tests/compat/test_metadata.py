"""Real clients read the cluster's metadata from a real broker process over real sockets."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import struct
import subprocess

import pytest
import trio
from kio.schema.api_versions.v3.request import ApiVersionsRequest

import trikafka
from trikafka.client import open_connection
from trikafka.errors import ErrorCode
from trikafka.testing.frames import api_versions_frame, api_versions_response

pytestmark = [
    pytest.mark.compat,
    # kafka-python's schema loading, not ours.
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

CLIENT_TIMEOUT = 30
# Kafka's cluster id: a UUID in URL-safe base64 without padding.
CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def test_banner_reports_a_kafka_style_cluster_id(broker_process):
    assert broker_process.cluster_id is not None
    assert CLUSTER_ID.match(broker_process.cluster_id)
    assert broker_process.port > 0


def test_kcat_lists_one_broker(broker_process):
    kcat = shutil.which("kcat") or "/usr/bin/kcat"
    result = subprocess.run(
        [kcat, "-L", "-b", broker_process.address, "-J", "-m", "10"],
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    metadata = json.loads(result.stdout)
    assert metadata["brokers"] == [{"id": 1, "name": broker_process.address}]
    assert metadata["controllerid"] == 1
    assert metadata["originating_broker"]["id"] == 1
    assert metadata["topics"] == []


def test_confluent_kafka_admin_sees_the_cluster(broker_process):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {"bootstrap.servers": broker_process.address, "client.id": "trikafka-compat"}
    )
    metadata = admin.list_topics(timeout=10)
    assert list(metadata.brokers) == [1]
    broker = metadata.brokers[1]
    assert (broker.id, broker.host, broker.port) == (1, "127.0.0.1", broker_process.port)
    assert CLUSTER_ID.match(metadata.cluster_id)
    assert metadata.cluster_id == broker_process.cluster_id
    assert metadata.controller_id == 1
    assert metadata.topics == {}


def test_kafka_python_describe_cluster(broker_process):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=broker_process.address,
        client_id="trikafka-compat",
        request_timeout_ms=10_000,
    )
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert cluster["cluster_id"] == broker_process.cluster_id
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
        (1, "127.0.0.1", broker_process.port)
    ]


def test_aiokafka_describe_cluster(broker_process):
    from aiokafka.admin import AIOKafkaAdminClient

    async def describe() -> dict:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=broker_process.address,
            client_id="trikafka-compat",
            request_timeout_ms=10_000,
        )
        await admin.start()
        try:
            return await admin.describe_cluster()
        finally:
            await admin.close()

    async def bounded() -> dict:
        return await asyncio.wait_for(describe(), CLIENT_TIMEOUT)

    cluster = asyncio.run(bounded())
    assert cluster["cluster_id"] == broker_process.cluster_id
    assert cluster["controller_id"] == 1
    assert [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
        (1, "127.0.0.1", broker_process.port)
    ]


async def test_accepted_socket_has_nodelay_and_kafkas_buffer_sizes():
    """trio's SocketStream sets TCP_NODELAY itself; the broker applies
    socket.send/receive.buffer.bytes (Kafka's 102400, not the dev default's OS buffers; Linux
    reports double)."""
    with trio.fail_after(10):
        async with trikafka.open_broker(listeners="PLAINTEXT://127.0.0.1:0", kafka_defaults=True) as broker:
            stream = await trio.open_tcp_stream("127.0.0.1", broker.port)
            async with open_connection(stream) as client:
                response = await client.request(
                    ApiVersionsRequest(
                        client_software_name="trikafka-compat", client_software_version="1"
                    )
                )
                assert response.error_code == ErrorCode.none
                # The answer came back, so the server side has its connection registered.
                connections = [
                    connection
                    for processor in broker.path.socket_server.all_processors()
                    for connection in processor.connections.values()
                ]
                assert len(connections) == 1
                server_socket = connections[0].stream.socket
                assert server_socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
                assert server_socket.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) >= 102400
                assert server_socket.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) >= 102400
                assert broker.config.socket_receive_buffer_bytes == 102400


def _read_frame(sock: socket.socket) -> bytes:
    def read_exactly(count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            assert chunk, "the broker closed the connection mid-frame"
            data += chunk
        return data

    (size,) = struct.unpack(">i", read_exactly(4))
    return read_exactly(size)


def test_sigterm_stops_gracefully(start_broker_process):
    """SIGTERM: the broker closes a live client connection, logs that it stopped, exits 0."""
    broker = start_broker_process()
    with socket.create_connection((broker.host, broker.port), timeout=10) as client:
        client.sendall(api_versions_frame(7))
        correlation_id, response = api_versions_response(_read_frame(client))
        assert correlation_id == 7
        assert response.error_code == ErrorCode.none
        code = broker.stop()
        assert client.recv(1) == b""  # closed by the broker, not left hanging
    output = broker.output
    assert code == 0, output
    assert "SIGTERM: stopping gracefully" in output
    assert re.search(r"broker 1 stopped\s*$", output, re.MULTILINE), output
