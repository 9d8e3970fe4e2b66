"""Helpers for the command tests: run ``python -m trikafka`` as a user would, and real data.

Every command runs as a subprocess of this checkout (stdout, stderr and the exit code are what
a script sees); data is produced and read back with confluent-kafka, not with our client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "Run", "confluent_consume", "confluent_produce", "trikafka"]

ROOT = Path(__file__).resolve().parents[2]


class Run:
    def __init__(self, completed: subprocess.CompletedProcess) -> None:
        self.code = completed.returncode
        self.out = completed.stdout
        self.err = completed.stderr

    def json(self) -> Any:
        return json.loads(self.out)

    def __repr__(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def trikafka(*args: str, bootstrap: str | None = None, input: str | bytes | None = None, timeout: float = 60) -> Run:
    """``python -m trikafka ARGS -b BOOTSTRAP``; text unless ``input`` is bytes."""
    command = [sys.executable, "-m", "trikafka", *args]
    if bootstrap is not None:
        command += ["-b", bootstrap]
    binary = isinstance(input, bytes)
    env = {**os.environ, "COLUMNS": "200", "TERM": "dumb"}
    completed = subprocess.run(
        command, cwd=ROOT, input=input, capture_output=True, text=not binary, timeout=timeout, env=env
    )
    return Run(completed)


def confluent_produce(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes, int | None]], headers: list | None = None
) -> None:
    """(key, value, partition) records, acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors = []
    for key, value, partition in records:
        kwargs: dict[str, Any] = {
            "key": key,
            "value": value,
            "headers": headers,
            "on_delivery": lambda err, _: err and errors.append(err),
        }
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, **kwargs)
    assert producer.flush(30) == 0
    assert errors == []


def confluent_consume(bootstrap: str, topic: str, count: int, **config: Any) -> list[Any]:
    """``count`` messages of ``topic`` from the beginning (a throwaway group)."""
    import time
    import uuid

    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": config.pop("group_id", f"check-{uuid.uuid4()}"),
                         "auto.offset.reset": "earliest", **config})
    consumer.subscribe([topic])
    out = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            out.append(message)
    finally:
        consumer.close()
    return out
