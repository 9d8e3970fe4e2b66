"""The commands' pure parts: kcat's format tokens, --from, top's rates and its Prometheus reader."""

from __future__ import annotations

import datetime
import struct

import pytest

from trikafka.client import ConsumerRecord
from trikafka.commands.common import UsageError
from trikafka.commands.consume import parse_from, record_json, render
from trikafka.commands.top import human_bytes
from trikafka.commands.top import render as render_top
from trikafka.commands.top_model import ApiTimes, GroupRow, Snapshot, TopicRow, TopView
from trikafka.commands.top_sources import parse_prometheus


def _record(**changes):
    fields = {"topic": "t", "partition": 2, "offset": 41, "timestamp": 1700000000123, "timestamp_type": 0,
              "key": b"k", "value": b"v\xff", "headers": (("a", b"1"), ("b", None))}
    return ConsumerRecord(**{**fields, **changes})


def test_kcat_tokens():
    record = _record()
    assert render(rb"%t %p %o %T %k %s %S %K %h\n", record) == b"t 2 41 1700000000123 k v\xff 2 1 a=1,b=\n"
    assert render(b"%R", record) == struct.pack(">i", 2)
    assert render(b"%%s\\t\\x41", record) == b"%s\tA"
    empty = _record(key=None, value=None, headers=())
    assert render(b"[%k][%s] %K %S %h", empty) == b"[][] -1 -1 "
    assert render(b"%R", empty) == struct.pack(">i", -1)


def test_record_json_keeps_binary_as_base64():
    row = record_json(_record())
    assert row["value"] == "base64:dv8=" and row["key"] == "k" and row["headers"] == [["a", "1"], ["b", None]]


def test_from():
    assert parse_from("beginning") == ("beginning", 0)
    assert parse_from("end") == ("end", 0)
    assert parse_from("42") == ("offset", 42)
    assert parse_from("-5") == ("relative", -5)
    assert parse_from("s@1700000000000") == ("timestamp", 1700000000000)
    assert parse_from("@1700000000000") == ("timestamp", 1700000000000)
    utc = datetime.datetime(2026, 11, 25, 10, 0, tzinfo=datetime.UTC)
    assert parse_from("2026-11-25T10:00:00Z") == ("timestamp", int(utc.timestamp() * 1000))
    assert parse_from("2026-11-25T10:00:00") == ("timestamp", int(utc.timestamp() * 1000))  # no zone: UTC
    assert parse_from("2026-11-25T11:00:00+01:00") == ("timestamp", int(utc.timestamp() * 1000))
    with pytest.raises(UsageError, match="--from 'soon'"):
        parse_from("soon")


def _snapshot(at: float, end: int, produce_requests: int, bytes_in: int | None = None) -> Snapshot:
    return Snapshot(
        at=at,
        cluster_id="c",
        controller=1,
        brokers=1,
        topics=(TopicRow("orders", 3, 1024, end),),
        groups=(GroupRow("g", "Stable", 2, 7),),
        requests={
            "Produce": ApiTimes(
                produce_requests, 1.0, 9.0, {"queue": 0.1, "local": 0.5, "remote": 0.0, "resp-queue": 0.1, "send": 0.2}
            )
        },
        connections={"PLAINTEXT": 3},
        bytes_in=bytes_in,
        metrics_source="test",
    )


def test_top_rates_come_from_two_snapshots():
    model = TopView()
    first = model.update(_snapshot(10.0, 100, 50, 1000))
    assert first.requests_per_s == {} and first.topics[0].messages_per_s is None and first.bytes_in_per_s is None
    second = model.update(_snapshot(12.0, 300, 70, 5000))
    assert second.requests_per_s == {"Produce": 10.0}
    assert second.topics[0].messages_per_s == 100.0
    assert second.bytes_in_per_s == 2000.0
    assert second.as_json()["requests"]["Produce"]["per_s"] == 10.0


def test_top_draws_every_panel():
    from rich.console import Console

    model = TopView()
    model.update(_snapshot(0.0, 0, 0))
    console = Console(width=160, height=30, record=True, color_system=None)
    console.print(render_top(model.update(_snapshot(1.0, 5, 4)), now="12:00:00"))
    text = console.export_text()
    for seen in ("trikafka top · cluster c · controller 1 · 1 broker(s) · 12:00:00", "Produce", "4.0", "9.00",
                 "PLAINTEXT", "orders", "1.0 KiB", "Stable", "resp-queue ms"):
        assert seen in text, (seen, text)


def test_top_without_request_metrics_says_so():
    import attrs
    from rich.console import Console

    view = TopView().update(attrs.evolve(_snapshot(0.0, 0, 0), requests=None, connections=None))
    console = Console(width=160, height=30, record=True, color_system=None)
    console.print(render_top(view, now="x"))
    text = " ".join(console.export_text().split())
    assert "Per-request metrics are not part of the Kafka protocol" in text and "(not exposed)" in text


def test_prometheus_names_of_the_jmx_exporter():
    text = """\
# TYPE kafka_network_requestmetrics_totaltimems summary
kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.5"} 1.5
kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"} 12.0
kafka_network_requestmetrics_totaltimems_sum{request="Produce"} 30.0
kafka_network_requestmetrics_totaltimems_count{request="Produce"} 10.0
# TYPE kafka_network_requestmetrics_localtimems summary
kafka_network_requestmetrics_localtimems_sum{request="Produce"} 5.0
kafka_network_requestmetrics_localtimems_count{request="Produce"} 10.0
# TYPE kafka_network_requestmetrics_requests counter
kafka_network_requestmetrics_requests_total{request="Produce",version="9"} 11.0
# TYPE kafka_server_socketservermetrics_connection_count gauge
kafka_server_socketservermetrics_connection_count{listener="PLAINTEXT",networkProcessor="0"} 2.0
kafka_server_socketservermetrics_connection_count{listener="PLAINTEXT",networkProcessor="1"} 1.0
# TYPE kafka_server_brokertopicmetrics_bytesin counter
kafka_server_brokertopicmetrics_bytesin_total 4096.0
kafka_server_brokertopicmetrics_bytesin_total{topic="orders"} 4096.0
"""
    parsed = parse_prometheus(text)
    produce = parsed["requests"]["Produce"]
    assert (produce.requests, produce.p50, produce.p99) == (11, 1.5, 12.0)
    assert produce.parts["local"] == 0.5 and produce.parts["queue"] == 0.0
    assert parsed["connections"] == {"PLAINTEXT": 3}
    assert (parsed["bytes_in"], parsed["bytes_out"]) == (4096, None)
    assert parse_prometheus("") == {"requests": None, "connections": None, "bytes_in": None, "bytes_out": None}


def test_human_bytes():
    assert [human_bytes(n) for n in (None, 0, 1023, 1024, 5 * 1024**2, 3 * 1024**4)] == [
        "-",
        "0 B",
        "1023 B",
        "1.0 KiB",
        "5.0 MiB",
        "3072.0 GiB",
    ]
