"""kill -9 at random moments loses no acknowledged record.

A broker process on a data directory; four producer connections pipeline acks=all Produce
requests of uniquely numbered records; when a randomly chosen number of them has been
acknowledged (the producers are still sending: requests are in flight, appends are under
way) the broker gets SIGKILL. It restarts on the same directory, and every record that was
acknowledged must be there, at the offset its acknowledgement gave, with its value. Then
the next cycle produces on top. Records that were sent but never acknowledged may or may not
be there; they must not break the log.

``make test`` runs a few cycles; ``make soak CYCLES=100`` (env ``TRIKAFKA_KILL_CYCLES``)
runs the long one. The kill moments come from a seeded ``random.Random`` (env
``TRIKAFKA_KILL_SEED``) so a failing cycle can be replayed.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import trio

from trikafka.client.connection import connect_tcp
from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch, iter_batches, iter_records
from trikafka.testing.process import BrokerProcess

from ..server.test_topics_and_data import create_topic, fetch_request, produce

CYCLES = int(os.environ.get("TRIKAFKA_KILL_CYCLES", "3"))
SEED = int(os.environ.get("TRIKAFKA_KILL_SEED", "15"))
PRODUCERS = 4
TOPIC = "durable"
PARTITIONS = 2


async def _produce_until_killed(port: int, broker: BrokerProcess, target: int, cycle: int, acked: dict) -> None:
    """Produce from PRODUCERS connections; SIGKILL the broker at the ``target``-th ack."""
    count = 0
    killed = False

    async def producer(index: int) -> None:
        nonlocal count, killed
        try:
            async with connect_tcp("127.0.0.1", port) as client:
                for n in range(10**9):
                    value = f"c{cycle}-p{index}-n{n}".encode()
                    partition = n % PARTITIONS
                    batch = build_batch([(None, value, [], 1_700_000_000_000 + n)])
                    answer = await produce(client, 9, TOPIC, None, partition, batch, acks=-1)
                    part = answer.responses[0].partition_responses[0]
                    assert part.error_code == ErrorCode.none, part
                    acked[(partition, part.base_offset)] = value
                    count += 1
                    if count == target:
                        killed = True
                        broker.process.kill()  # SIGKILL, mid-stream: others are in flight
        except Exception:  # a closed connection, however the client reports it
            if not killed:
                raise
            # The broker died under us: what was acknowledged is in `acked`.

    async with trio.open_nursery() as nursery:
        for index in range(PRODUCERS):
            nursery.start_soon(producer, index)


async def _read_all(port: int) -> dict[tuple[int, int], bytes]:
    found: dict[tuple[int, int], bytes] = {}
    async with connect_tcp("127.0.0.1", port) as client:
        for partition in range(PARTITIONS):
            offset = 0
            while True:
                answer = await client.request(fetch_request(12, TOPIC, None, partition, offset))
                part = answer.responses[0].partitions[0]
                assert part.error_code == ErrorCode.none, part
                data = part.records or b""
                if not data:
                    break
                for header in iter_batches(data):
                    for record in iter_records(data, header):
                        found[(partition, record.offset)] = record.value
                    offset = header.last_offset + 1
                if offset >= part.high_watermark:
                    break
    return found


async def _bounded(seconds: float, fn, *args):
    with trio.fail_after(seconds):
        return await fn(*args)


def run_cycles(tmp_path: Path, cycles: int, seed: int) -> dict:
    """Run the kill/restart cycles; return figures for the README."""
    rng = random.Random(seed)
    data = tmp_path / "data"
    acked: dict[tuple[int, int], bytes] = {}
    lost = 0
    for cycle in range(cycles):
        broker = BrokerProcess("--data-dir", str(data), cwd=tmp_path)
        try:
            broker.wait_ready()
            if cycle == 0:

                async def create(port: int) -> None:
                    async with connect_tcp("127.0.0.1", port) as client:
                        created = await create_topic(client, TOPIC, partitions=PARTITIONS)
                        assert created.error_code == ErrorCode.none

                trio.run(_bounded, 60, create, broker.port)
            else:  # the restart after the previous kill: everything acknowledged is there
                found = trio.run(_bounded, 120, _read_all, broker.port)
                missing = {k: v for k, v in acked.items() if found.get(k) != v}
                lost += len(missing)
                assert not missing, f"cycle {cycle} (seed {seed}): lost {sorted(missing)[:10]}"
            target = rng.randint(1, 300)
            trio.run(_bounded, 120, _produce_until_killed, broker.port, broker, target, cycle, acked)
            assert broker.process.wait(30) == -9
        finally:
            broker.kill()
    final = BrokerProcess("--data-dir", str(data), cwd=tmp_path)
    try:
        final.wait_ready()
        found = trio.run(_bounded, 120, _read_all, final.port)
        missing = {k: v for k, v in acked.items() if found.get(k) != v}
        assert not missing, f"after the last kill (seed {seed}): lost {sorted(missing)[:10]}"
        assert final.stop() == 0, final.output
    finally:
        final.kill()
    return {"cycles": cycles, "acknowledged": len(acked), "lost": lost, "stored": len(found)}


def test_kill9_loses_no_acknowledged_record(tmp_path):
    figures = run_cycles(tmp_path, CYCLES, SEED)
    assert figures["lost"] == 0
    assert figures["acknowledged"] > CYCLES  # the test produced something every cycle
    print(f"kill -9 durability: {figures}")
