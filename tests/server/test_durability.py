"""Acknowledged data survives a crash: SIGKILL after acks=1, then restart and read back."""

from __future__ import annotations

import trio

from trikafka.client import connect_tcp
from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch, iter_batches, iter_records
from trikafka.testing.process import broker_process

from .test_topics_and_data import create_topic, fetch_request, produce


async def test_acknowledged_records_survive_sigkill(tmp_path):
    data_dir = tmp_path / "data"
    acknowledged: list[tuple[int, bytes]] = []
    with broker_process("--data-dir", str(data_dir), "--override", "log.flush.interval.messages=1") as broker:
        with trio.fail_after(60):
            async with connect_tcp(broker.host, broker.port) as client:
                created = await create_topic(client, "durable", 2)
                for i in range(200):
                    value = b"record-%d" % i
                    response = await produce(client, 9, "durable", created.topic_id, i % 2,
                                             build_batch([(b"k", value, [], 1_700_000_000_000 + i)]), acks=1)
                    partition = response.responses[0].partition_responses[0]
                    assert partition.error_code == ErrorCode.none
                    acknowledged.append((i % 2, value))
        broker.kill()  # no flush, no checkpoint, no clean-shutdown marker
        assert broker.process.returncode == -9
    with broker_process("--data-dir", str(data_dir)) as broker:
        with trio.fail_after(60):
            async with connect_tcp(broker.host, broker.port) as client:
                for partition in (0, 1):
                    response = await client.request(fetch_request(12, "durable", created.topic_id, partition, 0))
                    (p,) = response.responses[0].partitions
                    assert p.error_code == ErrorCode.none
                    values = [r.value for h in iter_batches(p.records) for r in iter_records(p.records, h)]
                    assert values == [v for part, v in acknowledged if part == partition]
        assert broker.stop() == 0
