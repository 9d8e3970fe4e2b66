"""kio's own build+write against trikafka's generated encoder, for four common responses.

Run: ``python -m benchmarks.codec``. Prints µs per response body for each path. This is the
figure behind keeping ``trikafka/protocol/encoder.py`` (see docs/architecture.md).
"""

from __future__ import annotations

import io
import timeit
import uuid
from typing import Any

from kio.serial import entity_writer

from trikafka.protocol.encoder import encode
from trikafka.protocol.entities import build
from trikafka.protocol.registry import ApiRegistry

__all__ = ["main"]

RECORDS = bytes(16 * 1024)


def _fetch() -> dict[str, Any]:
    return {
        "throttle_time": 0, "error_code": 0, "session_id": 0,
        "responses": [{
            "topic": "bench", "topic_id": uuid.UUID(int=7),
            "partitions": [{
                "partition_index": p, "error_code": 0, "high_watermark": 1000,
                "last_stable_offset": 1000, "log_start_offset": 0, "aborted_transactions": None,
                "preferred_read_replica": -1, "records": RECORDS,
            } for p in range(3)],
        }],
    }


def _metadata() -> dict[str, Any]:
    return {
        "throttle_time": 0, "cluster_id": "abcdefghijklmnopqrstuv", "controller_id": 1,
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "topics": [{
            "error_code": 0, "name": f"topic-{t}", "topic_id": uuid.UUID(int=t), "is_internal": False,
            "partitions": [{
                "error_code": 0, "partition_index": p, "leader_id": 1, "leader_epoch": 0,
                "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": [],
            } for p in range(3)],
            "topic_authorized_operations": -(2**31),
        } for t in range(10)],
    }


def _produce() -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "responses": [{"name": "bench", "partition_responses": [{
            "index": 0, "error_code": 0, "base_offset": 42, "log_append_time": None,
            "log_start_offset": 0, "record_errors": [], "error_message": None,
        }]}],
    }


def _api_versions(registry: ApiRegistry) -> dict[str, Any]:
    return {
        "error_code": 0, "throttle_time": 0, "finalized_features_epoch": -1,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in registry.ranges()],
    }


def main() -> None:
    registry = ApiRegistry()
    cases = [
        ("Fetch v12 (3 partitions x 16 KiB)", 1, 12, _fetch()),
        ("Metadata v12 (10 topics x 3 partitions)", 3, 12, _metadata()),
        ("Produce v9 (1 partition)", 0, 9, _produce()),
        ("ApiVersions v3 (31 apis)", 18, 3, _api_versions(registry)),
    ]
    print(f"{'response':42} {'kio build+write':>16} {'encoder':>10} {'ratio':>7}")
    for name, key, version, values in cases:
        cls = registry.get(key, version).response_type
        write = entity_writer(cls)

        def kio_path(cls: type = cls, values: dict = values, write: Any = write) -> bytes:
            buffer = io.BytesIO()
            write(buffer, build(cls, **values))
            return buffer.getvalue()

        def encoder_path(cls: type = cls, values: dict = values) -> bytes:
            return encode(cls, **values)

        assert kio_path() == encoder_path(), name
        results = []
        for fn in (kio_path, encoder_path):
            n, _ = timeit.Timer(fn).autorange()
            best = min(timeit.repeat(fn, number=n, repeat=5)) / n
            results.append(best * 1e6)
        print(f"{name:42} {results[0]:14.1f}µs {results[1]:8.1f}µs {results[0] / results[1]:6.1f}x")


if __name__ == "__main__":
    main()
