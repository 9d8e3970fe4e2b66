"""FrameDecoder's large frames: the buffer grows with the bytes that arrive, not the prefix.

Issue 33: a client that declared 100 MB and sent four bytes made the broker allocate (and
zero) 100 MB. Pure bytes, measured with tracemalloc (deterministic: Python's own allocator).
"""

from __future__ import annotations

import random
import struct
import tracemalloc

import pytest

from trikafka.protocol.framing import FIRST_CHUNK, MAX_GROWTH, NEED_DATA, FrameDecoder, encode_frame

MB = 1024 * 1024


def _traced(work):
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = work()
        now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, now - before, peak - before


def test_a_100_mb_prefix_and_four_bytes_cost_kilobytes():
    def declare():
        decoder = FrameDecoder(max_size=200 * MB)
        decoder.receive_data(struct.pack(">i", 100 * MB) + b"abcd")
        assert decoder.next_frame() is NEED_DATA
        assert decoder.pending_size == 100 * MB
        view = decoder.unfilled()
        assert view is not None and len(view) <= FIRST_CHUNK
        del view
        return decoder

    decoder, held, peak = _traced(declare)
    assert decoder.allocated <= FIRST_CHUNK + 8
    assert peak < 4 * FIRST_CHUNK, f"{peak} bytes traced for a 4-byte body"
    assert held < 4 * FIRST_CHUNK


@pytest.mark.parametrize("receive_into", [True, False])
def test_a_large_frame_grows_by_bounded_steps_and_arrives_whole(receive_into):
    payload = random.Random(33).randbytes(5 * MB + 17)
    stream = encode_frame(payload) + encode_frame(b"next")
    decoder = FrameDecoder(max_size=8 * MB)
    rng = random.Random(7)
    sizes = []
    pos = 0
    frames = []
    while pos < len(stream):
        view = decoder.unfilled() if receive_into else None
        if view is not None:
            take = min(len(view), len(stream) - pos)
            view[:take] = stream[pos : pos + take]
            del view  # dropped before the next call: the buffer grows in place
            decoder.received_into(take)
        else:
            take = rng.randint(1, 300_000)
            decoder.receive_data(stream[pos : pos + take])
        pos += take
        sizes.append(decoder.allocated)
        while (frame := decoder.next_frame()) is not NEED_DATA:
            frames.append(bytes(frame))
    assert frames == [payload, b"next"]
    # Never more than twice what arrived (plus a read), never a jump of more than MAX_GROWTH.
    steps = [b - a for a, b in zip(sizes, sizes[1:], strict=False)]
    assert max(steps) <= MAX_GROWTH + 300_000


def test_the_spare_buffer_is_reused_for_the_next_large_frame():
    """The speed win kept: a frame that fits the last one's buffer allocates nothing."""
    decoder = FrameDecoder(max_size=8 * MB)
    first = encode_frame(b"a" * MB)
    decoder.receive_data(first)
    frame = decoder.next_frame()
    assert bytes(frame) == b"a" * MB
    del frame

    def second():
        decoder.receive_data(encode_frame(b"b" * (MB - 10)))
        return bytes(decoder.next_frame()[:1])

    head, held, peak = _traced(second)
    assert head == b"b"
    assert peak < 2 * MB + 64 * 1024  # the chunk handed in and the bytes() copy, no new buffer


def test_a_view_kept_across_calls_costs_a_copy_not_an_error():
    decoder = FrameDecoder(max_size=8 * MB)
    payload = bytes(range(256)) * (3 * MB // 256)
    stream = encode_frame(payload)
    decoder.receive_data(stream[:4])
    assert decoder.next_frame() is NEED_DATA
    pos = 4
    kept = []
    while pos < len(stream):
        view = decoder.unfilled()
        take = min(len(view), len(stream) - pos)
        view[:take] = stream[pos : pos + take]
        kept.append(view)  # a careless caller: the next growth cannot be in place
        decoder.received_into(take)
        pos += take
    assert bytes(decoder.next_frame()) == payload


def test_after_one_whole_large_frame_a_claim_up_to_keep_spare_is_taken_at_once():
    """The produce path's speed: a client that has sent a large frame gets its next one's
    buffer whole (bounded by keep_spare, what it may hold as a spare anyway); a larger claim
    still grows with what arrives."""
    decoder = FrameDecoder(max_size=200 * MB, keep_spare=4 * MB)
    decoder.receive_data(encode_frame(b"a" * 100_000))
    assert bytes(decoder.next_frame()) == b"a" * 100_000
    decoder.receive_data(struct.pack(">i", 3 * MB))
    assert decoder.next_frame() is NEED_DATA
    assert 3 * MB <= decoder.allocated <= 3 * MB + 8  # taken at once; the old spare let go
    decoder.receive_data(b"b" * (3 * MB))
    assert bytes(decoder.next_frame()[:1]) == b"b"
    decoder.receive_data(struct.pack(">i", 100 * MB))
    assert decoder.next_frame() is NEED_DATA
    assert decoder.allocated <= 3 * MB + FIRST_CHUNK + 8  # the spare, and a first chunk


def test_a_client_trusting_its_broker_receives_a_large_answer_into_one_buffer():
    """trust_sizes (the client's decoder): the declared size is allocated at once, so the
    whole body is received into one view, and a kept spare serves the next answer."""
    body = random.randbytes(3 * MB)
    decoder = FrameDecoder(max_size=2**31 - 1, keep_spare=8 * MB, trust_sizes=True)
    for _ in range(2):
        decoder.receive_data(struct.pack(">i", len(body)) + body[:10])
        assert decoder.next_frame() is NEED_DATA
        view = decoder.unfilled()
        assert view is not None and len(view) == len(body) - 10
        view[:] = body[10:]
        del view
        decoder.received_into(len(body) - 10)
        frame = decoder.next_frame()
        assert bytes(frame) == body
        del frame
