"""A broker process with few file descriptors: many partitions, many connections.

The issue's row: CreateTopics of 1,500 partitions on file logs with ``ulimit -n`` 1024 killed
the broker (EMFILE). Here the child gets a hard *and* soft ``RLIMIT_NOFILE`` of 256 (so
raising the soft limit at start cannot help) and must create, fill and serve 1,500
partitions, survive more connections than it has descriptors, and restart after kill -9.
"""

from __future__ import annotations

import os
import resource
import socket
from pathlib import Path

import trio

from trikafka.client.connection import connect_tcp
from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch
from trikafka.testing.process import BrokerProcess, broker_process

from ..server.test_topics_and_data import create_topic, fetch_request, produce, records_of, request

NOFILE = 256
PARTITIONS = 1500


def _low_nofile() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def _bounded(seconds: float, fn, *args) -> None:
    with trio.fail_after(seconds):
        await fn(*args)


async def _fill(port: int) -> None:
    async with connect_tcp("127.0.0.1", port) as client:
        created = await create_topic(client, "wide", partitions=PARTITIONS)
        assert created.error_code == ErrorCode.none, created
        for partition in range(PARTITIONS):
            batch = build_batch([(b"k", b"p%d" % partition, [], 1_700_000_000_000)])
            answer = await produce(client, 9, "wide", None, partition, batch)
            assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none


async def _read_back(port: int, partitions: range) -> None:
    async with connect_tcp("127.0.0.1", port) as client:
        for partition in partitions:
            answer = await client.request(fetch_request(12, "wide", None, partition, 0))
            data = answer.responses[0].partitions[0].records
            assert records_of(data) == [(0, b"k", b"p%d" % partition)]


def test_1500_partitions_with_256_descriptors(tmp_path: Path):
    data = tmp_path / "data"
    with broker_process("--data-dir", str(data), cwd=tmp_path, preexec_fn=_low_nofile) as broker:
        pid = broker.process.pid
        assert f"open file limit (RLIMIT_NOFILE): {NOFILE}" in broker.output
        trio.run(_bounded, 240, _fill, broker.port)
        assert _open_fds(pid) < NOFILE
        trio.run(_bounded, 60, _read_back, broker.port, range(0, PARTITIONS, 7))
        assert _open_fds(pid) < NOFILE
        assert broker.process.poll() is None
        broker.kill()  # a crash: the next start recovers all 1,500 partitions

    restarted = BrokerProcess("--data-dir", str(data), cwd=tmp_path, preexec_fn=_low_nofile)
    try:
        restarted.wait_ready()
        trio.run(_bounded, 60, _read_back, restarted.port, range(3, PARTITIONS, 11))
        assert _open_fds(restarted.process.pid) < NOFILE
        assert restarted.stop() == 0, restarted.output
    finally:
        restarted.kill()
    assert "Traceback" not in restarted.output


def test_more_connections_than_descriptors(tmp_path: Path):
    """Past the limit accept fails with EMFILE: the broker backs off, logs it once, and
    serves again as soon as connections close."""
    with broker_process("--data-dir", str(tmp_path / "d"), cwd=tmp_path, preexec_fn=_low_nofile) as broker:
        # The kernel's backlog takes what accept cannot, so all of these connect.
        hogs = [socket.create_connection(("127.0.0.1", broker.port), timeout=10) for _ in range(NOFILE + 50)]
        broker.wait_for_output("accept failed ([Errno 24] Too many open files)", 60)
        for hog in hogs:
            hog.close()

        async def still_serving() -> None:
            async with connect_tcp("127.0.0.1", broker.port) as client:
                versions = await client.request(
                    request(18, 3, client_software_name="t", client_software_version="1")
                )
                assert versions.error_code == ErrorCode.none

        trio.run(_bounded, 60, still_serving)
        assert broker.process.poll() is None
        assert broker.output.count("accept failed") == 1  # one line for the episode
        assert "Traceback" not in broker.output
