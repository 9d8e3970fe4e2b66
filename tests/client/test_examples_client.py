"""The client examples run as written, and docs/client.md shows them and every client config key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trikafka.client.config import client_config_keys
from trikafka.testing.process import broker_process

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.compat
def test_tcp_example_runs_against_a_broker_process():
    with broker_process("--in-memory") as broker:
        result = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "trio_producer.py"), broker.bootstrap],
            capture_output=True, text=True, timeout=60, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's trikafka
        )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split()
    assert lines[0] == "greetings" and len(result.stdout.splitlines()) == 3


def test_in_memory_example_passes():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:trikafka",
         str(ROOT / "examples" / "test_trio_producer.py")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert "1 passed" in result.stdout, result.stdout + result.stderr


def _code_lines(path: Path) -> list[str]:
    """The example's lines after its module docstring."""
    text = path.read_text()
    body = text[text.index('"""', 3) + 3 :]
    return [line.strip() for line in body.splitlines() if line.strip()]


def test_the_docs_show_both_shapes_and_every_client_key():
    """The producer and the consumer pipeline, each over TCP and in memory; every config key."""
    section = (ROOT / "docs" / "client.md").read_text()
    for example in ("trio_producer.py", "test_trio_producer.py", "test_trio_pipeline.py"):
        assert f'--8<-- "examples/{example}"' in section, f"docs/client.md does not include {example}"
    pipeline = (ROOT / "examples" / "trio_pipeline.py").read_text()
    loop = pipeline[pipeline.index("async def run_pipeline(") : pipeline.index("    return done\n")]
    for line in [text.strip() for text in loop.splitlines() if text.strip()]:
        assert line in section, f"docs/client.md lacks {line!r} of the pipeline example"
    # The client's keys are tabled on docs/client.md, or on docs/trio-client.md beside the
    # calls they bound (group.protocol, group.remote.assignor: KIP-848 membership).
    tables = section + (ROOT / "docs" / "trio-client.md").read_text()
    for key, _default, _roles, _doc in client_config_keys():
        assert f"| `{key}` |" in tables, f"docs/client.md's (or trio-client.md's) client config table lacks {key}"


@pytest.mark.compat
async def test_pipeline_example_is_exactly_once_across_a_member_joining_and_leaving():
    """examples/trio_pipeline.py as written, two copies against ``python -m trikafka``: KIP-848
    members, exactly-once transactions. Input flows the whole time; the second copy joins
    while the first works, the first leaves (``--run-for``) while input still flows. A
    read_committed reader of the output sees every input record transformed exactly once."""
    import trio

    from trikafka.client import NewTopic, TopicPartition, open_admin, open_consumer, open_producer

    total = 300
    # Heartbeats every second (Kafka's default is 5 s), so partitions move within the run.
    heartbeats = ("--override", "group.consumer.heartbeat.interval.ms=1000",
                  "--override", "group.consumer.min.heartbeat.interval.ms=1000")
    with broker_process("--in-memory", *heartbeats) as broker:
        bootstrap = broker.bootstrap
        async with open_admin(bootstrap) as admin:
            await admin.create_topics([NewTopic("words", 4, 1), NewTopic("shouted", 1, 1)])
        command = [sys.executable, str(ROOT / "examples" / "trio_pipeline.py"), "--bootstrap", bootstrap,
                   "--input", "words", "--output", "shouted", "--group-protocol", "consumer"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        results = {}

        async def member(name: str, *args: str) -> None:
            results[name] = await trio.run_process(
                [*command, "--transactional-id", f"pipeline-{name}", *args],
                capture_stdout=True, capture_stderr=True, check=False, env=env, cwd=ROOT,
            )

        with trio.fail_after(240):
            async with trio.open_nursery() as nursery, open_producer(bootstrap) as producer:
                nursery.start_soon(member, "a", "--run-for", "8")
                for i in range(total):
                    if i == total // 4:
                        nursery.start_soon(member, "b", "--idle-timeout", "6")
                    await producer.send("words", b"word-%d" % i, key=b"%d" % i)
                    await trio.sleep(0.03)  # about 9 s of input: a joins, b joins, a leaves
            out: list[bytes] = []
            async with open_consumer(bootstrap, isolation_level="read_committed",
                                     auto_offset_reset="earliest") as reader:
                reader.assign([TopicPartition("shouted", 0)])
                with trio.move_on_after(60):
                    while len(out) < total:
                        batches = await reader.getmany(timeout_ms=1000)
                        out += [r.value for records in batches.values() for r in records]
                out += [r.value for records in (await reader.getmany(timeout_ms=1000)).values() for r in records]
    for name, result in results.items():
        assert result.returncode == 0, (name, result.stderr.decode()[-3000:])
    assert len(out) == total, (len(out), {n: (r.stdout, r.stderr[-3000:]) for n, r in results.items()})
    done_by_a, done_by_b = (int(results[name].stdout.split()[1]) for name in "ab")
    # both members transformed some (partitions moved between them), together every record once
    assert done_by_a > 0 and done_by_b > 0 and done_by_a + done_by_b == total
    assert sorted(out) == sorted(b"WORD-%d!" % i for i in range(total))  # none lost, none twice
