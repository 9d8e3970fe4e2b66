"""Broker CPU of schema validation: ``python -m benchmarks.schema_validation [--messages N]``.

Starts ``python -m trikafka --in-memory`` with the Schema Registry, registers one Avro schema,
and produces the same Confluent-framed 100-byte values (magic byte, the schema's id, payload)
with confluent-kafka (acks=1, linger.ms=5) to a topic without validation and to one with
``confluent.value.schema.validation=true``; prints, per topic, MB/s and the broker's CPU
seconds per MB (``/proc``, 10 ms ticks: run it a few times on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import time
import urllib.request

from benchmarks.produce_cpu import _free_port, cpu_seconds

__all__ = ["main"]

SCHEMA = {"type": "record", "name": "Row", "fields": [{"name": "payload", "type": "bytes"}]}


def _register(url: str) -> int:
    body = json.dumps({"schema": json.dumps(SCHEMA)}).encode()
    request = urllib.request.Request(
        f"{url}/subjects/checked-value/versions", body, {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - our own broker
        return int(json.loads(response.read())["id"])


def _produce(bootstrap: str, topic: str, value: bytes, messages: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5})
    started = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    parser = argparse.ArgumentParser(prog="python -m benchmarks.schema_validation")
    parser.add_argument("--messages", type=int, default=200_000)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    port, registry_port = _free_port(), _free_port()
    broker = subprocess.Popen(
        [sys.executable, "-m", "trikafka", "--in-memory", "--listeners", f"PLAINTEXT://127.0.0.1:{port}",
         "--override", f"schema.registry.port={registry_port}", "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        bootstrap, url = f"127.0.0.1:{port}", f"http://127.0.0.1:{registry_port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + 60
        while True:  # the broker process is starting: its first answer is the signal
            try:
                admin.list_topics(timeout=1)
                schema_id = _register(url)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
        topics = {"plain": {}, "checked": {"confluent.value.schema.validation": "true"}}
        for future in admin.create_topics([NewTopic(t, 6, 1, config=c) for t, c in topics.items()]).values():
            future.result(30)
        value = b"\x00" + struct.pack(">i", schema_id) + b"\x00" * 95
        megabytes = args.messages * len(value) / 1e6
        print(f"{args.messages:,} x {len(value)} B, 6 partitions, acks=1")
        print("| topic | validation | MB/s | broker CPU s/MB |")
        print("|---|---|---|---|")
        for topic in topics:
            before = cpu_seconds(broker.pid)
            seconds = _produce(bootstrap, topic, value, args.messages)
            cpu = cpu_seconds(broker.pid) - before
            print(
                f"| {topic} | {'on' if topics[topic] else 'off'} | {megabytes / seconds:.1f} | {cpu / megabytes:.3f} |"
            )
    finally:
        broker.terminate()
        broker.wait(30)


if __name__ == "__main__":
    main()
