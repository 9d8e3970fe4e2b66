"""quixstreams' and faust's changelog topics compacted on disk, and restored from what is left.

Each library keeps an app's state (a count per key here) in a local store backed by a
``cleanup.policy=compact`` changelog topic it creates itself. Many updates to five keys fill
the changelog; the broker's cleaner is held back by ``log.cleaner.min.compaction.lag.ms`` (an
hour) so the uncompacted size can be measured, then the changelog's ``min.compaction.lag.ms``
is set to 0 with IncrementalAlterConfigs and the partition's size on disk (DescribeLogDirs)
shrinks within a bounded number of polls. A second instance of the app, with empty local
state, restores from the compacted changelog: its next update per key continues from the
right count, and the changelog read from offset 0 holds each key at most once below the
active segment (offsets preserved, in order) — the active segment is never cleaned, in Kafka
either.

The broker is a real process with a data directory; small segments (16 KiB, so the producers'
batches are capped below that) and a 100 ms cleaner backoff make the cleaner run soon.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from trikafka.testing.process import BrokerProcess
from trikafka.testing.process import broker_process as run_broker_process

from .support import TIMEOUT, Deadline

pytestmark = [
    pytest.mark.compat,
    pytest.mark.streams,  # run in .venv-streams (`make test`): quixstreams pins confluent-kafka < 2.13
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

KEYS = [b"user-%d" % i for i in range(5)]
UPDATES = 3000
HELD_BACK = 3_600_000  # ms: no compaction until the test lowers the changelog's lag


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("data")
    with run_broker_process(
        "--data-dir", str(data),
        "--override", "log.cleaner.backoff.ms=100",
        "--override", "log.segment.bytes=16384",
        "--override", "log.cleaner.min.cleanable.ratio=0.01",
        "--override", f"log.cleaner.min.compaction.lag.ms={HELD_BACK}",
        "--control-listener", "127.0.0.1:0",
    ) as process:
        process.data_dir = data
        yield process
        assert process.stop() == 0, process.output


@pytest.fixture
def kafka_admin(broker: BrokerProcess):
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    yield client
    client.close()


def produce_clicks(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "batch.size": 8192})
    errors: list = []
    for i in range(start, start + count):
        producer.produce(topic, key=KEYS[i % len(KEYS)], value=json.dumps({"n": i}).encode(), partition=0,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(TIMEOUT) == 0 and errors == []


def create_topic(bootstrap: str, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(TIMEOUT)


def partition_size(admin, topic: str) -> int:
    (per_broker,) = admin.describe_log_dirs({topic: [0]})
    return sum(p["partition_size"] for d in per_broker["log_dirs"] for t in d["topics"] for p in t["partitions"])


def compact_now(bootstrap: str, admin, changelog: str) -> tuple[int, int]:
    """Lower the changelog's compaction lag; return its size before and once it shrank."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    before = partition_size(admin, changelog)
    assert partition_size(admin, changelog) == before, "nothing is compacted while the lag holds"
    resource = ConfigResource("TOPIC", changelog, incremental_configs=[
        ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)])
    confluent = AdminClient({"bootstrap.servers": bootstrap})  # alive until the futures are done
    for future in confluent.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT)
    deadline = Deadline()
    size = partition_size(admin, changelog)
    while size > before // 4 and deadline:
        size = partition_size(admin, changelog)
    assert size <= before // 4, f"{changelog}: {before} bytes before the cleaner, still {size} after"
    return before, size


def read_changelog(bootstrap: str, changelog: str) -> list[tuple[int, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(changelog, 0), timeout=TIMEOUT)
        consumer.assign([TopicPartition(changelog, 0, 0)])
        records: list[tuple[int, bytes]] = []
        deadline = Deadline()
        while deadline and (not records or records[-1][0] < high - 1):
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                records.append((message.offset(), message.key()))
        return records
    finally:
        consumer.close()


def check_compacted_on_disk(broker: BrokerProcess, changelog: str) -> int:
    """Each key at most once below the active segment; returns the records read from 0."""
    records = read_changelog(broker.bootstrap, changelog)
    offsets = [o for o, _ in records]
    assert offsets == sorted(set(offsets)), "offsets kept, in order"
    active = max(int(p.stem) for p in (broker.data_dir / f"{changelog}-0").glob("*.log"))
    cleaned = [key for offset, key in records if offset < active]
    assert len(cleaned) == len(set(cleaned)) <= len(KEYS), f"a key twice in the cleaned segments of {changelog}"
    # The active segment is never cleaned (Kafka's rule too): what a restore reads beyond the
    # live keys is only what was written since it was opened.
    assert len(records) < UPDATES // 4, f"{len(records)} changelog records read back: not compacted"
    return len(records)


# --- quixstreams -----------------------------------------------------------------------------


def quix_app(bootstrap: str, state_dir: Path):
    from quixstreams import Application

    app = Application(
        broker_address=bootstrap,
        consumer_group="counter",
        auto_offset_reset="earliest",
        state_dir=str(state_dir),
        commit_every=10,  # a checkpoint (changelog writes) every ten updates
        producer_extra_config={"batch.size": 8192},
        loglevel="WARNING",
    )

    def count(_value, state):
        total = state.get("count", 0) + 1
        state.set("count", total)
        return total

    app.dataframe(app.topic("clicks")).apply(count, stateful=True)
    return app


def test_quixstreams_changelog_is_compacted_and_restores(broker: BrokerProcess, kafka_admin, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "clicks")
    produce_clicks(broker.bootstrap, "clicks", UPDATES)
    counted = quix_app(broker.bootstrap, tmp_path / "state-1").run(count=UPDATES, timeout=TIMEOUT, metadata=True)
    assert len(counted) == UPDATES
    final = {row["_key"]: row["_value"] for row in counted}
    assert final == dict.fromkeys(KEYS, UPDATES // len(KEYS))

    changelog = next(t for t in kafka_admin.list_topics() if t.startswith("changelog__counter"))
    compact_now(broker.bootstrap, kafka_admin, changelog)
    check_compacted_on_disk(broker, changelog)

    # A new instance with empty local state restores from the compacted changelog.
    produce_clicks(broker.bootstrap, "clicks", len(KEYS), start=UPDATES)
    resumed = quix_app(broker.bootstrap, tmp_path / "state-2").run(count=len(KEYS), timeout=TIMEOUT, metadata=True)
    assert {row["_key"]: row["_value"] for row in resumed} == {k: v + 1 for k, v in final.items()}


# --- faust -----------------------------------------------------------------------------------


class FaustWorker:
    """``python -m faust -A tests.compat._faust_counter worker``, stopped with SIGINT (killed
    if it does not stop within the timeout). Its log is read line by line in a thread:
    :meth:`wait_ready` waits for faust's "Ready" (the table restored, the stream positioned),
    and the last lines are kept to show when a check fails."""

    def __init__(self, bootstrap: str, datadir: Path) -> None:
        root = Path(__file__).resolve().parents[2]
        with socket.socket() as probe:  # a free port for the web server faust binds regardless
            probe.bind(("127.0.0.1", 0))
            web_port = probe.getsockname()[1]
        env = dict(os.environ, COUNTER_BOOTSTRAP=bootstrap, COUNTER_WEB_PORT=str(web_port), PYTHONPATH=str(root))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "faust", "-A", "tests.compat._faust_counter", "--datadir", str(datadir),
             "worker", "-l", "info"],
            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
        )
        self.log: collections.deque[str] = collections.deque(maxlen=200)
        self._ready = threading.Event()
        threading.Thread(target=self._read_log, daemon=True).start()

    def _read_log(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:  # until the worker exits: the pipe never fills
            self.log.append(line.rstrip())
            if "[^Worker]: Ready" in line:
                self._ready.set()

    def wait_ready(self) -> None:
        assert self._ready.wait(TIMEOUT), "faust worker not ready:\n" + "\n".join(self.log)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(TIMEOUT)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


def read_counts(bootstrap: str, until: dict[bytes, int], group: str) -> dict[bytes, int]:
    """The latest count per key on ``faust-counts``, read until it reaches ``until``."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["faust-counts"])
        latest: dict[bytes, int] = {}
        deadline = Deadline()
        while deadline and any(latest.get(k, 0) < v for k, v in until.items()):
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                latest[message.key()] = int(message.value())
        return latest
    finally:
        consumer.close()


def wait_committed(broker: BrokerProcess, group: str, topic: str, at_least: int) -> None:
    """Wait (control listener, on the broker's own awaitable state) until ``group`` has
    committed ``at_least`` on partition 0 of ``topic``: faust processes at least once, so a
    worker stopped before committing hands its last clicks to the next one to count again."""
    _wait(broker, "committed", group=group, topic=topic, at_least=at_least)


def wait_written(broker: BrokerProcess, topic: str, at_least: int) -> None:
    """Wait until partition 0 of ``topic`` holds ``at_least`` records. faust commits a
    click's offset and writes the table's changelog record for it independently: a worker
    stopped once the offset is committed may still have its last changelog records in flight,
    and the next worker then restores a table that is short by them."""
    _wait(broker, "high-watermark", topic=topic, at_least=at_least)


def _wait(broker: BrokerProcess, what: str, **query: object) -> None:
    import urllib.parse
    import urllib.request

    query_string = urllib.parse.urlencode({"partition": 0, **query, "timeout_ms": TIMEOUT * 1000})
    with urllib.request.urlopen(f"{broker.control_url}/wait/{what}?{query_string}", timeout=TIMEOUT + 5) as answer:
        assert answer.status == 200


def test_faust_table_changelog_is_compacted_and_restores(broker: BrokerProcess, kafka_admin, tmp_path: Path) -> None:
    for name in ("faust-clicks", "faust-counts"):
        create_topic(broker.bootstrap, name)
    expected = dict.fromkeys(KEYS, UPDATES // len(KEYS))
    produce_clicks(broker.bootstrap, "faust-clicks", UPDATES)
    worker = FaustWorker(broker.bootstrap, tmp_path / "worker-1")
    try:
        assert read_counts(broker.bootstrap, expected, "reader-1") == expected
        wait_committed(broker, "counter", "faust-clicks", UPDATES)
        wait_written(broker, "counter-counts-changelog", UPDATES)  # one record per update
    finally:
        worker.stop()

    changelog = "counter-counts-changelog"
    compact_now(broker.bootstrap, kafka_admin, changelog)
    check_compacted_on_disk(broker, changelog)

    worker = FaustWorker(broker.bootstrap, tmp_path / "worker-2")  # restores the table first
    try:
        # The new clicks once the worker is ready. Produced before it started, they were
        # miscounted in about one run of three: faust 0.15 on aiokafka 0.14 counted clicks
        # 3000, 3001, 3003, 3004 and 3004 again (its changelog and counts topic both say so)
        # while the broker's log held 3000–3004 once, in one batch — they were there to be
        # fetched while the worker sought its stream to the committed offset after restoring.
        worker.wait_ready()
        produce_clicks(broker.bootstrap, "faust-clicks", len(KEYS), start=UPDATES)
        resumed = {k: v + 1 for k, v in expected.items()}
        counted = read_counts(broker.bootstrap, resumed, "reader-2")
        assert counted == resumed, "\n".join(worker.log)
    finally:
        worker.stop()
