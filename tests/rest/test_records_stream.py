"""v3 produce's stream: the sans-IO splitter, and answers written while the request streams."""

from __future__ import annotations

import json
import socket

from hypothesis import given, settings
from hypothesis import strategies as st

from trikafka.rest.errors import RestError
from trikafka.rest.records import JsonValues

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
RECORDS = st.lists(st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=3), min_size=1, max_size=5)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@settings(derandomize=True, max_examples=200, deadline=None)
@given(records=RECORDS, spaces=st.lists(st.sampled_from(["", " ", "\n", "\r\n", "\t "]), min_size=6, max_size=6),
       cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
def test_values_split_at_any_byte_come_out_whole_and_in_order(records, spaces, cuts):
    text = "".join(spaces[i % len(spaces)] + json.dumps(r, ensure_ascii=False) for i, r in enumerate(records))
    text += spaces[-1]
    values = JsonValues()
    found = []
    for chunk in split(text.encode(), cuts):
        found += values.feed(chunk)
    found += values.finish()
    assert found == records


def test_a_value_that_is_not_json_is_an_error_in_its_place_and_the_next_is_read():
    values = JsonValues()
    found = values.feed(b'{"a": 1} {x} 12 "s\\"}" [1, {"b": "]"}]') + values.finish()
    assert found[0] == {"a": 1} and found[2:] == [12, 's"}', [1, {"b": "]"}]]
    assert isinstance(found[1], RestError) and found[1].status == 400 and "record 1: not JSON" in found[1].message
    cut = JsonValues()
    assert cut.feed(b'{"a": ') == []
    [error] = cut.finish()
    assert isinstance(error, RestError) and "the body ended inside it" in error.message


def test_a_value_over_the_limit_ends_the_stream():
    values = JsonValues(limit=10)
    try:
        values.feed(b'{"a": "' + b"x" * 20)
    except RestError as exc:
        assert exc.status == 413
    else:
        raise AssertionError("no 413")


def _read_line(sock: socket.socket, buffer: bytearray) -> bytes:
    while b"\n" not in buffer:
        data = sock.recv(65536)
        assert data, "the proxy closed the connection"
        buffer += data
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line


def test_each_record_is_answered_while_the_request_still_streams(proxy_server):
    """The second record is sent only after the first one's answer has been read."""
    host, port = proxy_server.url.removeprefix("http://").split(":")
    path = f"/v3/clusters/{proxy_server.cluster_id}/topics/live-stream/records"
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )

        def chunk(data: bytes) -> bytes:
            return f"{len(data):x}\r\n".encode() + data + b"\r\n"

        sock.sendall(chunk(b'{"value": {"type": "JSON", "data": 1}}\n'))
        buffer = bytearray()
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert head.startswith(b"HTTP/1.1 200")
        # Chunked answer: a size line, then the data line; read through the size lines.
        answers = []
        while len(answers) < 1:
            line = _read_line(sock, buffer).strip()
            if line.startswith(b"{"):
                answers.append(json.loads(line))
        assert answers[0]["error_code"] == 200 and answers[0]["offset"] == 0
        sock.sendall(chunk(b'{"value": {"type": "BINARY", "data": "!!"}}{"value": {"type": "STRING", "data": "x"}}'))
        sock.sendall(b"0\r\n\r\n")
        while len(answers) < 3:
            line = _read_line(sock, buffer).strip()
            if line.startswith(b"{"):
                answers.append(json.loads(line))
    assert [a["error_code"] for a in answers] == [200, 42203, 200]
    assert answers[2]["offset"] == 1
