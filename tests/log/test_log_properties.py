"""Property tests of the logs, deterministic (``derandomize``) and small.

Hypothesis runs one test function many times, so function-scoped fixtures (``tmp_path``) do
not fit: each example makes its own temporary directory.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import ExitStack

from hypothesis import given, settings
from hypothesis import strategies as st

from trikafka.log import FileLog, Log, LogConfig, MemoryLog
from trikafka.log.file import segment_file_name

from .log_conformance import FakeClock, batch, decode, headers_of

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None, max_examples=50)

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.lists(st.integers(1, 3), min_size=1, max_size=3),
            st.integers(0, 30),
        ),
        st.tuples(st.just("read"), st.floats(0, 1), st.integers(0, 400)),
        st.tuples(st.just("roll")),
        st.tuples(st.just("delete_records"), st.floats(0, 1)),
        st.tuples(st.just("retention"), st.integers(0, 3000)),
    ),
    max_size=25,
)


def open_log(kind: str, stack: ExitStack, config: LogConfig, clock: FakeClock) -> Log:
    if kind == "memory":
        log: Log = MemoryLog("p", 0, config, clock=clock)
    else:
        directory = stack.enter_context(tempfile.TemporaryDirectory())
        log = FileLog.open(directory, "p", 0, config, clock=clock)
    stack.callback(log.close)
    return log


@DETERMINISTIC
@given(st.sampled_from(["memory", "file"]), operations)
def test_offsets_stay_dense_and_monotonic(kind, ops):
    clock = FakeClock()
    config = LogConfig(segment_bytes=600, index_interval_bytes=64, retention_bytes=1200)
    with ExitStack() as stack:
        log = open_log(kind, stack, config, clock)
        for op in ops:
            clock.advance(100)
            start, end = log.log_start_offset, log.log_end_offset
            if op[0] == "append":
                data = bytearray().join(batch(n, timestamp=int(clock()), size=op[2]) for n in op[1])
                info = log.append(data, leader_epoch=1)
                assert info.first_offset == end
                assert info.last_offset == end + sum(op[1]) - 1 == log.log_end_offset - 1
            elif op[0] == "read":
                offset = start + int(op[1] * (end - start))
                fetched = log.read(offset, op[2])
                if offset < end:
                    found = headers_of(fetched.records)
                    assert found[0].base_offset <= offset <= found[0].last_offset
                    offsets = [r.offset for r in decode(fetched.records)]
                    assert offsets == list(range(found[0].base_offset, offsets[-1] + 1))
                    # As many whole batches as fit, and one at least (KIP-74).
                    assert fetched.size <= op[2] or len(found) == 1
                    segment = next(s for s in reversed(log.segments) if s.base_offset <= offset)
                    following = segment.find_batch(found[-1].next_offset)
                    assert following is None or fetched.size + following.size > op[2]
                else:
                    assert fetched.chunks == ()
            elif op[0] == "roll":
                log.roll()
            elif op[0] == "delete_records":
                log.delete_records_before(start + int(op[1] * (end - start)))
            else:
                for segment in log.apply_retention(clock() + op[1]):
                    segment.store.delete()
            assert log.log_end_offset >= end and log.log_start_offset >= start
            assert log.log_start_offset <= log.log_end_offset == log.high_watermark.value
            bases = [s.base_offset for s in log.segments]
            assert bases == sorted(bases) and bases[0] <= log.log_start_offset
            assert all(
                a.next_offset <= b.base_offset
                for a, b in zip(log.segments, log.segments[1:], strict=False)
            )
        if log.log_end_offset > log.log_start_offset:
            everything = []
            offset = log.log_start_offset
            while offset < log.log_end_offset:
                records = decode(log.read(offset, 10**6).records)
                everything += [r.offset for r in records if r.offset >= offset]
                offset = records[-1].offset + 1
            assert everything == list(range(log.log_start_offset, log.log_end_offset))


@DETERMINISTIC
@given(
    st.lists(st.integers(1, 3), min_size=1, max_size=12),
    st.floats(0, 1),
    st.booleans(),
)
def test_recovery_keeps_exactly_the_whole_batches_before_any_cut(counts, where, garbage):
    clock = FakeClock()
    config = LogConfig(segment_bytes=500, index_interval_bytes=64)
    with tempfile.TemporaryDirectory() as directory:
        log = FileLog.open(directory, "p", 0, config, clock=clock)
        for i, n in enumerate(counts):
            log.append(batch(n, timestamp=i, size=i * 3), leader_epoch=0)
        active = log.active_segment
        ends = [(h.end, h.next_offset) for h in active.scan()]
        log.close()
        path = log.directory / segment_file_name(active.base_offset)
        size = os.path.getsize(path)
        cut = int(where * size)
        os.truncate(path, cut)
        if garbage:  # a torn write may leave junk, not just a short file
            with open(path, "ab") as f:
                # Every batch ends with a record's header count, 0: 0xff cannot complete one.
                f.write(b"\xff" * 40)
        again = FileLog.open(directory, "p", 0, config, clock=clock)
        kept = [(end, offset) for end, offset in ends if end <= cut]
        expected_end = kept[-1][1] if kept else active.base_offset
        assert again.log_end_offset == expected_end
        assert again.active_segment.size == (kept[-1][0] if kept else 0)
        assert os.path.getsize(path) == again.active_segment.size
        if expected_end > again.log_start_offset:
            last = decode(again.read(expected_end - 1, 1).records)
            assert last[-1].offset == expected_end - 1
        assert again.read(expected_end, 100).chunks == ()
        assert again.append(batch(1), leader_epoch=1).first_offset == expected_end
        again.close()
