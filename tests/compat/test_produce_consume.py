"""Real clients produce to and consume from a real broker process, byte for byte.

Five clients — confluent-kafka (librdkafka), kafka-python, aiokafka, kcat (librdkafka's CLI)
and kafkajs (Node, through ``tests/compat/kafkajs/driver.js``) — each with every codec it
can use, write keyed records with headers (one of them binary) and read them back from the
earliest offset. A record just under the broker's max.message.bytes round-trips; one above
it comes back to the client as MESSAGE_TOO_LARGE; and records written by one client are
read by another.

Consumer groups are not in the broker yet, so every consumer here uses manual assignment and
commits nothing. kafkajs consumes only through groups; its driver reads with kafkajs's own
cluster and broker objects (Metadata + Fetch, decoded and decompressed by kafkajs).

Each test uses its own topic on one broker process shared by the module. Every wait is
bounded: client timeouts, subprocess timeouts, and polling loops with a deadline.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import re
import socket
import struct
import subprocess
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from trikafka.testing.process import BrokerProcess
from trikafka.testing.process import broker_process as run_broker_process

from .support import KCAT, NODE, Deadline

pytestmark = [
    pytest.mark.compat,
    # kafka-python's schema loading, not ours.
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

TIMEOUT = 30  # seconds: any one client operation, subprocess or consume loop
# The broker's default message.max.bytes is 1048588 (a whole record batch, as sent).
BIG = 900_000  # fits under it with the batch overhead
TOO_BIG = 1_200_000  # does not, even after compression: the bytes are random
CLIENT_MAX = 4_000_000  # what the clients' own size limits are raised to
COUNT = 50

KAFKAJS_DIR = Path(__file__).parent / "kafkajs"
KAFKAJS_DRIVER = KAFKAJS_DIR / "driver.js"


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with run_broker_process("--in-memory") as process:
        yield process
        code = process.stop()
        assert code == 0, f"broker exited with {code} after SIGTERM:\n{process.output}"


@pytest.fixture(scope="module")
def versions(broker: BrokerProcess) -> dict[int, tuple[int, int]]:
    return api_versions(broker.bootstrap)


# ---------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class Record:
    partition: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]


# kcat takes records from stdin split on "\n" (record) and "|" (key), and its headers from the
# command line (-H name=value: the same for every record, no NUL) and prints them back as
# "name=value,name=value". Records meant for kcat avoid those bytes.
KCAT_KEY_DELIMITER = b"|"
KCAT_HEADERS = (("source", b"kcat"), ("bin", b"\x01\x02\x7f\x80\xfe\xff=x"))
_KCAT_UNSAFE = bytes.maketrans(b"\n|", b"NP")


def make_records(tag: str, count: int, partitions: int, *, kcat: bool = False) -> list[Record]:
    """Deterministic keyed records: part text (so codecs have work), part random bytes."""
    rng = random.Random(tag)
    records = []
    for i in range(count):
        key = f"{tag}-key-{i:03d}-".encode() + rng.randbytes(4)
        value = (f"record {i} of {tag}; ".encode() * rng.randint(0, 40)) + rng.randbytes(
            rng.randint(0, 300)
        )
        if kcat:
            key, value = key.translate(_KCAT_UNSAFE), value.translate(_KCAT_UNSAFE)
            headers = KCAT_HEADERS
        else:
            headers = (
                ("trace-id", f"{tag}/{i}".encode()),
                ("bin", bytes([0, 1, 2, 0x7F, 0x80, 0xFE, 0xFF, i % 256])),
            )
        records.append(Record(i % partitions, key, value, headers))
    return records


def big_record(tag: str, size: int, *, kcat: bool = False) -> Record:
    """One incompressible record; kcat sends it from a file (no key, whole file is the value)."""
    value = random.Random(tag).randbytes(size)
    if kcat:
        return Record(0, None, value, KCAT_HEADERS)
    return Record(
        0, f"{tag}-big".encode(), value, (("size", str(size).encode()), ("bin", b"\0\xff"))
    )


def by_partition(records: list[Record]) -> dict[int, list[Record]]:
    grouped: dict[int, list[Record]] = defaultdict(list)
    for record in records:
        grouped[record.partition].append(record)
    return dict(grouped)


def assert_same_records(got: list[tuple[int, Record]], expected: list[Record]) -> None:
    """``got`` is (offset, record) as consumed: same records, same order in each partition,
    at offsets 0, 1, 2, ... of a fresh topic."""
    assert len(got) == len(expected), f"consumed {len(got)} of {len(expected)} records"
    got_by_partition: dict[int, list[tuple[int, Record]]] = defaultdict(list)
    for offset, record in got:
        got_by_partition[record.partition].append((offset, record))
    expected_by_partition = by_partition(expected)
    assert sorted(got_by_partition) == sorted(expected_by_partition)
    for partition, want in expected_by_partition.items():
        have = got_by_partition[partition]
        assert [offset for offset, _ in have] == list(range(len(want))), partition
        for index, ((_, record), wanted) in enumerate(zip(have, want, strict=True)):
            # Field by field, so a failure names the field rather than dumping 50 records.
            assert record.key == wanted.key, (partition, index, "key")
            assert record.value == wanted.value, (partition, index, "value")
            assert record.headers == wanted.headers, (partition, index, "headers")


# ---------------------------------------------------------------------------------------------
# The broker's side, read with raw requests (stdlib only): which API versions it advertises, and
# which codec each stored batch carries (attributes & 7). Without the second, a client that
# quietly sent uncompressed batches would pass every codec's test.

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
PRODUCE, FETCH, FIND_COORDINATOR, API_VERSIONS = 0, 1, 10, 18


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _raw_request(bootstrap: str, api_key: int, version: int, body: bytes) -> bytes:
    """One request with header v1; returns the response after its correlation id."""
    request = struct.pack(">hhi", api_key, version, 7) + _string("trikafka-compat") + body
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        stream = sock.makefile("rb")
        (size,) = struct.unpack(">i", stream.read(4))
        response = stream.read(size)
    assert len(response) == size, "the broker closed the connection mid-response"
    (correlation_id,) = struct.unpack_from(">i", response)
    assert correlation_id == 7
    return response[4:]


def api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    response = _raw_request(bootstrap, API_VERSIONS, 0, b"")
    error, count = struct.unpack_from(">hi", response)
    assert error == 0
    ranges = struct.iter_unpack(">hhh", response[6 : 6 + 6 * count])
    return {key: (low, high) for key, low, high in ranges}


def stored_codecs(bootstrap: str, topic: str, partitions: int) -> set[int]:
    # replica id, max wait ms, min bytes, max bytes, isolation level; one topic, its partitions
    body = struct.pack(">iiiib", -1, 0, 0, 64 << 20, 0)
    body += struct.pack(">i", 1) + _string(topic) + struct.pack(">i", partitions)
    for partition in range(partitions):
        body += struct.pack(">iqi", partition, 0, 32 << 20)
    response = _raw_request(bootstrap, FETCH, 4, body)
    position = 4  # throttle time
    codecs = set()
    (topics,) = struct.unpack_from(">i", response, position)
    position += 4
    for _ in range(topics):
        (name_length,) = struct.unpack_from(">h", response, position)
        position += 2 + name_length
        (count,) = struct.unpack_from(">i", response, position)
        position += 4
        for _ in range(count):
            _partition, error, _hw, _lso, aborted = struct.unpack_from(">ihqqi", response, position)
            assert error == 0, f"Fetch error {error}"
            position += 4 + 2 + 8 + 8 + 4 + max(aborted, 0) * 16
            (records_size,) = struct.unpack_from(">i", response, position)
            position += 4
            end = position + max(records_size, 0)
            while position + 12 <= end:
                (batch_length,) = struct.unpack_from(">i", response, position + 8)
                (attributes,) = struct.unpack_from(">h", response, position + 21)
                codecs.add(attributes & 0x07)
                position += 12 + batch_length
            position = end
    return codecs


def _librdkafka_version(client: str) -> tuple[int, ...]:
    if client == "kcat":
        banner = subprocess.run([KCAT, "-V"], capture_output=True, text=True, timeout=TIMEOUT)
        match = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", banner.stdout + banner.stderr)
        assert match, banner
        return tuple(map(int, match.groups()))
    import confluent_kafka

    return tuple(int(part) for part in confluent_kafka.libversion()[0].split(".")[:3])


def wire_codec(client: str, codec: str, versions: dict[int, tuple[int, int]]) -> str:
    """The codec the client really puts on the wire for ``codec`` against this broker.

    librdkafka (confluent-kafka, kcat) checks the broker's ApiVersions per codec and, when its
    check fails, sends the batch uncompressed, saying so only in a debug log ("Broker does not
    support compression type ..."; rdkafka_msgset_writer.c, rdkafka_feature.c):
    * every version gates lz4 on FindCoordinator being advertised (a 0.8.2-era proxy);
    * before 2.11.1 (librdkafka #4948, #5130) the gates match single old versions, so gzip,
      snappy and lz4 need Produce v0 advertised, and zstd Produce v7 and Fetch v10 in range:
      a broker whose Produce starts at v3 (Kafka 4's KIP-896 baseline) gets them uncompressed.
    The other clients compress whatever the broker says.
    """
    if codec == "none" or client not in ("confluent-kafka", "kcat"):
        return codec
    produce, fetch = versions[PRODUCE], versions[FETCH]
    has_coordinator = FIND_COORDINATOR in versions
    if _librdkafka_version(client) >= (2, 11, 1):
        allowed = {
            "gzip": True,
            "snappy": True,
            "lz4": has_coordinator,
            "zstd": produce[1] >= 7 and fetch[1] >= 10,
        }
    else:
        legacy = produce[0] <= 0
        allowed = {
            "gzip": legacy,
            "snappy": legacy,
            "lz4": legacy and has_coordinator and versions[FIND_COORDINATOR][0] <= 0,
            "zstd": produce[0] <= 7 <= produce[1] and fetch[0] <= 10 <= fetch[1],
        }
    return codec if allowed[codec] else "none"


# ---------------------------------------------------------------------------------------------
# confluent-kafka


def confluent_create(
    bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=10,
        request_timeout=TIMEOUT,
    )
    futures[topic].result(timeout=TIMEOUT)


def confluent_produce(bootstrap: str, topic: str, records: list[Record], codec: str) -> list:
    """Returns the delivery errors, one per record (None when delivered)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 5,
            "acks": "all",
            "message.max.bytes": CLIENT_MAX,
            "message.timeout.ms": TIMEOUT * 1000,
        }
    )
    errors: list = []
    for record in records:
        producer.produce(
            topic,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
            partition=record.partition,
            on_delivery=lambda error, _message: errors.append(error),
        )
    assert producer.flush(TIMEOUT) == 0, "records still queued after flush"
    assert len(errors) == len(records)
    return errors


def confluent_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            # librdkafka wants a group id; with assign() and no commits it is never used.
            "group.id": "trikafka-compat-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = []
        deadline = Deadline()
        while len(got) < count and deadline:
            message = consumer.poll(min(1.0, deadline.remaining()))
            if message is None:
                continue
            assert message.error() is None, message.error()
            headers = tuple(message.headers() or ())
            got.append(
                (
                    message.offset(),
                    Record(message.partition(), message.key(), message.value(), headers),
                )
            )
        return got
    finally:
        consumer.close()


def confluent_round_trip(bootstrap, topic, records, codec, partitions, create):
    if create:
        confluent_create(bootstrap, topic, partitions)
    assert confluent_produce(bootstrap, topic, records, codec) == [None] * len(records)


# ---------------------------------------------------------------------------------------------
# kafka-python


def kafka_python_create(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
            timeout_ms=10_000,
        )
    finally:
        admin.close()


def kafka_python_produce(bootstrap: str, topic: str, records: list[Record], codec: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        acks="all",
        linger_ms=5,
        max_request_size=CLIENT_MAX,
        request_timeout_ms=TIMEOUT * 1000,
        max_block_ms=TIMEOUT * 1000,
    )
    try:
        futures = [
            producer.send(
                topic,
                key=record.key,
                value=record.value,
                headers=list(record.headers),
                partition=record.partition,
            )
            for record in records
        ]
        producer.flush(TIMEOUT)
        for future in futures:
            future.get(timeout=TIMEOUT)  # raises the broker's error, if any
    finally:
        producer.close(timeout=TIMEOUT)


def kafka_python_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=TIMEOUT * 1000,
    )
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        got = []
        deadline = Deadline()
        while len(got) < count and deadline:
            batches = consumer.poll(timeout_ms=int(min(1.0, deadline.remaining()) * 1000))
            for messages in batches.values():
                for m in messages:
                    headers = tuple((name, value) for name, value in m.headers)
                    got.append((m.offset, Record(m.partition, m.key, m.value, headers)))
        return sorted(got, key=lambda item: (item[1].partition, item[0]))
    finally:
        consumer.close()


def kafka_python_round_trip(bootstrap, topic, records, codec, partitions, create):
    if create:
        kafka_python_create(bootstrap, topic, partitions)
    kafka_python_produce(bootstrap, topic, records, codec)


# ---------------------------------------------------------------------------------------------
# aiokafka (asyncio, so each call runs its own bounded event loop)


def _run_asyncio(coroutine):
    async def bounded():
        return await asyncio.wait_for(coroutine, TIMEOUT * 2)

    return asyncio.run(bounded())


def aiokafka_create(bootstrap: str, topic: str, partitions: int) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def create():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                timeout_ms=10_000,
            )
        finally:
            await admin.close()

    _run_asyncio(create())


def aiokafka_produce(bootstrap: str, topic: str, records: list[Record], codec: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def produce():
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            acks="all",
            linger_ms=5,
            max_request_size=CLIENT_MAX,
            request_timeout_ms=TIMEOUT * 1000,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(
                    topic,
                    key=record.key,
                    value=record.value,
                    headers=list(record.headers),
                    partition=record.partition,
                )
                for record in records
            ]
            await asyncio.gather(*futures)  # raises the broker's error, if any
        finally:
            await producer.stop()

    _run_asyncio(produce())


def aiokafka_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def consume():
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=TIMEOUT * 1000,
        )
        await consumer.start()
        try:
            assigned = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(assigned)
            await consumer.seek_to_beginning(*assigned)
            got = []
            deadline = Deadline()
            while len(got) < count and deadline:
                batches = await consumer.getmany(
                    timeout_ms=int(min(1.0, deadline.remaining()) * 1000)
                )
                for messages in batches.values():
                    for m in messages:
                        headers = tuple((name, value) for name, value in m.headers)
                        got.append((m.offset, Record(m.partition, m.key, m.value, headers)))
            return sorted(got, key=lambda item: (item[1].partition, item[0]))
        finally:
            await consumer.stop()

    return _run_asyncio(consume())


def aiokafka_round_trip(bootstrap, topic, records, codec, partitions, create):
    if create:
        aiokafka_create(bootstrap, topic, partitions)
    aiokafka_produce(bootstrap, topic, records, codec)


# ---------------------------------------------------------------------------------------------
# kcat


def _kcat(args: list, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=TIMEOUT)


def kcat_produce(
    bootstrap: str, topic: str, records: list[Record], codec: str
) -> subprocess.CompletedProcess:
    """One kcat -P per partition; every record must carry KCAT_HEADERS."""
    header_args = []
    for name, value in KCAT_HEADERS:
        header_args += [b"-H", name.encode() + b"=" + value]
    result = None
    for partition, batch in by_partition(records).items():
        assert all(r.headers == KCAT_HEADERS for r in batch)
        lines = b"".join(r.key + KCAT_KEY_DELIMITER + r.value + b"\n" for r in batch)
        result = _kcat(
            [
                "-P",
                "-b",
                bootstrap,
                "-t",
                topic,
                "-p",
                str(partition),
                "-z",
                codec,
                "-K",
                KCAT_KEY_DELIMITER,
                *header_args,
            ],
            lines,
        )
        if result.returncode != 0:
            return result
    assert result is not None
    return result


def kcat_produce_file(
    bootstrap: str, topic: str, record: Record, path: Path
) -> subprocess.CompletedProcess:
    """kcat sends a file argument as one record, byte for byte (no key)."""
    path.write_bytes(record.value)
    header_args = []
    for name, value in record.headers:
        header_args += [b"-H", name.encode() + b"=" + value]
    return _kcat(
        [
            "-P",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            str(record.partition),
            "-X",
            f"message.max.bytes={CLIENT_MAX}",
            *header_args,
            str(path),
        ]
    )


def _parse_kcat_headers(text: bytes) -> tuple[tuple[str, bytes], ...]:
    if not text:
        return ()
    headers = []
    for item in text.split(b","):
        name, _, value = item.partition(b"=")
        headers.append((name.decode(), value))
    return tuple(headers)


def kcat_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list:
    """All partitions from the beginning, no group; -e exits once every partition is at its end.

    Each record prints as "partition offset keylen valuelen\\n" + key + value + headers + "\\n",
    so keys and values are read by length, binary and all."""
    result = _kcat(
        [
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-c",
            str(count),
            "-f",
            "%p %o %K %S\n%k%s%h\n",
        ]
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    out = result.stdout
    got = []
    position = 0
    while position < len(out):
        line_end = out.index(b"\n", position)
        partition, offset, key_len, value_len = map(int, out[position:line_end].split())
        position = line_end + 1
        key = None
        if key_len >= 0:
            key, position = out[position : position + key_len], position + key_len
        value, position = out[position : position + value_len], position + value_len
        headers_end = out.index(b"\n", position)
        headers = _parse_kcat_headers(out[position:headers_end])
        position = headers_end + 1
        got.append((offset, Record(partition, key, value, headers)))
    assert {r.partition for _, r in got} <= set(range(partitions))
    return sorted(got, key=lambda item: (item[1].partition, item[0]))


def kcat_round_trip(bootstrap, topic, records, codec, partitions, create):
    if create:  # kcat has no admin API: librdkafka's (the library kcat is built on) creates it
        confluent_create(bootstrap, topic, partitions)
    result = kcat_produce(bootstrap, topic, records, codec)
    assert result.returncode == 0, result.stderr.decode(errors="replace")


# ---------------------------------------------------------------------------------------------
# kafkajs


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def kafkajs(args: list[str], stdin: str = "") -> dict:
    if not (KAFKAJS_DIR / "node_modules" / "kafkajs").is_dir():
        pytest.fail("kafkajs is not installed: run `make tests/compat/kafkajs/node_modules`")
    result = subprocess.run(
        [NODE, str(KAFKAJS_DRIVER), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
    )
    assert result.returncode == 0, result.stderr
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"kafkajs driver printed no JSON:\n{result.stdout[-2000:]}\n{result.stderr}")


def kafkajs_produce(
    bootstrap: str, topic: str, records: list[Record], codec: str, *, create: int = 0
) -> dict:
    payload = json.dumps(
        [
            {
                "partition": r.partition,
                "key": _b64(r.key),
                "value": _b64(r.value),
                "headers": [[name, _b64(value)] for name, value in r.headers],
            }
            for r in records
        ]
    )
    args = ["produce", "--bootstrap", bootstrap, "--topic", topic, "--codec", codec]
    if create:
        args += ["--create", "--partitions", str(create)]
    return kafkajs(args, payload)


def kafkajs_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list:
    result = kafkajs(
        [
            "consume",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--count",
            str(count),
            "--partitions",
            str(partitions),
            "--timeout-ms",
            str(TIMEOUT * 1000),
        ]
    )
    assert result["ok"], result
    return [
        (
            int(r["offset"]),
            Record(
                r["partition"],
                _unb64(r["key"]),
                _unb64(r["value"]),
                tuple((name, _unb64(value)) for name, value in r["headers"]),
            ),
        )
        for r in sorted(result["records"], key=lambda r: (r["partition"], int(r["offset"])))
    ]


def kafkajs_round_trip(bootstrap, topic, records, codec, partitions, create):
    result = kafkajs_produce(bootstrap, topic, records, codec, create=partitions if create else 0)
    assert result["ok"], result


# ---------------------------------------------------------------------------------------------
# The matrix


@dataclass(frozen=True)
class Client:
    name: str
    codecs: tuple[str, ...]
    round_trip: Callable  # (bootstrap, topic, records, codec, partitions, create) -> None
    consume: Callable  # (bootstrap, topic, partitions, count) -> [(offset, Record)]
    kcat_records: bool = False


ALL_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CLIENTS = {
    client.name: client
    for client in [
        Client("confluent-kafka", ALL_CODECS, confluent_round_trip, confluent_consume),
        Client("kafka-python", ALL_CODECS, kafka_python_round_trip, kafka_python_consume),
        Client("aiokafka", ALL_CODECS, aiokafka_round_trip, aiokafka_consume),
        Client("kcat", ALL_CODECS, kcat_round_trip, kcat_consume, kcat_records=True),
        # zstd: the kafkajs codec package (@kafkajs/zstd) needs a native addon that does not
        # build on Node 20, so kafkajs covers the other four.
        Client("kafkajs", ("none", "gzip", "snappy", "lz4"), kafkajs_round_trip, kafkajs_consume),
    ]
}


def _topic(*parts: str) -> str:
    return "-".join(["compat", *parts]).replace("_", "-")


@pytest.mark.parametrize(
    ("client", "codec"),
    [(name, codec) for name, client in CLIENTS.items() for codec in client.codecs],
)
def test_round_trip_keys_values_headers(broker, versions, client, codec):
    """Uncompressed records go to a topic the producer's Metadata auto-creates (1 partition);
    compressed ones to a 2-partition topic made with the client's admin API."""
    spec = CLIENTS[client]
    topic = _topic("rt", client, codec)
    partitions = 1 if codec == "none" else 2
    records = make_records(topic, COUNT, partitions, kcat=spec.kcat_records)
    spec.round_trip(broker.bootstrap, topic, records, codec, partitions, codec != "none")
    assert stored_codecs(broker.bootstrap, topic, partitions) == {
        CODEC_IDS[wire_codec(client, codec, versions)]
    }
    assert_same_records(spec.consume(broker.bootstrap, topic, partitions, COUNT), records)


@pytest.mark.parametrize("client", list(CLIENTS))
def test_900kb_record_round_trips(broker, client, tmp_path):
    spec = CLIENTS[client]
    topic = _topic("big", client)
    record = big_record(topic, BIG, kcat=spec.kcat_records)
    if client == "kcat":
        result = kcat_produce_file(broker.bootstrap, topic, record, tmp_path / "big")
        assert result.returncode == 0, result.stderr.decode(errors="replace")
    else:
        spec.round_trip(broker.bootstrap, topic, [record], "none", 1, False)
    assert_same_records(spec.consume(broker.bootstrap, topic, 1, 1), [record])


def _assert_nothing_stored(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "trikafka-compat-unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (0, 0)
    finally:
        consumer.close()


def test_too_large_confluent_kafka(broker):
    from confluent_kafka import KafkaError

    topic = _topic("too-large", "confluent-kafka")
    record = big_record(topic, TOO_BIG)
    # Above the client's own message.max.bytes produce() would raise at once; raised (to
    # CLIENT_MAX) it sends, and the error arrives in the delivery report: the broker's answer.
    [error] = confluent_produce(broker.bootstrap, topic, [record], "none")
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE, error
    _assert_nothing_stored(broker.bootstrap, topic)


def test_too_large_kafka_python(broker):
    from kafka.errors import MessageSizeTooLargeError

    topic = _topic("too-large", "kafka-python")
    with pytest.raises(MessageSizeTooLargeError) as raised:
        kafka_python_produce(broker.bootstrap, topic, [big_record(topic, TOO_BIG)], "none")
    assert raised.value.errno == 10  # MESSAGE_TOO_LARGE
    # Not the client's own check (which would name max_request_size): the broker's answer.
    assert "max_request_size" not in str(raised.value)
    _assert_nothing_stored(broker.bootstrap, topic)


def test_too_large_aiokafka(broker):
    from aiokafka.errors import MessageSizeTooLargeError

    topic = _topic("too-large", "aiokafka")
    with pytest.raises(MessageSizeTooLargeError) as raised:
        aiokafka_produce(broker.bootstrap, topic, [big_record(topic, TOO_BIG)], "none")
    assert raised.value.errno == 10
    assert "max_request_size" not in str(raised.value)
    _assert_nothing_stored(broker.bootstrap, topic)


def test_too_large_kcat(broker, tmp_path):
    topic = _topic("too-large", "kcat")
    record = big_record(topic, TOO_BIG, kcat=True)
    result = kcat_produce_file(broker.bootstrap, topic, record, tmp_path / "too-large")
    assert result.returncode != 0
    # "Delivery failed": the broker's answer (kcat's own size check says "Failed to produce").
    assert b"Delivery failed for message: Broker: Message size too large" in result.stderr, (
        result.stderr
    )
    _assert_nothing_stored(broker.bootstrap, topic)


def test_too_large_kafkajs(broker):
    topic = _topic("too-large", "kafkajs")
    result = kafkajs_produce(broker.bootstrap, topic, [big_record(topic, TOO_BIG)], "none")
    assert not result["ok"], result
    assert result["error"]["type"] == "MESSAGE_TOO_LARGE", result
    _assert_nothing_stored(broker.bootstrap, topic)


# Every pair puts its codec on the wire for real whatever the broker advertises (see wire_codec):
# kcat's gzip/snappy/lz4 travel uncompressed to this broker, and librdkafka's lz4 only goes out
# compressed while FindCoordinator is advertised, so neither is a producer here.
CROSS = [
    ("kafkajs", "gzip", "confluent-kafka"),
    ("confluent-kafka", "snappy", "kafkajs"),
    ("confluent-kafka", "zstd", "kafka-python"),
    ("kafka-python", "lz4", "aiokafka"),
    ("aiokafka", "zstd", "kcat"),
    ("aiokafka", "lz4", "confluent-kafka"),
    ("kcat", "zstd", "aiokafka"),
    ("kafka-python", "snappy", "kafkajs"),
    ("kafkajs", "lz4", "kcat"),
    ("kafkajs", "snappy", "kafka-python"),
]


@pytest.mark.parametrize(("producer", "codec", "consumer"), CROSS)
def test_cross_client(broker, producer, codec, consumer):
    topic = _topic("x", producer, codec, consumer)
    records = make_records(topic, COUNT, 2, kcat="kcat" in (producer, consumer))
    CLIENTS[producer].round_trip(broker.bootstrap, topic, records, codec, 2, True)
    assert stored_codecs(broker.bootstrap, topic, 2) == {CODEC_IDS[codec]}
    assert_same_records(CLIENTS[consumer].consume(broker.bootstrap, topic, 2, COUNT), records)


@pytest.mark.parametrize(
    ("codec", "client"),
    [(codec, name) for codec in ALL_CODECS[1:] for name, c in CLIENTS.items() if codec in c.codecs],
)
def test_topic_compression_type_is_read_by_every_client(broker, codec, client):
    """A topic with compression.type=<codec>: the broker decompresses what the producer sent
    (gzip, or zstd for a gzip topic) and stores its own <codec> batches, which every client's
    decompressor must read. This is also where kcat's gzip/snappy/lz4 decoders are exercised:
    kcat (librdkafka 2.0) does not send those codecs to this broker (see wire_codec)."""
    topic = _topic("ct", codec, client)
    confluent_create(broker.bootstrap, topic, 2, {"compression.type": codec})
    records = make_records(topic, COUNT, 2, kcat=client == "kcat")
    sent = "zstd" if codec == "gzip" else "gzip"
    assert confluent_produce(broker.bootstrap, topic, records, sent) == [None] * len(records)
    assert stored_codecs(broker.bootstrap, topic, 2) == {CODEC_IDS[codec]}
    assert_same_records(CLIENTS[client].consume(broker.bootstrap, topic, 2, COUNT), records)
