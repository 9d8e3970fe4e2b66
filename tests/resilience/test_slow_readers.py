"""Slow readers on a big file-log topic: fetch answers that reference the log, not copy it.

The issue's row: 20 connections pipelining fetches on a 54 MB topic, reading slowly, drove
RSS from 67 MB to 1.03 GB. A muted connection holds one answer at a time, so what grew was
the answers' bytes. Here, on a smaller scale and measured with tracemalloc: 20 readers each
holding a 2 MiB answer cost the bytes when the log copies (the old path), and next to nothing
with :class:`~trikafka.log.slices.FileSlice` answers, which are read in bounded blocks (or by
``sendfile``) only as the reader takes them.
"""

from __future__ import annotations

import hashlib
import socket
import tracemalloc

from trikafka.log import FileLog, LogConfig
from trikafka.log.slices import BLOCK_SIZE, FileSlice
from trikafka.protocol.records import build_batch

READERS = 20
ANSWER = 2 * 1024 * 1024
MIB = 1024 * 1024


def _big_log(tmp_path) -> FileLog:
    log = FileLog.open(tmp_path, "big", 0, LogConfig(segment_bytes=64 * MIB))
    for i in range(200):  # ~20 MB of 100 KB batches
        log.append(bytearray(build_batch([(None, bytes([i % 251]) * 100_000, [], 1_700_000_000_000)])), leader_epoch=0)
    return log


def _held_by_readers(log: FileLog, file_slices: bool) -> int:
    """Bytes allocated while READERS answers are held, unread (the slow part)."""
    tracemalloc.start()
    try:
        answers = [
            log.read(i * 5, ANSWER, file_slices=file_slices) for i in range(READERS)
        ]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert all(a.size > ANSWER // 2 for a in answers)
    del answers
    return held


def test_held_answers_cost_references_not_bytes(tmp_path):
    log = _big_log(tmp_path)
    copied = _held_by_readers(log, file_slices=False)
    referenced = _held_by_readers(log, file_slices=True)
    assert copied > READERS * ANSWER // 2  # the old path: the answers' bytes
    assert referenced < 256 * 1024  # the new one: a descriptor and three ints per reader
    log.close()


def test_a_slice_is_read_in_bounded_blocks(tmp_path):
    log = _big_log(tmp_path)
    expected = [hashlib.sha256(log.read(i * 5, ANSWER).records).digest() for i in range(READERS)]
    answers = [log.read(i * 5, ANSWER, file_slices=True) for i in range(READERS)]
    readers = [iter(a.chunks[0].iter_blocks()) for a in answers]
    received = [hashlib.sha256() for _ in range(READERS)]
    tracemalloc.start()
    try:
        pending = set(range(READERS))
        while pending:  # every reader takes one block in turn: all slow, all at once
            for i in sorted(pending):
                block = next(readers[i], None)
                if block is None:
                    pending.discard(i)
                else:
                    received[i].update(block)  # what the socket took
                    del block
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [r.digest() for r in received] == expected
    assert peak < 4 * BLOCK_SIZE  # one block in flight, whatever the readers hold
    log.close()


def test_a_slice_survives_retention_and_sendfile_sends_it(tmp_path):
    log = FileLog.open(tmp_path, "t", 0, LogConfig(segment_bytes=300_000, retention_bytes=0))
    for i in range(10):
        log.append(bytearray(build_batch([(None, bytes([i]) * 100_000, [], 1_700_000_000_000)])), leader_epoch=0)
    answer = log.read(0, 10**6, file_slices=True)
    expected = log.read(0, 10**6).records
    (chunk,) = answer.chunks
    assert isinstance(chunk, FileSlice) and len(chunk) == len(expected)
    for segment in log.apply_retention(now_ms=0):
        segment.store.delete()  # the first segment's files are gone from the directory
    assert log.log_start_offset > 0
    left, right = socket.socketpair()
    try:
        left.setblocking(True)
        sent = 0
        received = bytearray()
        while sent < len(chunk):
            sent += chunk.sendfile(left.fileno(), sent, 64 * 1024)
            while len(received) < sent:
                received += right.recv(sent - len(received))
        assert bytes(received) == expected
    finally:
        left.close()
        right.close()
        chunk.close()
    log.close()


# --- end to end: slow readers of a broker over TCP -----------------------------------------

TOPIC_BYTES = 16 * MIB
SLOW_READERS = 8


async def test_slow_readers_of_a_file_log_broker_hold_no_copy_of_their_answers(tmp_path):
    """The issue's row on a small scale, end to end: a broker with file logs, readers over
    TCP that ask for 16 MiB each and then read nothing past the size prefix (what the
    kernel's socket buffers take is not the broker's memory). While they stall, the broker holds
    file references (sent with sendfile as the sockets drain), not the answers' bytes: the
    old path held SLOW_READERS x 16 MiB here. The one reader that does read gets every byte."""
    import trio

    from tests.server.test_topics_and_data import create_topic, fetch_request, produce
    from trikafka import open_broker
    from trikafka.client import connect_tcp
    from trikafka.protocol.headers import encode_request
    from trikafka.protocol.registry import ApiRegistry

    registry = ApiRegistry()
    async with open_broker(log_dirs=str(tmp_path)) as broker:
        async with connect_tcp("127.0.0.1", broker.port) as client:
            await create_topic(client, "big")
            for i in range(TOPIC_BYTES // 500_000):
                batch = build_batch([(None, bytes([i % 251]) * 500_000, [], 1_700_000_000_000)])
                answer = await produce(client, 9, "big", None, 0, batch)
                assert answer.responses[0].partition_responses[0].error_code == 0
        body = fetch_request(12, "big", None, 0, 0, max_bytes=TOPIC_BYTES * 2, partition_max_bytes=TOPIC_BYTES * 2)
        frame = encode_request(registry.get(1, 12), 7, body, "slow")
        readers = []
        for _ in range(SLOW_READERS):
            readers.append(socket.create_connection(("127.0.0.1", broker.port)))
        tracemalloc.start()
        try:
            for sock in readers:
                sock.sendall(frame)
            for sock in readers:  # each answer has begun: its size prefix arrived
                head = await trio.to_thread.run_sync(sock.recv, 4)
                assert int.from_bytes(head, "big") > 15 * MIB  # the whole topic
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert held < 4 * MIB, f"{held / MIB:.1f} MiB held for {SLOW_READERS} stalled readers"
        # One reader takes its whole answer: the slices' bytes are the log's.
        size = int.from_bytes(head, "big")

        def read_rest(sock: socket.socket) -> bytes:
            data = bytearray()
            while len(data) < size:
                chunk = sock.recv(1 << 20)
                assert chunk
                data += chunk
            return bytes(data)

        whole = await trio.to_thread.run_sync(read_rest, readers[-1])
        assert whole.count(bytes([7]) * 500_000) == 1  # batch 7's value, intact
        for sock in readers:
            sock.close()
