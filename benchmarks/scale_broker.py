"""The broker process the scale curves measure (benchmarks.scale, benchmarks.scale_restart):
spawned on a data directory or in memory, restartable on the same directory, with the
AdminClient calls that grow its topics."""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks.targets import ROOT, api_versions_request, request_response
from trikafka.testing.process import BrokerProcess

__all__ = ["READY_TIMEOUT", "TOPICS_PER_REQUEST", "TOPIC_PARTITIONS", "ScaleBroker"]

TOPIC_PARTITIONS = 10
TOPICS_PER_REQUEST = 100
READY_TIMEOUT = 300.0


class ScaleBroker:
    """A broker process on ``data`` (None: in memory), restartable on the same directory."""

    def __init__(self, data: Path | None) -> None:
        self.data = data
        self.process: BrokerProcess | None = None
        self._admin = None

    def start(self) -> float:
        """Spawn; returns ms until the first ApiVersions is answered."""
        args = ("--data-dir", str(self.data)) if self.data else ("--in-memory",)
        start = time.perf_counter()
        self.process = BrokerProcess(*args, "--log-level", "WARNING", cwd=ROOT)
        self.process.wait_ready(READY_TIMEOUT)
        request_response(self.process.host, self.process.port, api_versions_request(3), timeout=READY_TIMEOUT)
        return (time.perf_counter() - start) * 1000

    @property
    def pid(self) -> int:
        return self.process.process.pid

    def admin(self):  # noqa: ANN201
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient({"bootstrap.servers": self.process.address, "log_level": 3})
        return self._admin

    def create(self, first: int, count: int) -> float:
        """Create topics ``scale-<first>`` … of TOPIC_PARTITIONS each; returns seconds."""
        from confluent_kafka.admin import NewTopic

        started = time.perf_counter()
        for start in range(first, first + count, TOPICS_PER_REQUEST):
            names = [f"scale-{i:06d}" for i in range(start, min(start + TOPICS_PER_REQUEST, first + count))]
            futures = self.admin().create_topics(
                [NewTopic(n, TOPIC_PARTITIONS, 1) for n in names], request_timeout=600, operation_timeout=600
            )
            for future in futures.values():
                future.result(timeout=600)
        return time.perf_counter() - started

    def create_named(self, name: str) -> None:
        from confluent_kafka.admin import NewTopic

        futures = self.admin().create_topics([NewTopic(name, TOPIC_PARTITIONS, 1)], request_timeout=600)
        futures[name].result(timeout=600)

    def stop(self) -> float:
        self._admin = None
        started = time.perf_counter()
        if self.process is not None:
            self.process.stop(READY_TIMEOUT)
        return (time.perf_counter() - started) * 1000

    def kill(self) -> None:
        self._admin = None
        if self.process is not None:
            self.process.kill()
