"""File-backed partitions are created lazily: a partition's directory and first segment appear
on disk with its first record, and a restart — after a clean stop and after SIGKILL — reads
back exactly the offsets and records that were there, idle partitions included."""

from __future__ import annotations

from pathlib import Path

import trio

from trikafka.client import connect_tcp
from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch, iter_batches, iter_records
from trikafka.testing.process import broker_process

from .test_topics_and_data import create_topic, fetch_request, produce

TOPIC = "lazy"
PARTITIONS = 4


def partition_dirs(data_dir: Path) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.is_dir() and p.name.startswith(f"{TOPIC}-"))


async def _produce(client, topic_id, partition: int, values: list[bytes]) -> list[int]:
    offsets = []
    for value in values:
        response = await produce(client, 9, TOPIC, topic_id, partition,
                                 build_batch([(b"k", value, [], 1_700_000_000_000)]), acks=1)
        answer = response.responses[0].partition_responses[0]
        assert answer.error_code == ErrorCode.none
        offsets.append(answer.base_offset)
    return offsets


async def _read_all(client, topic_id) -> dict[int, tuple[int, list[tuple[int, bytes]]]]:
    """partition → (high watermark, [(offset, value)]), fetched until the high watermark (a
    fetch answers from one segment, and a restart may roll one: segment.ms counts from the
    records' timestamps)."""
    out = {}
    for partition in range(PARTITIONS):
        records: list[tuple[int, bytes]] = []
        while True:
            position = records[-1][0] + 1 if records else 0
            response = await client.request(fetch_request(12, TOPIC, topic_id, partition, position))
            (p,) = response.responses[0].partitions
            assert p.error_code == ErrorCode.none
            records += [(r.offset, r.value) for h in iter_batches(p.records) for r in iter_records(p.records, h)]
            if not p.records or (records and records[-1][0] + 1 >= p.high_watermark):
                break
        out[partition] = (p.high_watermark, records)
    return out


async def test_partitions_appear_on_disk_with_their_first_record_and_survive_restarts(tmp_path):
    data_dir = tmp_path / "data"
    args = ("--data-dir", str(data_dir), "--override", "log.flush.interval.messages=1")
    with broker_process(*args) as broker:
        with trio.fail_after(60):
            async with connect_tcp(broker.host, broker.port) as client:
                created = await create_topic(client, TOPIC, PARTITIONS)
                assert partition_dirs(data_dir) == [], "no directory before a record"
                assert await _produce(client, created.topic_id, 1, [b"a", b"b"]) == [0, 1]
                assert await _produce(client, created.topic_id, 3, [b"c"]) == [0]
                assert partition_dirs(data_dir) == ["lazy-1", "lazy-3"]
                assert (data_dir / "lazy-1" / "00000000000000000000.log").stat().st_size > 0
                expected = await _read_all(client, created.topic_id)
        assert expected == {0: (0, []), 1: (2, [(0, b"a"), (1, b"b")]), 2: (0, []), 3: (1, [(0, b"c")])}
        assert broker.stop() == 0

    with broker_process(*args) as broker:  # after a clean stop
        with trio.fail_after(60):
            async with connect_tcp(broker.host, broker.port) as client:
                assert await _read_all(client, created.topic_id) == expected
                assert partition_dirs(data_dir) == ["lazy-1", "lazy-3"], "a restart creates nothing"
                assert await _produce(client, created.topic_id, 2, [b"d"]) == [0]
                assert await _produce(client, created.topic_id, 1, [b"e"]) == [2]
                expected[2] = (1, [(0, b"d")])
                expected[1] = (3, [*expected[1][1], (2, b"e")])
                assert await _read_all(client, created.topic_id) == expected
        broker.kill()  # no flush, no checkpoint, no clean-shutdown marker

    with broker_process(*args) as broker:  # after SIGKILL
        with trio.fail_after(60):
            async with connect_tcp(broker.host, broker.port) as client:
                assert await _read_all(client, created.topic_id) == expected
                assert partition_dirs(data_dir) == ["lazy-1", "lazy-2", "lazy-3"]
        assert broker.stop() == 0


async def test_after_sigkill_a_partition_is_recovered_at_its_first_use_not_at_start(tmp_path):
    data_dir = tmp_path / "data"
    args = ("--data-dir", str(data_dir))
    with broker_process(*args) as broker:
        with trio.fail_after(60):
            async with connect_tcp(broker.host, broker.port) as client:
                created = await create_topic(client, TOPIC, PARTITIONS)
                for partition in range(PARTITIONS):
                    await _produce(client, created.topic_id, partition, [b"v%d" % partition, b"w"])
                expected = await _read_all(client, created.topic_id)
        broker.kill()  # no flush, no checkpoint, no clean-shutdown marker
    for partition in (0, 1):  # torn writes past the recovery point
        segment = data_dir / f"{TOPIC}-{partition}" / "00000000000000000000.log"
        segment.write_bytes(segment.read_bytes() + b"\x00" * 30)

    with broker_process(*args) as broker:
        assert "Recovered partition" not in broker.output, "nothing is opened at start"
        with trio.fail_after(60):
            async with connect_tcp(broker.host, broker.port) as client:
                response = await client.request(fetch_request(12, TOPIC, created.topic_id, 0, 0))
                assert response.responses[0].partitions[0].high_watermark == 2
                broker.wait_for_output(f"Recovered partition {TOPIC}-0: cut 30 bytes", timeout=10)
                assert f"Recovered partition {TOPIC}-1" not in broker.output, "t-1 is not used yet"
                assert await _read_all(client, created.topic_id) == expected
                broker.wait_for_output(f"Recovered partition {TOPIC}-1: cut 30 bytes", timeout=10)
        assert broker.stop() == 0

    with broker_process(*args) as broker:  # every partition was opened, so the stop was clean
        with trio.fail_after(60):
            async with connect_tcp(broker.host, broker.port) as client:
                assert await _read_all(client, created.topic_id) == expected
        assert "Recovered partition" not in broker.output
        assert broker.stop() == 0
