"""Real clients' consumer groups against a real broker process, one scenario per client.

Each of confluent-kafka, kafka-python, aiokafka, kafkajs (through
``tests/compat/kafkajs/groups.js``) and ``kcat -G`` runs the same story on its own broker
process with its own ``--data-dir``:

1. two members of one group split a 4-partition topic: 2 partitions each, disjoint, all 4;
2. a third member joins and the group rebalances: 2 + 1 + 1, still disjoint, still all 4;
3. 200 keyed records, produced before the members start, while two consume and while three
   consume, are consumed exactly once across the group (the clients' own auto-commit, which
   commits before giving partitions up, and their clean close: commit, then LeaveGroup);
4. after that close the group is Empty and its committed offsets are the partitions' ends,
   so a new member of the group reads only records produced after it;
5. the broker stops (SIGTERM) and starts again on the same data directory (a new port, so
   new clients): the committed offsets are still there.

What each member was assigned is read from the client (its assignment API, kafkajs's
GROUP_JOIN event, kcat's "rebalanced" lines) and checked against what the broker says in
DescribeGroups (confluent-kafka's AdminClient). Committed offsets are read with each client's
own API (kafkajs: admin.fetchOffsets; kcat has none, so confluent-kafka's ``committed()``).

Members run in threads (Python clients; aiokafka with its own event loop per thread) or as
subprocesses (kafkajs, kcat). Sessions are short (6 s, heartbeats every 0.5 s) so rebalances
are quick. Every wait is bounded: polling with a deadline, client timeouts, subprocess
timeouts.

Client quirks met on the way (not broker bugs): ``kcat -G -o beginning`` applies the offset to
every assignment, so each rebalance re-reads from the start (kcat.c ``rebalance_cb``): kcat gets
``auto.offset.reset=earliest`` instead. kafka-python 3.0.12 can drop its own JoinGroup result
and go silent when it joins before its coordinator has seen the topic's metadata (see
``KafkaPythonMember``): its members subscribe, then fetch the topic's metadata, before they
poll.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from trikafka.testing.process import BrokerProcess

from .support import KCAT, NODE, Deadline

pytestmark = [
    pytest.mark.compat,
    # kafka-python's schema loading, not ours.
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

TIMEOUT = 30  # seconds: any one client operation, subprocess, or wait for a group state
PARTITIONS = 4
SESSION_MS = 6000
HEARTBEAT_MS = 500
REBALANCE_MS = 15_000  # max.poll.interval.ms: how long a rebalance waits for a slow member
AUTO_COMMIT_MS = 500
POLL_S = 0.1  # the members' poll timeout: how quickly they notice a stop request

KAFKAJS_DIR = Path(__file__).parent / "kafkajs"
KAFKAJS_GROUPS = KAFKAJS_DIR / "groups.js"


def wait_for(predicate: Callable[[], object], what: Callable[[], str], seconds: float = TIMEOUT):
    """Poll ``predicate`` until it is truthy (returned) or the deadline passes (fail)."""
    deadline = Deadline(seconds)
    while True:
        value = predicate()
        if value:
            return value
        if not deadline:
            pytest.fail(f"timed out after {seconds} s waiting for {what()}")
        time.sleep(0.05)  # polling for a state, not dodging a race


# ---------------------------------------------------------------------------------------------
# The broker: its own process and data directory per test, restarted in place


def start_broker(data_dir: Path) -> BrokerProcess:
    return BrokerProcess("--data-dir", str(data_dir)).wait_ready()


@pytest.fixture
def brokers() -> Iterator[list[BrokerProcess]]:
    """Started brokers go in this list; whatever is still running at the end is killed."""
    started: list[BrokerProcess] = []
    yield started
    for broker in started:
        broker.kill()


def stop_broker(broker: BrokerProcess) -> None:
    code = broker.stop()
    assert code == 0, f"broker exited with {code} after SIGTERM:\n{broker.output}"


# ---------------------------------------------------------------------------------------------
# Records: produced with confluent-kafka, keyed, spread over the partitions


@dataclass(frozen=True, order=True)
class Consumed:
    partition: int
    offset: int
    key: str


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)],
        operation_timeout=10,
        request_timeout=TIMEOUT,
    )
    futures[topic].result(timeout=TIMEOUT)


def produce(bootstrap: str, topic: str, tag: str, count: int) -> set[Consumed]:
    """``count`` keyed records, partition ``i % 4``; returns where each one landed."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": TIMEOUT * 1000,
        }
    )
    landed: set[Consumed] = set()
    errors: list = []

    def delivered(error, message) -> None:
        if error is not None:
            errors.append(error)
        else:
            landed.add(Consumed(message.partition(), message.offset(), message.key().decode()))

    for i in range(count):
        key = f"{tag}-{i:03d}"
        producer.produce(
            topic, key=key, value=f"value of {key}", partition=i % PARTITIONS, on_delivery=delivered
        )
    assert producer.flush(TIMEOUT) == 0, "records still queued after flush"
    assert errors == []
    assert len(landed) == count
    return landed


# ---------------------------------------------------------------------------------------------
# Members: one consumer in the group, run by a thread or a subprocess. Each keeps what it was
# last assigned (None before its first assignment) and every record it consumed.


class Member:
    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._assignment: frozenset[int] | None = None
        self._consumed: list[Consumed] = []

    def _assigned(self, partitions) -> None:
        with self._lock:
            self._assignment = frozenset(partitions)

    def _got(self, record: Consumed) -> None:
        with self._lock:
            self._consumed.append(record)

    @property
    def assignment(self) -> frozenset[int] | None:
        with self._lock:
            return self._assignment

    @property
    def consumed(self) -> list[Consumed]:
        with self._lock:
            return list(self._consumed)

    def request_stop(self) -> None:
        raise NotImplementedError

    def wait_stopped(self) -> None:
        """Block until the member has closed (committed and left); raise what went wrong."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"{self.name}(assigned={sorted(self.assignment or ())}, consumed={len(self.consumed)})"
        )


class ThreadMember(Member):
    """A Python client's consumer, used only by its own thread: poll, record, repeat."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(name)
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            self.run()
        except BaseException as error:  # reported by wait_stopped
            self._error = error

    def run(self) -> None:
        raise NotImplementedError

    def request_stop(self) -> None:
        self._stop.set()

    def wait_stopped(self) -> None:
        self._thread.join(TIMEOUT)
        assert not self._thread.is_alive(), f"{self.name} did not close within {TIMEOUT} s"
        if self._error is not None:
            raise AssertionError(f"{self.name} failed: {self._error!r}") from self._error


class ConfluentMember(ThreadMember):
    def run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "client.id": self.name,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "max.poll.interval.ms": REBALANCE_MS,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,  # also commits the stored offsets before a revoke
                "auto.commit.interval.ms": AUTO_COMMIT_MS,
            }
        )
        try:
            consumer.subscribe([self.topic])
            while not self._stop.is_set():
                message = consumer.poll(POLL_S)
                if message is not None:
                    assert message.error() is None, message.error()
                    self._got(
                        Consumed(message.partition(), message.offset(), message.key().decode())
                    )
                self._assigned(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()  # commits the stored offsets, then LeaveGroup


class KafkaPythonMember(ThreadMember):
    def run(self) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.name,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=REBALANCE_MS,
            auto_offset_reset="earliest",
            enable_auto_commit=True,  # also commits before a rebalance (_on_join_prepare)
            auto_commit_interval_ms=AUTO_COMMIT_MS,
            request_timeout_ms=TIMEOUT * 1000,
        )
        try:
            # Subscribe first, then learn the topic's metadata. kafka-python 3.0.12 builds its
            # coordinator's metadata snapshot only from metadata that arrives after subscribe:
            # a member that fetched the topic before subscribing joins with an empty snapshot,
            # so the leader assigns from it and rejoins once metadata comes
            # ("assignment_snapshot != metadata_snapshot"). If a poll times out while that
            # JoinGroup is in flight, _on_join_prepare has reset the snapshot, the next poll
            # sees need_rejoin() False and drops the join (coordinator/base.py
            # join_group_async: `while self.need_rejoin()` forgets the in-flight _join_task):
            # the member never heartbeats again and the broker expires it.
            consumer.subscribe([self.topic])
            assert consumer.partitions_for_topic(self.topic) == set(range(PARTITIONS))
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=int(POLL_S * 1000))
                for messages in batches.values():
                    for m in messages:
                        self._got(Consumed(m.partition, m.offset, m.key.decode()))
                self._assigned(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close(autocommit=True, timeout_ms=TIMEOUT * 1000)


class AiokafkaMember(ThreadMember):
    def run(self) -> None:
        asyncio.run(asyncio.wait_for(self._consume(), TIMEOUT * 10))

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.name,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=REBALANCE_MS,
            rebalance_timeout_ms=REBALANCE_MS,
            auto_offset_reset="earliest",
            enable_auto_commit=True,  # also commits before a rebalance
            auto_commit_interval_ms=AUTO_COMMIT_MS,
            request_timeout_ms=TIMEOUT * 1000,
        )
        await consumer.start()
        try:
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=int(POLL_S * 1000))
                for messages in batches.values():
                    for m in messages:
                        self._got(Consumed(m.partition, m.offset, m.key.decode()))
                self._assigned(tp.partition for tp in consumer.assignment())
        finally:
            await consumer.stop()  # commits, then LeaveGroup


class ProcessMember(Member):
    """A consumer in a child process; threads read its stdout and stderr line by line."""

    def __init__(self, name: str, args: list[str]) -> None:
        super().__init__(name)
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(
                target=self._read,
                args=(self.process.stdout, self.stdout, self.on_stdout),
                daemon=True,
            ),
            threading.Thread(
                target=self._read,
                args=(self.process.stderr, self.stderr, self.on_stderr),
                daemon=True,
            ),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, lines: list[str], handle: Callable[[str], None]) -> None:
        for line in stream:
            line = line.rstrip("\n")
            lines.append(line)
            handle(line)

    def on_stdout(self, line: str) -> None:
        pass

    def on_stderr(self, line: str) -> None:
        pass

    def wait_stopped(self) -> None:
        try:
            code = self.process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"{self.name} did not stop within {TIMEOUT} s:\n{self.output()}")
        for reader in self._readers:
            reader.join(TIMEOUT)
        assert code == 0, f"{self.name} exited with {code}:\n{self.output()}"
        self.check_stopped()

    def check_stopped(self) -> None:
        pass

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def output(self, lines: int = 40) -> str:
        return "\n".join(["stdout:", *self.stdout[-lines:], "stderr:", *self.stderr[-lines:]])


class KafkajsMember(ProcessMember):
    def __init__(self, name: str, bootstrap: str, topic: str, group: str) -> None:
        if not (KAFKAJS_DIR / "node_modules" / "kafkajs").is_dir():
            pytest.fail("kafkajs is not installed: run `make tests/compat/kafkajs/node_modules`")
        self.events: list[dict] = []
        super().__init__(
            name,
            [
                NODE,
                str(KAFKAJS_GROUPS),
                "consume",
                "--bootstrap",
                bootstrap,
                "--topic",
                topic,
                "--group",
                group,
                "--session-ms",
                str(SESSION_MS),
                "--heartbeat-ms",
                str(HEARTBEAT_MS),
                "--rebalance-ms",
                str(REBALANCE_MS),
            ],
        )

    def on_stdout(self, line: str) -> None:
        event = json.loads(line)
        self.events.append(event)
        if event["event"] == "assigned":
            self._assigned(event["partitions"])
        elif event["event"] == "message":
            self._got(Consumed(event["partition"], int(event["offset"]), event["key"]))

    def request_stop(self) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write("stop\n")
            self.process.stdin.close()
        except BrokenPipeError:  # it has already exited: wait_stopped says how
            pass

    def check_stopped(self) -> None:
        crashes = [e for e in self.events if e["event"] == "crash"]
        assert crashes == [], f"{self.name} crashed:\n{self.output()}"
        assert self.events and self.events[-1] == {"event": "stopped"}, self.output()


# kcat (verbosity 1, no -q) reports each rebalance on stderr:
#   % Group g rebalanced (memberid rdkafka-...): assigned: t [0], t [1]
#   % Group g rebalanced (memberid rdkafka-...): revoked: t [0], t [1]
_KCAT_REBALANCED = re.compile(
    r"^% Group \S+ rebalanced \(memberid [^)]*\): (assigned|revoked): ?(.*)$"
)
_KCAT_PARTITION = re.compile(r"\[(\d+)\]")


class KcatMember(ProcessMember):
    """``kcat -G``: librdkafka's balanced consumer, auto-commit on; SIGTERM closes it cleanly
    (commit, LeaveGroup). Records print as "partition offset key" (-u: unbuffered)."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(
            name,
            [
                KCAT,
                "-b",
                bootstrap,
                "-G",
                group,
                # Not -o beginning: in -G mode kcat forces -o's offset on every assignment
                # (kcat.c rebalance_cb), so each rebalance would re-read from the start.
                "-X",
                "auto.offset.reset=earliest",
                "-u",
                "-f",
                "%p %o %k\n",
                "-X",
                f"client.id={name}",
                "-X",
                f"session.timeout.ms={SESSION_MS}",
                "-X",
                f"heartbeat.interval.ms={HEARTBEAT_MS}",
                "-X",
                f"max.poll.interval.ms={REBALANCE_MS}",
                "-X",
                f"auto.commit.interval.ms={AUTO_COMMIT_MS}",
                topic,
            ],
        )

    def on_stdout(self, line: str) -> None:
        partition, offset, key = line.split(" ", 2)
        self._got(Consumed(int(partition), int(offset), key))

    def on_stderr(self, line: str) -> None:
        match = _KCAT_REBALANCED.match(line)
        if match:
            kind, partitions = match.groups()
            self._assigned(
                map(int, _KCAT_PARTITION.findall(partitions)) if kind == "assigned" else ()
            )

    def request_stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)


def stop_all(members: list[Member]) -> None:
    """Ask every member to close at once, then wait for each: no rebalance storm in between."""
    for member in members:
        member.request_stop()
    failures = []
    for member in members:
        try:
            member.wait_stopped()
        except BaseException as error:  # wait for the others all the same
            failures.append(error)
    if failures:
        raise failures[0]


# ---------------------------------------------------------------------------------------------
# Committed offsets, read with each client's own API


def confluent_committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=TIMEOUT
        )
        for tp in found:
            assert tp.error is None, tp.error
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def kafka_python_committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        request_timeout_ms=TIMEOUT * 1000,
    )
    try:
        return {
            p: consumer.committed(TopicPartition(topic, p), timeout_ms=TIMEOUT * 1000)
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close(autocommit=False)


def aiokafka_committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def fetch() -> dict[int, int]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            request_timeout_ms=TIMEOUT * 1000,
        )
        await consumer.start()
        try:
            return {
                p: await consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)
            }
        finally:
            await consumer.stop()

    async def bounded() -> dict[int, int]:
        return await asyncio.wait_for(fetch(), TIMEOUT)

    return asyncio.run(bounded())


def kafkajs_committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    result = subprocess.run(
        [
            NODE,
            str(KAFKAJS_GROUPS),
            "committed",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--group",
            group,
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["ok"], answer
    return {partition: int(offset) for partition, offset in answer["offsets"]}


# ---------------------------------------------------------------------------------------------
# The broker's view of the group: DescribeGroups through confluent-kafka's AdminClient


@dataclass(frozen=True)
class GroupView:
    state: str  # Kafka's name: Stable, Empty, ...
    assignments: dict[str, frozenset[int]]  # member id -> partitions of the topic


def describe_group(bootstrap: str, topic: str, group: str) -> GroupView:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result(
        timeout=TIMEOUT
    )
    state = {"STABLE": "Stable", "EMPTY": "Empty", "DEAD": "Dead"}.get(
        description.state.name, description.state.name
    )
    return GroupView(
        state,
        {
            member.member_id: frozenset(
                tp.partition for tp in member.assignment.topic_partitions if tp.topic == topic
            )
            for member in description.members
        },
    )


# ---------------------------------------------------------------------------------------------
# The clients


@dataclass(frozen=True)
class Client:
    member: Callable[[str, str, str, str], Member]  # (name, bootstrap, topic, group)
    committed: Callable[[str, str, str], dict[int, int]]  # (bootstrap, topic, group)


CLIENTS = {
    "confluent-kafka": Client(ConfluentMember, confluent_committed),
    "kafka-python": Client(KafkaPythonMember, kafka_python_committed),
    "aiokafka": Client(AiokafkaMember, aiokafka_committed),
    "kafkajs": Client(KafkajsMember, kafkajs_committed),
    # kcat has no committed-offsets query: librdkafka's (confluent-kafka) reads them.
    "kcat": Client(KcatMember, confluent_committed),
}


def split(members: list[Member], sizes: list[int]) -> dict[str, frozenset[int]] | None:
    """The members' assignments if they split all partitions disjointly in ``sizes``."""
    assignments = {m.name: m.assignment for m in members}
    if any(a is None for a in assignments.values()):
        return None
    if sorted(len(a) for a in assignments.values()) != sizes:
        return None
    union = frozenset().union(*assignments.values())
    if (
        union != frozenset(range(PARTITIONS))
        or sum(len(a) for a in assignments.values()) != PARTITIONS
    ):
        return None
    return assignments


def wait_for_split(bootstrap: str, topic: str, group: str, members: list[Member], sizes: list[int]):
    """Until the members report a split in ``sizes`` and the broker, Stable, agrees with it."""
    seen: list[GroupView] = []

    def agreed():
        assignments = split(members, sizes)
        if assignments is None:
            return None
        view = describe_group(bootstrap, topic, group)
        seen.append(view)
        if view.state != "Stable" or sorted(map(sorted, view.assignments.values())) != sorted(
            map(sorted, assignments.values())
        ):
            return None
        return assignments

    return wait_for(
        agreed,
        lambda: (
            f"a {sizes} split of {PARTITIONS} partitions: members {members}, broker {seen[-1:]}"
        ),
    )


def assert_exactly_once(consumed: list[Consumed], produced: set[Consumed]) -> None:
    counts = Counter(consumed)
    duplicates = sorted(record for record, n in counts.items() if n > 1)
    assert duplicates == [], (
        f"{len(duplicates)} record(s) consumed more than once: {duplicates[:10]}"
    )
    missing = sorted(produced - set(counts))
    assert missing == [], f"{len(missing)} record(s) never consumed: {missing[:10]}"
    unexpected = sorted(set(counts) - produced)
    assert unexpected == [], f"consumed records never produced: {unexpected[:10]}"


def ends(produced: set[Consumed]) -> dict[int, int]:
    """Each partition's log end offset: the offset a fully caught-up group commits."""
    return {p: 1 + max(r.offset for r in produced if r.partition == p) for p in range(PARTITIONS)}


# ---------------------------------------------------------------------------------------------
# The scenario


@pytest.mark.parametrize("client", list(CLIENTS))
def test_consumer_group_lifecycle(client, brokers, tmp_path):
    spec = CLIENTS[client]
    data_dir = tmp_path / "data"
    broker = start_broker(data_dir)
    brokers.append(broker)
    bootstrap = broker.address
    topic, group = f"groups-{client}", f"group-{client}"
    create_topic(bootstrap, topic)
    produced = produce(bootstrap, topic, "before", 100)

    # 1. Two members split the four partitions, two each.
    members: list[Member] = []
    try:
        for name in ("a", "b"):
            members.append(spec.member(f"{client}-{name}", bootstrap, topic, group))
        two = wait_for_split(bootstrap, topic, group, members, [2, 2])
        produced |= produce(bootstrap, topic, "two-members", 50)

        # 2. A third joins: everyone rebalances to 2 + 1 + 1.
        members.append(spec.member(f"{client}-c", bootstrap, topic, group))
        three = wait_for_split(bootstrap, topic, group, members, [1, 1, 2])
        assert any(three[name] != partitions for name, partitions in two.items()), (two, three)
        produced |= produce(bootstrap, topic, "three-members", 50)

        # 3. Every record is consumed by the group (checked for exactly once below). The last
        # 50 were produced after the rebalance, into every partition; a partition's records
        # arrive in order, so any re-read of older ones that the rebalance caused (a missing
        # commit on revoke, a reset to the beginning) has arrived before they have.
        def consumed_all():
            return set().union(*(m.consumed for m in members)) >= produced

        wait_for(consumed_all, lambda: f"{len(produced)} records consumed: {members}")
    finally:
        stop_all(members)
    assert len(produced) == 200
    assert_exactly_once([r for m in members for r in m.consumed], produced)
    # Their close committed everything and left the group.
    assert spec.committed(bootstrap, topic, group) == ends(produced)
    assert describe_group(bootstrap, topic, group) == GroupView("Empty", {})

    # 4. A new member resumes from the committed offsets: it reads only newer records.
    newer = produce(bootstrap, topic, "after", 40)
    resumed = spec.member(f"{client}-d", bootstrap, topic, group)
    try:
        wait_for(
            lambda: len(resumed.consumed) >= len(newer),
            lambda: f"{len(newer)} newer records consumed: {resumed}",
        )
    finally:
        stop_all([resumed])
    assert_exactly_once(resumed.consumed, newer)
    produced |= newer
    assert spec.committed(bootstrap, topic, group) == ends(produced)

    # 5. A broker restart on the same data directory keeps the committed offsets.
    stop_broker(broker)
    broker = start_broker(data_dir)
    brokers.append(broker)
    assert spec.committed(broker.address, topic, group) == ends(produced)
    assert describe_group(broker.address, topic, group) == GroupView("Empty", {})
    stop_broker(broker)
