"""The console's sans-IO parts: how bytes are shown, assignments decoded, rates computed."""

from __future__ import annotations

import json
import struct

import pytest

from trikafka.console.app import BadRequest, parse_timestamp
from trikafka.console.rates import ApiCounters, RateSampler
from trikafka.console.render import (
    HEX_LIMIT,
    decode_assignment,
    format_bytes,
    format_timestamp,
    show_bytes,
)


def test_json_objects_and_arrays_are_pretty_printed():
    shown = show_bytes(b'{"id":7,"tags":["a","b"]}')
    assert shown.kind == "json"
    assert shown.text == json.dumps({"id": 7, "tags": ["a", "b"]}, indent=2)
    assert shown.size == 25
    assert show_bytes(b"[1,2]").kind == "json"


def test_text_that_only_looks_like_json_stays_text():
    assert show_bytes(b"{not json").kind == "text"
    assert show_bytes(b"42").kind == "text"  # a bare number is text: JSON is for documents
    assert show_bytes("héllo\twörld\n".encode()).text == "héllo\twörld\n"


def test_binary_and_control_characters_are_hex():
    shown = show_bytes(bytes([0, 1, 2, 255, 254]))
    assert (shown.kind, shown.text) == ("hex", "00 01 02 ff fe")
    # Valid UTF-8 that hides control characters is not shown as text.
    assert show_bytes(b"abc\x1b[31mred").kind == "hex"
    lines = show_bytes(bytes(range(40))).text.splitlines()
    assert lines[0] == " ".join(f"{b:02x}" for b in range(16)) and len(lines) == 3


def test_null_and_huge_values():
    assert show_bytes(None).kind == "null"
    assert show_bytes(b"").kind == "text"
    big = show_bytes(b"\xff" * (HEX_LIMIT + 10))
    assert big.text.endswith("… 10 more bytes") and big.size == HEX_LIMIT + 10


def _assignment(topics: dict[str, list[int]], user_data: bytes = b"") -> bytes:
    out = struct.pack(">hi", 1, len(topics))
    for topic, partitions in topics.items():
        out += struct.pack(">h", len(topic)) + topic.encode()
        out += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return out + struct.pack(">i", len(user_data)) + user_data


def test_consumer_assignments_decode_and_others_do_not():
    data = _assignment({"orders": [2, 0], "audit": [1]})
    assert decode_assignment("consumer", data) == (("audit", (1,)), ("orders", (0, 2)))
    assert decode_assignment("consumer", b"") == ()
    assert decode_assignment("connect", data) is None
    assert decode_assignment("consumer", data[:9]) is None  # cut inside a topic name


def test_sizes_and_timestamps():
    assert [format_bytes(n) for n in (0, 1023, 1536, 5 * 1024**3, -1)] == ["0 B", "1023 B", "1.5 KiB", "5.0 GiB", "—"]
    assert format_timestamp(1_700_000_000_123) == "2023-11-14 22:13:20.123Z"
    assert format_timestamp(-1) == "—"


def test_timestamps_in_the_record_browser():
    assert parse_timestamp("1700000000123") == 1_700_000_000_123
    assert parse_timestamp("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T22:13:20") == 1_700_000_000_000  # no zone: UTC
    assert parse_timestamp("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    with pytest.raises(BadRequest, match="timestamp='yesterday'.*epoch milliseconds or ISO 8601"):
        parse_timestamp("yesterday")


def test_rates_are_the_difference_of_samples_over_the_window():
    sampler = RateSampler(window=5.0)
    first = sampler.sample(100.0, {"Produce": ApiCounters(10, 0.5, 2.0)})
    assert first[0].per_second is None and first[0].requests == 10  # one sample: no rate yet
    second = sampler.sample(102.0, {"Produce": ApiCounters(30, 0.5, 2.0), "Fetch": ApiCounters(4, 1.0, 9.0)})
    assert [(r.api, r.per_second) for r in second] == [("Produce", 10.0), ("Fetch", 2.0)]
    for t in (103.0, 104.0, 105.0, 106.0, 107.0):
        sampler.sample(t, {"Produce": ApiCounters(30 + int(t - 102) * 50, 0.5, 2.0)})
    # At 108 the baseline is the newest sample at or before 103 (the window's start).
    last = sampler.sample(108.0, {"Produce": ApiCounters(330, 0.5, 2.0)})
    assert last[0].per_second == pytest.approx((330 - 80) / 5.0)
    with pytest.raises(ValueError, match="older than the last one"):
        sampler.sample(50.0, {})
