"""What one request costs the broker: the fixed cost behind ``make bench``'s busy-poll latency.

``python -m benchmarks.request_cost``. The busy-poll row (librdkafka, ``fetch.wait.max.ms=0``)
is a chain of small requests: about five empty Fetches per message, one Produce, one Fetch
with the record. Its figure moves with each request's cost, which this measures two ways,
with the requests librdkafka 2.x sends (Fetch v16 sessionless, read_committed, by topic id;
Produce v10, acks=1, one 100-byte record):

warm
    ``decode_request`` and ``KafkaApis.handle`` (response encoded, handed to the connection's
    capacity-1 channel) in a loop on the same request, in-process: the Python work of the codec and the
    handler alone, with hot caches (the decoder with a connection's ``LastRequest``, so a
    repeated Fetch is decoded once; a Produce never is). Minimum over runs, in µs.
on a socket
    One connection, one request in flight, a blocking client in a child process: the round
    trip, and the broker's CPU (user + system, ``getrusage``) per request. Everything is in
    it: the connection, trio's scheduler, the handler hop, the write. ApiVersions (a cached
    answer) shows the request path's floor. Medians over runs.

Noisy on a shared machine: compare checkouts back to back (``PYTHONPATH=<checkout>``).
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import struct
import sys
import time
import uuid

import trio

from trikafka import open_broker
from trikafka.network.request_channel import Request, open_response_channel
from trikafka.protocol.entities import build
from trikafka.protocol.headers import LastRequest, decode_request, decode_response, encode_request
from trikafka.protocol.records import build_batch
from trikafka.protocol.registry import ApiRegistry

__all__ = ["main", "measure"]

REGISTRY = ApiRegistry()
FETCH = REGISTRY.get(1, 16)
PRODUCE = REGISTRY.get(0, 10)
API_VERSIONS = REGISTRY.get(18, 3)
CLIENT_ID = "rdkafka"


def fetch_frame(topic_id: uuid.UUID, offset: int, correlation_id: int = 1) -> bytes:
    body = build(
        FETCH.request_type, replica_state={"replica_id": -1, "replica_epoch": -1}, max_wait=0,
        min_bytes=1, max_bytes=52428800, isolation_level=1, session_id=0, session_epoch=-1,
        topics=[{"topic_id": topic_id, "partitions": [{
            "partition": 0, "current_leader_epoch": 0, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1048576}]}],
        forgotten_topics_data=[], rack_id="",
    )
    return encode_request(FETCH, correlation_id, body, CLIENT_ID)


def produce_frame(topic: str, correlation_id: int = 1) -> bytes:
    records = build_batch([(None, b"x" * 100, (), 1)])
    body = build(
        PRODUCE.request_type, transactional_id=None, acks=1, timeout=30000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    )
    return encode_request(PRODUCE, correlation_id, body, CLIENT_ID)


def api_versions_frame(correlation_id: int = 1) -> bytes:
    body = build(API_VERSIONS.request_type, client_software_name="bench", client_software_version="1")
    return encode_request(API_VERSIONS, correlation_id, body, CLIENT_ID)


def _best(run, repeats: int = 7) -> float:
    return min(run() for _ in range(repeats))


async def _warm(broker, topic_id: uuid.UUID, topic: str, end: int, count: int) -> dict[str, float]:
    apis = broker.path.apis
    frames = {
        "Fetch v16, empty": fetch_frame(topic_id, end)[4:],
        "Fetch v16, 1 record": fetch_frame(topic_id, end - 1)[4:],
        "Produce v10, 1 record": produce_frame(topic)[4:],
    }
    out: dict[str, float] = {}
    for name, frame in frames.items():
        def decode(frame: bytes = frame) -> float:
            last = LastRequest()  # a connection's: the repeats of a Fetch are decoded once
            start = time.perf_counter()
            for _ in range(count):
                decode_request(frame, REGISTRY, last)
            return (time.perf_counter() - start) / count * 1e6

        out[f"decode {name}"] = _best(decode)
        decoded = decode_request(frame, REGISTRY)
        _check_answer(name, decoded.spec, await _answer(apis, decoded, len(frame)))

        async def handle(decoded=decoded, size: int = len(frame)) -> float:
            send, receive = open_response_channel()
            requests = [
                Request(0, "bench", "PLAINTEXT", "127.0.0.1", decoded.header, decoded.body,
                        decoded.spec, size, send)
                for _ in range(count)
            ]
            start = time.perf_counter()
            for request in requests:
                await apis.handle(request)
                receive.receive_nowait()  # taken, as the connection would
            return (time.perf_counter() - start) / count * 1e6

        out[f"handle {name}"] = min([await handle() for _ in range(7)])
    return out


async def _answer(apis, decoded, size: int) -> bytes:
    send, receive = open_response_channel()
    request = Request(0, "bench", "PLAINTEXT", "127.0.0.1", decoded.header, decoded.body,
                      decoded.spec, size, send)
    await apis.handle(request)
    return receive.receive_nowait().data


def _check_answer(name: str, spec, frame: bytes) -> None:
    """A figure is only worth having for a request that was answered without an error."""
    _, body = decode_response(spec, frame[4:])
    if spec.api_key == 1:
        partition = body.responses[0].partitions[0]
        codes = [body.error_code, partition.error_code]
        if ("1 record" in name) != bool(partition.records):
            raise RuntimeError(f"{name}: records {partition.records!r}")
    else:
        codes = [body.responses[0].partition_responses[0].error_code]
    if any(int(code) for code in codes):
        raise RuntimeError(f"{name} answered with error codes {[int(c) for c in codes]}")


async def _on_socket(broker, topic_id: uuid.UUID, end: int, seconds: float) -> dict[str, dict[str, float]]:
    out = {}
    frames = {
        "ApiVersions v3": api_versions_frame(),
        "Fetch v16, empty": fetch_frame(topic_id, end),
        "Fetch v16, 1 record": fetch_frame(topic_id, end - 1),
    }
    for name, frame in frames.items():
        before = resource.getrusage(resource.RUSAGE_SELF)
        child = await trio.run_process(
            [sys.executable, "-m", "benchmarks.request_cost", "--client", str(broker.port), frame.hex(), str(seconds)],
            capture_stdout=True,
        )
        after = resource.getrusage(resource.RUSAGE_SELF)
        result = json.loads(child.stdout)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        out[name] = {"round_trip_us": result["round_trip_us"], "broker_cpu_us": cpu / result["requests"] * 1e6}
    return out


def _client(port: int, frame: bytes, seconds: float) -> None:
    """One blocking connection, one request in flight; prints JSON (median of 3 runs)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def once() -> None:
        sock.sendall(frame)
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        got = 0
        while got < size:
            got += len(sock.recv(size - got))

    for _ in range(200):
        once()
    requests, rates = 200, []
    for _ in range(3):
        start, done = time.perf_counter(), 0
        while time.perf_counter() - start < seconds / 3:
            for _ in range(100):
                once()
            done += 100
        requests += done
        rates.append((time.perf_counter() - start) / done * 1e6)
    sock.close()
    print(json.dumps({"round_trip_us": sorted(rates)[1], "requests": requests}))


async def measure(count: int = 5000, seconds: float = 3.0) -> dict:
    async with open_broker(listeners="PLAINTEXT://127.0.0.1:0") as broker:
        topic = f"bench-cost-{uuid.uuid4().hex[:8]}"
        broker.replica_manager.create_topic(topic, 1, 1)
        info = broker.replica_manager.topics.get(topic)
        log = broker.replica_manager.get_log(topic, 0)
        for _ in range(10):  # a few 150-byte batches, as a latency run leaves them
            log.append(bytearray(build_batch([(None, b"x" * 100, (), 1)])), leader_epoch=0)
        end = log.log_end_offset
        results = {"on a socket": await _on_socket(broker, info.topic_id, end, seconds)}
        results["warm"] = await _warm(broker, info.topic_id, topic, end, count)
        broker.stop()
        return results


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        _client(int(sys.argv[2]), bytes.fromhex(sys.argv[3]), float(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000, help="requests per warm run")
    parser.add_argument("--seconds", type=float, default=3.0, help="per request kind on the socket")
    args = parser.parse_args()
    results = trio.run(measure, args.count, args.seconds)
    print("| on one connection | round trip µs | broker CPU µs per request |\n|---|---|---|")
    for name, figures in results["on a socket"].items():
        print(f"| {name} | {figures['round_trip_us']:.1f} | {figures['broker_cpu_us']:.1f} |")
    print("\n| warm, in-process | µs |\n|---|---|")
    for name, value in results["warm"].items():
        print(f"| {name} | {value:.2f} |")


if __name__ == "__main__":
    main()
