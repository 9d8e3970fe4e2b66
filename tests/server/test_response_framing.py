"""How a handler's answer becomes bytes for the connection (``kafka_apis.to_response``).

A response below SCATTER_GATHER_BYTES is joined into one buffer (one small write); a larger
one keeps its parts (header, record chunks) so the connection writes them scatter-gather
without copying the records. The threshold counts the whole frame, size prefix included.
"""

from __future__ import annotations

import types
import uuid

import pytest

from trikafka.errors import ErrorCode
from trikafka.network.request_channel import SendResponse
from trikafka.protocol.headers import decode_response
from trikafka.protocol.records import build_batch
from trikafka.protocol.registry import ApiRegistry
from trikafka.server.kafka_apis import SCATTER_GATHER_BYTES, Answer, to_response

SPEC = ApiRegistry().get(1, 16)
TOPIC_ID = uuid.UUID(int=7)


def _fetch_answer(chunks: list[bytes]) -> Answer:
    partition = {
        "partition_index": 0,
        "error_code": ErrorCode.none,
        "high_watermark": 10,
        "last_stable_offset": 10,
        "log_start_offset": 0,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": chunks,
    }
    return Answer(
        throttle_time=0,
        error_code=ErrorCode.none,
        session_id=0,
        responses=[{"topic_id": TOPIC_ID, "partitions": [partition]}],
    )


def _frame_size(records: int) -> int:
    """The whole frame's size for an answer with ``records`` record bytes."""
    frame = to_response(types.SimpleNamespace(spec=SPEC, correlation_id=1), _fetch_answer([b"x" * records])).data
    return len(frame) if isinstance(frame, bytes) else sum(map(len, frame))


@pytest.mark.parametrize("over", [-1, 0])
def test_a_frame_reaching_the_threshold_keeps_its_parts_and_a_smaller_one_is_joined(over):
    batch = build_batch([(None, b"v" * 100, (), 1)])
    near = SCATTER_GATHER_BYTES - 200  # the records' length varint as long as in the test
    overhead = _frame_size(near) - near
    filler = SCATTER_GATHER_BYTES + over - overhead - 2 * len(batch)
    chunks = [batch, b"\0" * filler, batch]  # record bytes as a log hands them over
    response = to_response(types.SimpleNamespace(spec=SPEC, correlation_id=9), _fetch_answer(chunks))
    assert isinstance(response, SendResponse)
    data = response.data
    if over < 0:
        assert isinstance(data, bytes) and len(data) == SCATTER_GATHER_BYTES - 1
    else:
        assert isinstance(data, tuple) and sum(map(len, data)) == SCATTER_GATHER_BYTES
        assert any(part is chunks[1] for part in data)  # the chunk itself, not a copy
        data = b"".join(data)
    correlation_id, body = decode_response(SPEC, data[4:])
    assert correlation_id == 9
    assert bytes(body.responses[0].partitions[0].records) == b"".join(chunks)
