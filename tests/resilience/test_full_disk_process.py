"""The issue's row as an operator sees it: a broker process on a disk that really fills.

A 1 MiB tmpfs holds the data directory and a 256 KiB filler file. A producer writes until
the disk is full; every refusal must be KAFKA_STORAGE_ERROR. The filler is deleted (space
returns) and produce resumes on the same broker; SIGTERM stops it with exit 0; a restart has
every acknowledged record. Mounting needs root: where it is refused the test is skipped —
the same behaviour is covered everywhere by the fault layer in ``test_disk_errors.py``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import trio

from trikafka.client.connection import connect_tcp
from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch
from trikafka.testing.process import BrokerProcess

from ..server.test_topics_and_data import create_topic, fetch_request, produce, records_of


@pytest.fixture
def tiny_disk(tmp_path: Path):
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
            check=True, capture_output=True, timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here ({exc}); test_disk_errors.py covers this")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True, timeout=30)


async def _bounded(seconds: float, fn, *args):
    with trio.fail_after(seconds):
        return await fn(*args)


def _batch(n: int) -> bytes:
    return build_batch([(None, b"%06d" % n + b"v" * 10_000, [], 1_700_000_000_000)])


def test_a_full_disk_answers_storage_error_then_resumes(tiny_disk: Path, tmp_path: Path):
    filler = tiny_disk / "filler"
    filler.write_bytes(b"\0" * 256 * 1024)
    data = tiny_disk / "data"
    acked: dict[int, bytes] = {}
    broker = BrokerProcess("--data-dir", str(data), cwd=tmp_path)
    try:
        broker.wait_ready()

        async def fill_then_resume() -> int:
            refused = 0
            async with connect_tcp("127.0.0.1", broker.port) as client:
                assert (await create_topic(client, "full")).error_code == ErrorCode.none
                n = 0
                while refused < 3:
                    answer = await produce(client, 9, "full", None, 0, _batch(n))
                    part = answer.responses[0].partition_responses[0]
                    if part.error_code == ErrorCode.none:
                        acked[part.base_offset] = b"%06d" % n
                        n += 1
                    else:
                        assert part.error_code == ErrorCode.kafka_storage_error, part
                        refused += 1
                filler.unlink()  # space comes back
                for _ in range(5):
                    answer = await produce(client, 9, "full", None, 0, _batch(n))
                    part = answer.responses[0].partition_responses[0]
                    assert part.error_code == ErrorCode.none, part
                    acked[part.base_offset] = b"%06d" % n
                    n += 1
            return refused

        assert trio.run(_bounded, 120, fill_then_resume) == 3
        assert len(acked) > 20
        assert broker.stop() == 0, broker.output
    finally:
        broker.kill()
    assert "Traceback" not in broker.output
    assert "does not follow" not in broker.output

    again = BrokerProcess("--data-dir", str(data), cwd=tmp_path)
    try:
        again.wait_ready()

        async def read_back() -> dict[int, bytes]:
            found: dict[int, bytes] = {}
            async with connect_tcp("127.0.0.1", again.port) as client:
                offset = 0
                while offset < max(acked) + 1:
                    answer = await client.request(fetch_request(12, "full", None, 0, offset))
                    records = records_of(answer.responses[0].partitions[0].records or b"")
                    assert records, f"nothing at offset {offset}"
                    for record_offset, _key, value in records:
                        found[record_offset] = value[:6]
                    offset = records[-1][0] + 1
            return found

        found = trio.run(_bounded, 60, read_back)
        assert {o: found.get(o) for o in acked} == acked
        assert again.stop() == 0, again.output
    finally:
        again.kill()
