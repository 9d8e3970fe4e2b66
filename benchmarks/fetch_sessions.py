"""What incremental fetch sessions (KIP-227) save: bytes of one idle Fetch, each way.

``python -m benchmarks.fetch_sessions [--partitions N]``. A consumer of N partitions of one
topic, all caught up, polls once: without a session (epoch -1, every partition named and
answered) and inside a session (an incremental fetch that names nothing and is answered with
nothing). The broker runs in-process on the in-memory transport; the figures are the encoded
frames (size prefix and headers included), so they are exact and the same on every machine.
Fetch v12 (topic names) and v13+ (topic ids: 16-byte ids instead of names) are both shown.
"""

from __future__ import annotations

import argparse

import trio

from trikafka.protocol.entities import build
from trikafka.protocol.headers import encode_request, encode_response
from trikafka.protocol.registry import ApiRegistry, ApiVersionSpec
from trikafka.testing import open_test_broker

__all__ = ["measure"]

TOPIC = "bench-fetch-sessions-topic"


def _fetch(version: int, topic, partitions: list[int], *, session_id: int, epoch: int):
    spec = ApiRegistry().get(1, version)
    by_id = version >= 13
    return spec, build(
        spec.request_type, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=52428800, isolation_level=0,
        session_id=session_id, session_epoch=epoch, rack_id="", forgotten_topics_data=[],
        topics=[] if not partitions else [{
            "topic": None if by_id else topic, "topic_id": topic if by_id else None,
            "partitions": [{"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                            "log_start_offset": -1, "partition_max_bytes": 1048576} for p in partitions]}],
    )


def _sizes(spec: ApiVersionSpec, request, response) -> tuple[int, int]:
    return len(encode_request(spec, 1, request, "consumer-1")), len(encode_response(spec, 1, response))


async def measure(partitions: int = 100) -> dict[str, tuple[int, int]]:
    """(request bytes, response bytes) of one idle poll, per mode."""
    registry = ApiRegistry()
    figures = {}
    async with open_test_broker() as tb, tb.client() as client:
        await client.request(
            build(
                registry.get(19, 7).request_type,
                timeout=1000,
                validate_only=False,
                topics=[
                    {
                        "name": TOPIC,
                        "num_partitions": partitions,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
            )
        )
        described = await client.request(build(
            registry.get(3, 12).request_type, topics=[{"name": TOPIC, "topic_id": None}],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False,
            include_cluster_authorized_operations=False,
        ))
        topic_id = described.topics[0].topic_id
        for version in (12, 13):
            key = topic_id if version >= 13 else TOPIC
            everything = list(range(partitions))
            spec, sessionless = _fetch(version, key, everything, session_id=0, epoch=-1)
            figures[f"v{version} sessionless"] = _sizes(spec, sessionless, await client.request(sessionless))
            spec, full = _fetch(version, key, everything, session_id=0, epoch=0)
            opened = await client.request(full)
            assert opened.session_id > 0
            spec, idle = _fetch(version, key, [], session_id=opened.session_id, epoch=1)
            answer = await client.request(idle)
            assert answer.error_code == 0 and not answer.responses
            figures[f"v{version} incremental"] = _sizes(spec, idle, answer)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100)
    args = parser.parse_args()
    figures = trio.run(measure, args.partitions)
    print(f"idle Fetch, one topic of {args.partitions} partitions, bytes per poll")
    print("| mode | request | response |\n|---|---|---|")
    for mode, (req, resp) in figures.items():
        print(f"| {mode} | {req} | {resp} |")


if __name__ == "__main__":
    main()
