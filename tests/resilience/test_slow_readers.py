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
