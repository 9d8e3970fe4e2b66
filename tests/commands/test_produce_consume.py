"""``produce`` and ``consume``: lines in, records out, checked with confluent-kafka on the other side."""

from __future__ import annotations

import datetime
import json

from tests.commands.support import confluent_consume, confluent_produce, trikafka


def test_produce_lines_with_keys_and_headers_reach_a_confluent_consumer(kafka_broker, tmp_path):
    b = kafka_broker.bootstrap_servers
    assert trikafka("topics", "create", "lines", "--partitions", "2", bootstrap=b).code == 0
    run = trikafka(
        "produce", "lines", "-K", ":", "-H", "source=cli", "-H", "n=1", input="k1:one\ntwo\n\nk1:three:3\n", bootstrap=b
    )
    assert run.code == 0, run
    assert run.out == "" and run.err.strip() == "Produced 3 records (17 bytes) to lines"
    messages = confluent_consume(b, "lines", 3)
    got = sorted(((m.key() or b"", m.value(), tuple(m.headers())) for m in messages), key=lambda r: r[1])
    headers = (("source", b"cli"), ("n", b"1"))
    assert got == [(b"k1", b"one", headers), (b"k1", b"three:3", headers), (b"", b"two", headers)]
    assert [m.key() for m in messages if m.value() == b"two"] == [None]
    keyed = {m.partition() for m in messages if m.key() == b"k1"}
    assert len(keyed) == 1  # one key, one partition

    data = tmp_path / "records.txt"
    data.write_text("".join(f"line {i}\n" for i in range(500)))
    from_file = trikafka("produce", "lines", "--file", str(data), "-p", "1", "--json", bootstrap=b)
    assert from_file.code == 0, from_file
    summary = from_file.json()
    assert summary["records"] == 500 and set(summary["last_offsets"]) == {"1"}


def test_consume_formats_positions_and_stops(kafka_broker):
    b = kafka_broker.bootstrap_servers
    assert trikafka("topics", "create", "events", "--partitions", "2", bootstrap=b).code == 0
    confluent_produce(b, "events", [(b"a", b"v%d" % i, 0) for i in range(5)], headers=[("h", b"1")])
    confluent_produce(b, "events", [(None, b"w%d" % i, 1) for i in range(3)])

    plain = trikafka("consume", "events", "-e", bootstrap=b)
    assert plain.code == 0, plain
    assert sorted(plain.out.splitlines()) == sorted([f"v{i}" for i in range(5)] + [f"w{i}" for i in range(3)])
    assert "% Reached end of topic events [0] at offset 5" in plain.err

    fmt = trikafka("consume", "events", "-e", "-p", "0", "--format", r"%t/%p/%o %k=%s [%h] %S\n", bootstrap=b)
    assert fmt.out.splitlines() == [f"events/0/{i} a=v{i} [h=1] 2" for i in range(5)], fmt

    as_json = trikafka("consume", "events", "-e", "-p", "1", "--json", bootstrap=b)
    rows = [json.loads(line) for line in as_json.out.splitlines()]
    assert [(r["partition"], r["offset"], r["key"], r["value"], r["headers"]) for r in rows] == [
        (1, i, None, f"w{i}", []) for i in range(3)
    ]
    assert all(r["timestamp_type"] == "create_time" or r["timestamp_type"].lower().startswith("create") for r in rows)

    assert trikafka("consume", "events", "-e", "-p", "0", "--from", "3", bootstrap=b).out.splitlines() == ["v3", "v4"]
    assert trikafka("consume", "events", "-e", "-p", "0", "--from", "-2", bootstrap=b).out.splitlines() == ["v3", "v4"]
    assert trikafka("consume", "events", "-e", "--from", "end", bootstrap=b).out == ""
    assert (
        len(trikafka("consume", "events", "--count", "4", bootstrap=b).out.splitlines()) == 4
    )  # no -e: --count stops it

    stamps = [
        int(line)
        for line in trikafka("consume", "events", "-e", "-p", "0", "--format", r"%T\n", bootstrap=b).out.split()
    ]
    later = stamps[-1] + 3_600_000
    assert (
        trikafka("consume", "events", "-e", "-p", "0", "--from", f"s@{stamps[0]}", bootstrap=b).out.splitlines()[0]
        == "v0"
    )
    assert trikafka("consume", "events", "-e", "--from", f"@{later}", bootstrap=b).out == ""
    iso = datetime.datetime.fromtimestamp(stamps[0] / 1000, datetime.UTC).isoformat()
    assert trikafka("consume", "events", "-e", "-p", "0", "--from", iso, bootstrap=b).out.splitlines()[0] == "v0"


def test_consume_binary_values_byte_for_byte(kafka_broker):
    b = kafka_broker.bootstrap_servers
    confluent_produce(b, "bin", [(None, bytes(range(256)), 0)])
    run = trikafka("consume", "bin", "-e", "--format", "%R%s", input=b"", bootstrap=b)
    assert run.code == 0
    assert run.out == (256).to_bytes(4, "big") + bytes(range(256))


def test_consume_with_a_group_commits_what_it_printed(kafka_broker):
    b = kafka_broker.bootstrap_servers
    confluent_produce(b, "work", [(None, b"job%d" % i, 0) for i in range(6)])
    first = trikafka("consume", "work", "--group", "workers", "--count", "4", bootstrap=b)
    assert first.out.splitlines() == ["job0", "job1", "job2", "job3"], first
    rest = trikafka("consume", "work", "--group", "workers", "-e", bootstrap=b)
    assert rest.out.splitlines() == ["job4", "job5"], rest
    again = trikafka("consume", "work", "--group", "workers", "-e", bootstrap=b)
    assert (again.code, again.out) == (0, ""), again
    refused = trikafka("consume", "work", "--group", "workers", "--from", "3", bootstrap=b)
    assert refused.code == 2 and "groups reset-offsets" in refused.err
