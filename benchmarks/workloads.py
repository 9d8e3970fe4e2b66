"""The workloads: what each one does to a target and which figures it returns.

Load comes from C so the client is rarely the bottleneck: confluent-kafka (librdkafka) for
produce, consume and latency, ``loadgen`` for tiny requests. Each function takes a running
target (or, for the ones that need a fresh process, a target name) and returns a flat dict
of figures for one round; the runner keeps the rounds and takes medians.

Sizes are decimal: 1 KB = 1,000 bytes, 1 MB = 1,000,000 bytes; MB/s counts message payload.
"""

from __future__ import annotations

import math
import resource
import socket
import statistics
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from benchmarks import loadgen
from benchmarks.produce_cpu import cpu_seconds
from benchmarks.targets import (
    ROOT,
    EmbeddedTrikafkaTarget,
    Target,
    api_versions_request,
    make_target,
    recv_frame,
    request_response,
    rss_kib,
)

__all__ = [
    "KAFKA", "Metric", "RoundState", "Settings", "Workload", "broker_workloads", "consume", "partitions_for",
    "process_workloads", "produce", "raise_nofile", "versus_confluent",
]

#: The mock keeps at most 5 MiB of batches per partition and drops the oldest beyond that;
#: consume workloads spread their messages so each partition holds at most this much.
MOCK_PARTITION_BUDGET = 4 * 1024 * 1024
RECORD_OVERHEAD = 20  # bytes a v2 record adds to a short value, with room to spare
RANDOM_PARTITIONS = 6  # the second produce shape: the default partitioner over 6 partitions
RANDOM_POOL = 1024  # distinct random values (and keys) it cycles through; a power of two


@dataclass(frozen=True)
class Settings:
    rounds: int = 3
    produce: tuple[tuple[str, int, int], ...] = (("100B", 100, 200_000), ("10KB", 10_000, 20_000))
    latency_samples: int = 2_000
    longpoll_samples: int = 100
    longpoll_wait_ms: int = 100
    tiny_connections: tuple[int, ...] = (1, 16, 256)
    tiny_seconds: float = 1.5
    tiny_warmup: float = 0.5
    tiny_depth: int = 8
    idle_connections: int = 10_000
    #: The mock polls every connection on each loop turn, so accepting 10,000 takes minutes.
    mock_idle_connections: int = 2_000
    startup_samples: int = 3
    step_timeout: float = 120.0  # any one produce/consume/latency run

    @classmethod
    def quick(cls) -> Settings:
        return cls(
            rounds=1,
            produce=(("100B", 100, 2_000), ("10KB", 10_000, 200)),
            latency_samples=50,
            longpoll_samples=5,
            tiny_seconds=0.3,
            tiny_warmup=0.1,
            idle_connections=200,
            startup_samples=1,
            step_timeout=30.0,
        )


@dataclass
class RoundState:
    """What one round's workloads hand each other, per target (topics to consume)."""

    round: int
    topics: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)
    meta_topic: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool = True
    digits: int = 1


@dataclass(frozen=True)
class Workload:
    id: str
    title: str
    targets: tuple[str, ...]
    metrics: tuple[Metric, ...]
    run: Callable[..., dict]
    fresh: bool = False  # starts its own processes: gets a target name, not a running target
    once: bool = False  # first round only
    #: The server that stands for a target in this workload's figures: the file-log rows run
    #: against ``trikafka-file`` and are shown (and judged) as trikafka next to the mock.
    servers: dict[str, str] = field(default_factory=dict)

    def server(self, target: str) -> str:
        return self.servers.get(target, target)


def partitions_for(size: int, count: int) -> int:
    return max(1, math.ceil(count * (size + RECORD_OVERHEAD) / MOCK_PARTITION_BUDGET))


def _client_config(target: Target, **extra: object) -> dict:
    return {"bootstrap.servers": target.bootstrap, "log_level": 3, **extra}


def _new_topic(target: Target, stem: str, partitions: int) -> str:
    name = f"bench-{stem}-{uuid.uuid4().hex[:8]}"
    target.create_topic(name, partitions)
    return name


# --- produce and consume ---------------------------------------------------------------------


def _broker_cpu(target: Target) -> float | None:
    try:
        return cpu_seconds(target.pid)
    except (OSError, ValueError, IndexError):  # not Linux, or the process is gone
        return None


def produce(target: Target, settings: Settings, state: RoundState, *, label: str, size: int,
            count: int, shape: str = "blocks") -> dict:
    """``count`` messages of ``size`` bytes, acks=1, linger.ms=5, timed from the first
    produce() to flush(); the server's user + system CPU is read from /proc around it.

    ``shape="blocks"``: one value repeated, no key, in contiguous blocks per partition (as a
    sticky partitioner would), over as many partitions as the mock's window needs.
    ``shape="random"``: random values and random 16-byte keys, no partition given, so
    confluent-kafka's default partitioner (``consistent_random``: murmur2 of the key) spreads
    every linger window over 6 partitions: smaller batches, more of them, as applications see.
    """
    from confluent_kafka import Producer

    if shape == "random":
        partitions = RANDOM_PARTITIONS
    else:
        partitions = partitions_for(size, count)
    topic = _new_topic(target, label, partitions)
    state.topics[(target.name, label)] = (topic, partitions)
    failures: list[object] = []
    producer = Producer(
        _client_config(
            target,
            acks=1,
            **{
                "linger.ms": 5,
                "queue.buffering.max.messages": max(count, 100_000),
                "queue.buffering.max.kbytes": 2_097_151,
                "delivery.report.only.error": True,
                "on_delivery": lambda err, msg: failures.append(err) if err else None,
            },
        )
    )
    producer.list_topics(topic, timeout=30)  # connected, metadata known: not timed
    send = producer.produce
    cpu_before = _broker_cpu(target)
    if shape == "random":
        import os

        # A pool of distinct random values and keys (generating one per message would time
        # the client): the broker never sees two neighbouring records alike.
        values = [os.urandom(size) for _ in range(RANDOM_POOL)]
        keys = [os.urandom(16) for _ in range(RANDOM_POOL)]
        mask = RANDOM_POOL - 1
        start = time.perf_counter()
        for i in range(count):
            while True:
                try:
                    send(topic, values[i & mask], keys[(i * 7) & mask])
                    break
                except BufferError:
                    producer.poll(0.005)
    else:
        value = b"x" * size
        per_partition = count / partitions
        start = time.perf_counter()
        for i in range(count):
            partition = int(i / per_partition)
            while True:
                try:
                    send(topic, value, partition=partition)
                    break
                except BufferError:
                    producer.poll(0.005)
    left = producer.flush(settings.step_timeout)
    elapsed = time.perf_counter() - start
    cpu_after = _broker_cpu(target)
    if left or failures:
        raise RuntimeError(f"{left} messages not delivered, {len(failures)} failed: {failures[:3]}")
    out = {
        "msgs_per_s": count / elapsed,
        "mb_per_s": count * size / elapsed / 1e6,
        "seconds": elapsed,
        "partitions": partitions,
    }
    if cpu_before is not None and cpu_after is not None:
        out["cpu_s_per_gb"] = (cpu_after - cpu_before) / (count * size / 1e9)
    return out


def consume(target: Target, settings: Settings, state: RoundState, *, label: str, size: int,
            count: int) -> dict:
    """Read back what ``produce`` wrote, from the earliest offset of every partition; timed
    from assign() to the last message."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    topic, partitions = state.topics.pop((target.name, label))
    consumer = Consumer(
        _client_config(
            target,
            **{
                "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                # librdkafka stops fetching when its local queue holds 64 MiB and then waits
                # fetch.queue.backoff.ms (1 s): that would time the client's pauses, not the
                # broker. Room for everything, no pause.
                "queued.min.messages": 10_000_000,
                "queued.max.messages.kbytes": 2_097_151,
                "fetch.queue.backoff.ms": 0,
            },
        )
    )
    try:
        consumer.list_topics(topic, timeout=30)
        got = payload = 0
        start = time.perf_counter()
        deadline = start + settings.step_timeout
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while got < count:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"consumed {got} of {count} in {settings.step_timeout} s")
            # Never ask for more than is left: consume() would wait out its timeout for them.
            for message in consumer.consume(min(10_000, count - got), 0.5):
                if message.error() is None:
                    got += 1
                    payload += len(message.value())
                elif message.error().fatal():
                    raise RuntimeError(str(message.error()))
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    return {"msgs_per_s": got / elapsed, "mb_per_s": payload / elapsed / 1e6, "seconds": elapsed}


# --- end-to-end latency ----------------------------------------------------------------------


def _latency(target: Target, settings: Settings, samples: int, fetch_wait_ms: int) -> dict:
    """One 100-byte message at a time: produce() to the consumer holding it. acks=1,
    linger.ms=0; each message carries its index, so a late one is never mistaken."""
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    topic = _new_topic(target, "latency", 1)
    producer = Producer(_client_config(target, acks=1, **{"linger.ms": 0}))
    consumer = Consumer(
        _client_config(
            target,
            **{
                "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": fetch_wait_ms,
            },
        )
    )
    pad = b"x" * 96

    def receive(index: int, until: float) -> bool:
        while True:
            left = until - time.perf_counter()
            if left <= 0:
                return False
            message = consumer.poll(min(left, 1.0))
            if message is not None and message.error() is None:
                if struct.unpack_from(">i", message.value())[0] == index:
                    return True

    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        warm_until = time.perf_counter() + 30
        while True:  # until the consumer is positioned and fetching
            producer.produce(topic, struct.pack(">i", -1) + pad)
            producer.poll(0)
            if receive(-1, min(warm_until, time.perf_counter() + 0.5)):
                break
            if time.perf_counter() > warm_until:
                raise TimeoutError("the consumer never saw a message")
        latencies = []
        deadline = time.perf_counter() + settings.step_timeout
        for index in range(samples):
            start = time.perf_counter()
            producer.produce(topic, struct.pack(">i", index) + pad)
            producer.poll(0)
            if not receive(index, min(deadline, start + 5)):
                raise TimeoutError(f"message {index} not consumed within 5 s (or step timeout)")
            latencies.append((time.perf_counter() - start) * 1000)
    finally:
        consumer.close()
        producer.flush(5)
    latencies.sort()
    return {
        "p50_ms": latencies[len(latencies) // 2],
        "p99_ms": latencies[min(len(latencies) - 1, math.ceil(len(latencies) * 0.99) - 1)],
        "max_ms": latencies[-1],
        "samples": len(latencies),
    }


def latency(target: Target, settings: Settings, state: RoundState) -> dict:
    """fetch.wait.max.ms=0: the consumer polls without long-poll waits, so both brokers are
    measured on their request path (the mock holds every empty fetch for the full wait)."""
    return _latency(target, settings, settings.latency_samples, 0)


def latency_longpoll(target: Target, settings: Settings, state: RoundState) -> dict:
    """A long-polling consumer (fetch.wait.max.ms=100): trikafka should wake the fetch when
    data arrives; the mock answers only when the wait expires."""
    return _latency(target, settings, settings.longpoll_samples, settings.longpoll_wait_ms)


# --- tiny requests ---------------------------------------------------------------------------


def _check_tiny_response(api: str, version: int, frame: bytes) -> None:
    """Decode one response with kio: the load is only worth measuring if it is answered."""
    from trikafka.protocol.headers import decode_response
    from trikafka.protocol.registry import ApiRegistry

    registry = ApiRegistry()
    spec = registry.get(18 if api == "apiversions" else 3, version)
    _, body = decode_response(spec, frame[4:])
    if api == "apiversions":
        code = body.error_code
    else:
        code = body.topics[0].error_code
    if int(code) != 0:
        raise RuntimeError(f"{api} v{version} answered with error code {int(code)}")


def tiny(target: Target, settings: Settings, state: RoundState, *, api: str,
         connections: int) -> dict:
    """``loadgen``: ``tiny_depth`` requests pipelined per connection, answered in order."""
    version = target.api_versions_version if api == "apiversions" else 12
    topic = None
    if api == "metadata":
        topic = state.meta_topic.get(target.name)
        if topic is None:
            topic = state.meta_topic[target.name] = _new_topic(target, "meta", 1)
    checked = False
    if target.speaks_kafka and state.round == 0 and connections == settings.tiny_connections[0]:
        frame = loadgen.check(target.port, api, host=target.host, version=version, topic=topic)
        _check_tiny_response(api, version, frame)
        checked = True
    result = loadgen.run(
        target.port,
        api,
        host=target.host,
        connections=connections,
        seconds=settings.tiny_seconds,
        warmup=settings.tiny_warmup,
        depth=settings.tiny_depth,
        version=version,
        topic=topic,
    )
    out = {"requests_per_s": result["rate"], "api_version": version}
    if checked:
        out["response_checked"] = True
    return out


def tiny_latency(target: Target, settings: Settings, state: RoundState) -> dict:
    """One connection, one ApiVersions at a time: each round trip timed (the harness's
    own blocking socket, the same client cost for every target), p50/p99/max in ms."""
    frame = api_versions_request(target.api_versions_version)
    samples = []
    with socket.create_connection((target.host, target.port), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(settings.latency_samples + settings.latency_samples // 10):
            start = time.perf_counter()
            sock.sendall(frame)
            recv_frame(sock)
            if i >= settings.latency_samples // 10:  # the first tenth warms up
                samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {
        "p50_ms": samples[len(samples) // 2],
        "p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
        "max_ms": samples[-1],
    }


def tiny_split(name: str, settings: Settings) -> dict:
    """trikafka's own TotalTimeMs split for the tiny workloads at every connection count.

    The CLI process does not expose its request metrics over the wire, so this runs the same
    broker code embedded (``benchmarks/embedded_broker.py``) and reads ``broker.statistics()``
    before and after each load: the difference of count × mean per part is exact.
    """
    out: dict[str, float] = {}
    broker = EmbeddedTrikafkaTarget()
    try:
        broker.create_topic("bench-meta-split", 1)
        for api, kafka_name in (("apiversions", "ApiVersions"), ("metadata", "Metadata")):
            for connections in settings.tiny_connections:
                before = broker.statistics().get(kafka_name, {})
                result = loadgen.run(
                    broker.port,
                    api,
                    host=broker.host,
                    connections=connections,
                    seconds=settings.tiny_seconds,
                    warmup=settings.tiny_warmup,
                    depth=settings.tiny_depth,
                    version=3 if api == "apiversions" else 12,
                    topic="bench-meta-split",
                )
                after = broker.statistics()[kafka_name]
                key = f"{api}_c{connections}"
                out[f"{key}_requests_per_s"] = result["rate"]
                for part, hist in after.items():
                    if part == "Requests":
                        continue
                    old = before.get(part, {"count": 0, "mean": 0.0})
                    n = hist["count"] - old["count"]
                    total = hist["count"] * hist["mean"] - old["count"] * old["mean"]
                    out[f"{key}_{part}"] = total / n if n else 0.0
    finally:
        broker.stop()
    return out


# --- idle connections ------------------------------------------------------------------------


def raise_nofile(needed: int) -> None:
    """Lift RLIMIT_NOFILE's soft limit (children inherit it) as far as the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        raise RuntimeError(f"RLIMIT_NOFILE is {soft} (hard {hard}); {needed} descriptors needed")


def _settled_rss(pid: int, limit: float = 3.0) -> int:
    """RSS once it stops moving: three readings 100 ms apart within 0.5 %, at most ``limit`` s."""
    readings = [rss_kib(pid)]
    end = time.monotonic() + limit
    while time.monotonic() < end:
        time.sleep(0.1)
        readings.append(rss_kib(pid))
        last = readings[-3:]
        if len(last) == 3 and max(last) - min(last) <= 0.005 * max(last):
            break
    return readings[-1]


def idle_connections(name: str, settings: Settings) -> dict:
    """Open N connections to a fresh server, each answered one ApiVersions (so every one is
    accepted and served), leave them idle, and divide the growth of VmRSS by N."""
    count = settings.idle_connections
    if name == "mock":
        count = min(count, settings.mock_idle_connections)
    raise_nofile(count + 512)
    target = make_target(name)
    sockets: list[socket.socket] = []
    try:
        frame = api_versions_request(target.api_versions_version)
        request_response(target.host, target.port, frame)
        before = _settled_rss(target.pid)
        # The mock accepts slowly while several connections are pending (10 at a time took
        # ~100 s per 1,000 here, one at a time ~1 s), so it gets them one by one.
        batch = 1 if name == "mock" else 250
        for first in range(0, count, batch):
            opened = []
            for _ in range(min(batch, count - first)):
                sock = socket.create_connection((target.host, target.port), timeout=30)
                sock.sendall(frame)
                opened.append(sock)
                sockets.append(sock)
            for sock in opened:
                recv_frame(sock)
        after = _settled_rss(target.pid)
    finally:
        for sock in sockets:
            sock.close()
        target.stop()
    return {
        "kb_per_connection": (after - before) * 1024 / count / 1000,
        "rss_before_mb": before * 1024 / 1e6,
        "rss_after_mb": after * 1024 / 1e6,
        "connections": count,
    }


# --- start-up ----------------------------------------------------------------------------------


def startup_embedded(name: str, settings: Settings) -> dict:
    """In-process start. ``open_ms`` (the goal's figure): trikafka's ``open_broker()`` call to
    ready, the mock's ``rd_kafka_mock_cluster_new()`` from loading librdkafka to a listening
    cluster, the ceiling's start to listening (both with everything they import). ``ms``:
    trikafka from before ``import trio`` and ``import trikafka`` to ready."""
    import json

    samples: list[dict[str, float]] = []
    for _ in range(settings.startup_samples):
        if name == "trikafka":
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.embedded_broker", "--startup"],
                cwd=ROOT, capture_output=True, text=True, timeout=60,
            )
            if done.returncode != 0:
                raise RuntimeError(f"embedded start failed: {done.stderr[-2000:]}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            figures["ms"] = figures.pop("ready_ms")
            figures["open_ms"] = figures["open_broker_ms"]
            samples.append(figures)
        else:
            target = make_target(name)
            target.stop()
            assert target.startup_ms is not None
            samples.append({"ms": target.startup_ms, "open_ms": target.startup_ms})
    return {key: statistics.median(s[key] for s in samples) for key in samples[0]}


def startup_process(name: str, settings: Settings) -> dict:
    """From spawning the process to the first answered ApiVersions (trikafka: the CLI; the
    readiness banner is how its port is learned)."""
    samples = []
    for _ in range(settings.startup_samples):
        start = time.perf_counter()
        target = make_target(name)
        try:
            request_response(
                target.host, target.port, api_versions_request(target.api_versions_version)
            )
            samples.append((time.perf_counter() - start) * 1000)
        finally:
            target.stop()
    return {"ms": statistics.median(samples)}


# --- the list --------------------------------------------------------------------------------

KAFKA = ("trikafka", "mock")
ALL = ("trikafka", "mock", "ceiling")
#: The tiny-request rows also run against the card-shaped ceiling (their reference).
TINY = (*ALL, "card")
_RATE = Metric("requests_per_s", "requests/s", "req/s", digits=0)


#: The Trio clients' rows: their MB/s, confluent-kafka's on the same broker, and the ratio.
VERSUS_CONFLUENT = (
    Metric("mb_per_s", "Trio MB/s", "MB/s", digits=1),
    Metric("confluent_mb_per_s", "confluent MB/s", "MB/s", digits=1),
    Metric("ratio", "Trio / confluent", "×", digits=2),
    Metric("aiokafka_mb_per_s", "aiokafka MB/s", "MB/s", digits=1),
    Metric("ratio_aiokafka", "Trio / aiokafka", "×", digits=2),
)


def versus_confluent(stem: str, client: str, run: Callable[..., dict], settings: Settings) -> list[Workload]:
    """``<stem>_<label>`` rows, one per produce size: ``client`` (the Trio producer or
    consumer) beside confluent-kafka, ``run`` measuring both."""
    return [
        Workload(
            f"{stem}_{label}",
            f"{client} {label} × {count:,} (vs confluent-kafka, aiokafka)",
            KAFKA,
            VERSUS_CONFLUENT,
            partial(run, label=label, size=size, count=count),
        )
        for label, size, count in settings.produce
    ]


def broker_workloads(settings: Settings) -> list[Workload]:
    """The rows that load a running broker: tiny requests, latency, produce and consume."""
    items: list[Workload] = []
    for api, title in (("apiversions", "ApiVersions"), ("metadata", "Metadata (1 topic)")):
        for connections in settings.tiny_connections:
            items.append(
                Workload(
                    f"tiny_{api}_c{connections}",
                    f"{title}, {connections} conn",
                    TINY,
                    (_RATE,),
                    partial(tiny, api=api, connections=connections),
                )
            )
    lat = (
        Metric("p50_ms", "p50", "ms", False, 3),
        Metric("p99_ms", "p99", "ms", False, 3),
        Metric("max_ms", "max", "ms", False, 2),
    )
    items.append(
        Workload("tiny_latency", "ApiVersions round trip, 1 conn, 1 in flight", TINY, lat, tiny_latency)
    )
    items.append(Workload("latency", "E2E latency, busy poll", KAFKA, lat, latency))
    items.append(
        Workload("latency_longpoll", "E2E latency, long poll 100 ms", KAFKA, lat, latency_longpoll)
    )
    rates = (
        Metric("mb_per_s", "MB/s", "MB/s", digits=1),
        Metric("msgs_per_s", "msgs/s", "msg/s", digits=0),
    )
    cpu = Metric("cpu_s_per_gb", "server CPU per GB", "s", False, 2)
    file_log = {"trikafka": "trikafka-file"}
    for label, size, count in settings.produce:
        items.append(
            Workload(
                f"produce_{label}",
                f"Produce {label} × {count:,}",
                KAFKA,
                (*rates, cpu),
                partial(produce, label=label, size=size, count=count),
            )
        )
        items.append(
            Workload(
                f"consume_{label}",
                f"Consume {label} × {count:,}",
                KAFKA,
                rates,
                partial(consume, label=label, size=size, count=count),
            )
        )
    for label, size, count in settings.produce:
        items.append(
            Workload(
                f"produce_random_{label}",
                f"Produce {label} × {count:,}, random, {RANDOM_PARTITIONS} partitions",
                KAFKA,
                (*rates, cpu),
                partial(produce, label=f"random-{label}", size=size, count=count, shape="random"),
            )
        )
    # The mock has no file log: these rows set trikafka's file log against the mock's memory.
    for label, size, count in settings.produce:
        items.append(
            Workload(
                f"produce_file_{label}",
                f"Produce {label} × {count:,}, file log",
                KAFKA,
                (*rates, cpu),
                partial(produce, label=f"file-{label}", size=size, count=count),
                servers=file_log,
            )
        )
        items.append(
            Workload(
                f"consume_file_{label}",
                f"Consume {label} × {count:,}, file log",
                KAFKA,
                rates,
                partial(consume, label=f"file-{label}", size=size, count=count),
                servers=file_log,
            )
        )
    return items


def process_workloads(settings: Settings) -> list[Workload]:
    """The rows that start processes of their own: idle connections, start-up, the split."""
    items: list[Workload] = []
    items.append(
        Workload(
            "idle_connections",
            f"{settings.idle_connections:,} idle connections"
            + (f" (mock: {settings.mock_idle_connections:,})"
               if settings.mock_idle_connections < settings.idle_connections else ""),
            ALL,
            (Metric("kb_per_connection", "RSS/conn", "KB", False, 1),),
            idle_connections,
            fresh=True,
        )
    )
    items.append(
        Workload(
            "startup_embedded",
            "Start in-process",
            ALL,
            (
                Metric("open_ms", "open_broker() → ready", "ms", False, 1),
                Metric("ms", "import → ready", "ms", False, 1),
            ),
            startup_embedded,
            fresh=True,
        )
    )
    items.append(
        Workload(
            "startup_cli",
            "Start process → 1st ApiVersions",
            ALL,
            (Metric("ms", "to answer", "ms", False, 0),),
            startup_process,
            fresh=True,
        )
    )
    items.append(
        Workload(
            "tiny_split",
            "TotalTimeMs split (embedded trikafka)",
            ("trikafka",),
            (),
            tiny_split,
            fresh=True,
            once=True,
        )
    )
    return items
