"""Where one request's time goes: µs per stage of trikafka's request path, beside the card ceiling.

``python -m benchmarks.breakdown`` (``make bench`` runs it). For four small requests — ApiVersions
v3, Metadata v12 (one topic), Produce v10 (acks=1, one 100-byte record) and an empty Fetch v16
(sessionless, by topic id, as librdkafka 2.x sends them) — every stage a request passes through is
run on its own, in a loop, with the broker's real objects (an embedded broker's ``KafkaApis``,
its metrics, a connection's decoder), and timed:

socket read     the connection's read of one waiting frame (``receive_some(RECEIVE_SIZE)``)
frame read      the frame decoder cutting one length-prefixed frame out of the bytes a read brought
header decode   the request header (kio), from the frame
body decode     the rest of ``decode_request`` (bounds checks, the body; a repeated small frame is
                decoded once per connection, as a connection's ``LastRequest`` does)
request build   the ``Request`` the connection sends to the handlers
hop to handler  one trip through the shared request channel to a waiting handler task: half of a
                measured ping-pong between two tasks over the card's two channels
dispatch        ``KafkaApis.handle`` less the API and the respond step (interceptor check, lookup,
                exception frame, timestamps)
API             the API's coroutine alone (``KafkaApis.handlers[key](request)``)
encode          the answer's bytes (``to_response``: header, body, one join)
respond         ``respond`` less the encode: client quotas, the send into the capacity-1 channel,
                the state-change counter
hop back        the other half of the ping-pong
write           the mute cycle's ``send_response`` and ``send_all`` on a socket (its peer drained)
metrics         ``BrokerMetrics.request_done``: the request's histograms

The in-process sum leaves out trio's scheduler and the kernel's epoll and socket calls around each
read and write. Those are in the last two columns, measured on a socket: the broker's CPU per
request (user + system, one blocking client, one request in flight) for trikafka and for the card
ceiling (``trio_card_ceiling.py``: the same tree of tasks and channels answering a fixed frame).
Their difference is what trikafka adds over the card's own shape; the stage rows say where.

Minimum over repeats for the stages (the least-disturbed run, on a shared machine), median of
three for the socket figures. ``--flame DIR``: a py-spy flame graph (SVG) per workload, the broker
recorded while one client sends that request (py-spy launches the broker as its own child, so no
ptrace of a foreign process is needed). Noisy machine: compare checkouts in one run with
``PYTHONPATH=<checkout> python -m benchmarks.breakdown``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import trio

from benchmarks.request_cost import (
    REGISTRY,
    api_versions_frame,
    fetch_frame,
    produce_frame,
)
from trikafka import open_broker
from trikafka.metrics import BrokerMetrics
from trikafka.network.connection_state import ConnectionState
from trikafka.network.request_channel import Request, open_response_channel
from trikafka.protocol.entities import build
from trikafka.protocol.framing import FrameDecoder
from trikafka.protocol.headers import LastRequest, decode_request, encode_request, peek_api
from trikafka.server.kafka_apis import to_response

__all__ = ["STAGES", "WORKLOADS", "main", "measure"]

METADATA = REGISTRY.get(3, 12)
STAGES = (
    "socket read", "frame read", "header decode", "body decode", "request build", "hop to handler", "dispatch",
    "API", "encode", "respond", "hop back", "write", "metrics",
)
WORKLOADS = ("ApiVersions", "Metadata", "Produce 1 record", "Fetch empty")
ROOT = Path(__file__).resolve().parent.parent


def metadata_frame(topic: str, correlation_id: int = 1) -> bytes:
    body = build(
        METADATA.request_type, topics=[{"topic_id": uuid.UUID(int=0), "name": topic}],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    )
    return encode_request(METADATA, correlation_id, body, "rdkafka")


def _frames(topic: str, topic_id: uuid.UUID, end: int) -> dict[str, bytes]:
    return {
        "ApiVersions": api_versions_frame(),
        "Metadata": metadata_frame(topic),
        "Produce 1 record": produce_frame(topic),
        "Fetch empty": fetch_frame(topic_id, end),
    }


def _loop(fn, count: int, repeats: int = 5) -> float:  # noqa: ANN001
    """µs per call of ``fn`` (no arguments), the minimum over ``repeats`` runs."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(count):
            fn()
        best = min(best, time.perf_counter() - start)
    return best / count * 1e6


async def _aloop(fn, count: int, repeats: int = 5) -> float:  # noqa: ANN001
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(count):
            await fn()
        best = min(best, time.perf_counter() - start)
    return best / count * 1e6


async def _hop_pair(count: int) -> float:
    """µs for one request to a handler task and its answer back, over the card's channels
    (shared request channel, the connection's capacity-1 channel), nothing else done."""
    requests_send, requests = trio.open_memory_channel(500)
    best = float("inf")

    async def handler() -> None:
        while True:
            try:
                item, respond = requests.receive_nowait()
            except trio.WouldBlock:
                try:
                    item, respond = await requests.receive()
                except trio.EndOfChannel:
                    return
            respond.send_nowait(item)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(handler)
        send, receive = trio.open_memory_channel(1)
        for _ in range(5):
            start = time.perf_counter()
            for i in range(count):
                try:
                    requests_send.send_nowait((i, send))
                except trio.WouldBlock:
                    await requests_send.send((i, send))
                await receive.receive()
            best = min(best, time.perf_counter() - start)
        await requests_send.aclose()
    return best / count * 1e6


def _request(decoded, size: int, channel) -> Request:  # noqa: ANN001
    return Request(
        processor=0, connection_id="bench", listener_name="PLAINTEXT", client_host="127.0.0.1",
        header=decoded.header, body=decoded.body, spec=decoded.spec, size=size, response_send=channel,
        principal="User:ANONYMOUS", start_time=time.perf_counter(),
    )


async def _stages(broker, name: str, frame: bytes, count: int, hop: float) -> dict[str, float]:  # noqa: ANN001
    apis = broker.path.apis
    body_frame = frame[4:]
    out: dict[str, float] = {}
    large = len(frame) >= 64 * 1024

    decoder = FrameDecoder(100 * 1024 * 1024)

    def frame_read() -> None:
        decoder.receive_data(frame)
        decoder.next_frame()

    out["socket read"] = await _read(frame, count)
    out["frame read"] = _loop(frame_read, count) if not large else 0.0
    spec = REGISTRY.get(*peek_api(body_frame)[:2])
    out["header decode"] = _loop(lambda: spec.read_request_header(body_frame, 0), count)
    last = LastRequest()
    decode = _loop(lambda: decode_request(body_frame, REGISTRY, last), count)
    out["body decode"] = max(0.0, decode - out["header decode"])
    decoded = decode_request(body_frame, REGISTRY, LastRequest())
    send, receive = open_response_channel()
    out["request build"] = _loop(lambda: _request(decoded, len(body_frame), send), count)
    out["hop to handler"] = hop / 2

    context = apis.context
    await apis.handle(_request(decoded, len(body_frame), send))  # a lazy family builds itself here
    receive.receive_nowait()
    handler = apis.handlers[decoded.header.request_api_key]

    async def handle() -> None:
        await apis.handle(_request(decoded, len(body_frame), send))
        receive.receive_nowait()

    async def api() -> None:
        await handler(_request(decoded, len(body_frame), send))

    request = _request(decoded, len(body_frame), send)
    result = await handler(request)

    def respond() -> None:
        context.respond(request, result)
        receive.receive_nowait()

    build_cost = out["request build"]
    total = await _aloop(handle, count) - build_cost
    out["API"] = await _aloop(api, count) - build_cost
    out["encode"] = _loop(lambda: to_response(request, result), count)
    respond_all = _loop(respond, count)
    out["respond"] = max(0.0, respond_all - out["encode"])
    out["dispatch"] = max(0.0, total - out["API"] - respond_all)
    out["hop back"] = hop / 2

    context.respond(request, result)
    response = receive.receive_nowait()
    out["write"] = await _write(response, count)

    metrics = BrokerMetrics()
    done = time.perf_counter()
    out["metrics"] = _loop(lambda: metrics.request_done(request, done), count)
    return out


async def _read(frame: bytes, count: int) -> float:
    """µs for the connection's read of one waiting frame (``receive_some(RECEIVE_SIZE)``)."""
    from trikafka.network import connection

    a, b = socket.socketpair()
    a.setblocking(False)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(a))
    size = getattr(connection, "RECEIVE_SIZE", 64 * 1024)
    best = float("inf")
    try:
        for _ in range(5):
            elapsed = 0.0
            for _ in range(count):
                b.sendall(frame)
                start = time.perf_counter()
                got = len(await stream.receive_some(size))
                elapsed += time.perf_counter() - start
                while got < len(frame):  # the rest, untimed (a frame over one read)
                    got += len(await stream.receive_some(size))
            best = min(best, elapsed)
    finally:
        await stream.aclose()
        b.close()
    return best / count * 1e6


async def _write(response, count: int) -> float:  # noqa: ANN001
    """µs for the mute cycle's send_response and a socket write of the answer."""
    from trikafka.network.connection_state import MuteState

    a, b = socket.socketpair()
    a.setblocking(False)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 21)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(a))
    state = ConnectionState("bench", REGISTRY, 100 * 1024 * 1024)
    best = float("inf")
    try:
        for _ in range(5):
            elapsed = 0.0
            for _ in range(count):
                state.state = MuteState.MUTED_AND_RESPONSE_PENDING
                start = time.perf_counter()
                out = state.send_response(response)
                if out.__class__ is tuple:
                    for part in out:
                        await stream.send_all(part)
                elif out is not None:
                    await stream.send_all(out)
                elapsed += time.perf_counter() - start
                size = len(out) if out.__class__ is not tuple else sum(map(len, out))
                while size > 0:
                    size -= len(b.recv(size))
            best = min(best, elapsed)
    finally:
        await stream.aclose()
        b.close()
    return best / count * 1e6


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _client(port: int, frame: bytes, seconds: float) -> dict:
    child = await trio.run_process(
        [sys.executable, "-m", "benchmarks.request_cost", "--client", str(port), frame.hex(), str(seconds)],
        capture_stdout=True,
    )
    return json.loads(child.stdout)


async def _card_on_socket(frame: bytes, seconds: float) -> dict[str, float]:
    """The card ceiling's CPU per request and round trip, the same client as trikafka's."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "benchmarks.trio_card_ceiling"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        line = b""
        while not line.endswith(b"\n"):  # READY 127.0.0.1:<port> <ms>
            chunk = await proc.stdout.receive_some(1)
            if not chunk:
                raise RuntimeError("the card ceiling exited before it was ready")
            line += chunk
        port = int(line.split()[1].rsplit(b":", 1)[1])
        before = _proc_cpu(proc.pid)
        result = await _client(port, frame, seconds)
        cpu = _proc_cpu(proc.pid) - before
    finally:
        await proc.stdin.aclose()
        with trio.move_on_after(10):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return {"round_trip_us": result["round_trip_us"], "cpu_us": cpu / result["requests"] * 1e6}


async def _trikafka_on_socket(port: int, frame: bytes, seconds: float) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = await _client(port, frame, seconds)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"round_trip_us": result["round_trip_us"], "cpu_us": cpu / result["requests"] * 1e6}


async def _setup(broker):  # noqa: ANN001, ANN202
    from trikafka.protocol.records import build_batch

    topic = f"bench-breakdown-{uuid.uuid4().hex[:8]}"
    broker.replica_manager.create_topic(topic, 1, 1)
    info = broker.replica_manager.topics.get(topic)
    log = broker.replica_manager.get_log(topic, 0)
    for _ in range(10):
        log.append(bytearray(build_batch([(None, b"x" * 100, (), 1)])), leader_epoch=0)
    return topic, info.topic_id, log


async def measure(count: int = 3000, seconds: float = 2.0, only: tuple[str, ...] = ()) -> dict:
    """Every workload's stages (µs), their sum, and the socket figures for trikafka and the card."""
    results: dict[str, dict] = {}
    async with open_broker(listeners="PLAINTEXT://127.0.0.1:0") as broker:
        topic, topic_id, log = await _setup(broker)
        hop = await _hop_pair(count)
        card_cpu = await _card_on_socket(api_versions_frame(), seconds)
        for name in WORKLOADS:
            if only and name not in only:
                continue
            # At the log's end now: an empty Fetch stays empty after the Produce rows appended.
            frame = _frames(topic, topic_id, log.log_end_offset)[name]
            stages = await _stages(broker, name, frame, count, hop)
            sock = await _trikafka_on_socket(broker.port, frame, seconds)
            results[name] = {
                "stages_us": stages,
                "sum_us": sum(stages.values()),
                "broker_cpu_us": sock["cpu_us"],
                "round_trip_us": sock["round_trip_us"],
            }
        broker.stop()
    return {"workloads": results, "card": card_cpu, "hop_pair_us": hop}


def table(data: dict) -> str:
    """The breakdown as Markdown: a row per stage, a column per workload."""
    names = list(data["workloads"])
    lines = ["| µs per request | " + " | ".join(names) + " | card ceiling |", "|---" * (len(names) + 2) + "|"]
    card_stage = {"hop to handler": data["hop_pair_us"] / 2, "hop back": data["hop_pair_us"] / 2}
    for stage in STAGES:
        cells = [f"{data['workloads'][n]['stages_us'].get(stage, 0.0):.2f}" for n in names]
        ceiling = card_stage.get(stage)
        lines.append(f"| {stage} | " + " | ".join(cells) + f" | {'' if ceiling is None else f'{ceiling:.2f}'} |")
    rows = (
        ("in-process sum", "sum_us", None),
        ("broker CPU on a socket", "broker_cpu_us", "cpu_us"),
        ("round trip on a socket", "round_trip_us", "round_trip_us"),
    )
    for label, key, card_key in rows:
        cells = [f"**{data['workloads'][n][key]:.1f}**" for n in names]
        card = "" if card_key is None else f"**{data['card'][card_key]:.1f}**"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {card} |")
    return "\n".join(lines) + "\n"


def flame(directory: Path, seconds: float) -> dict[str, str]:
    """A py-spy flame graph per workload: ``directory/flame-<workload>.svg``; {} without py-spy."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        return {}
    directory.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    for name in (*WORKLOADS, "card"):
        out = directory / f"flame-{name.split()[0].lower()}.svg"
        command = [
            spy, "record", "--rate", "499", "--nonblocking", "--format", "flamegraph", "-o", str(out), "--",
            sys.executable, "-m", "benchmarks.breakdown", "--serve", name, "--seconds", str(seconds),
        ]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=seconds * 4 + 120)
        if done.returncode == 0 and out.exists():
            written[name] = str(out)
        else:
            print(f"py-spy could not record {name}: {done.stderr.strip()[-300:]}", file=sys.stderr)
    return written


async def serve_card(seconds: float) -> None:
    """The card ceiling under the same client, in this process (its flame graph)."""
    from benchmarks import trio_card_ceiling as card

    requests_send, requests = trio.open_memory_channel(card.QUEUED_MAX_REQUESTS)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    async with trio.open_nursery() as nursery:
        for _ in range(card.HANDLERS):
            nursery.start_soon(card.handler, requests)
        channels = []
        for _ in range(card.PROCESSORS):
            send, receive = trio.open_memory_channel(card.CONNECTION_QUEUE_SIZE)
            channels.append(send)
            nursery.start_soon(card.processor, receive, requests_send)
        nursery.start_soon(card.acceptor, listeners[0], channels)
        await _client(listeners[0].socket.getsockname()[1], api_versions_frame(), seconds)
        nursery.cancel_scope.cancel()


async def serve(name: str, seconds: float) -> None:
    """The broker under one client sending ``name``'s frame for ``seconds`` (for --flame)."""
    if name == "card":
        await serve_card(seconds)
        return
    async with open_broker(listeners="PLAINTEXT://127.0.0.1:0") as broker:
        topic, topic_id, log = await _setup(broker)
        frame = _frames(topic, topic_id, log.log_end_offset)[name]
        await _client(broker.port, frame, seconds)
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.breakdown", description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000, help="calls per timed loop")
    parser.add_argument("--seconds", type=float, default=2.0, help="per request kind on the socket")
    parser.add_argument("--only", help="comma-separated workloads: " + ", ".join(WORKLOADS))
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--flame", type=Path, metavar="DIR", help="also record a py-spy flame graph per workload")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        trio.run(serve, args.serve, args.seconds)
        return 0
    only = tuple(args.only.split(",")) if args.only else ()
    data = trio.run(measure, args.count, args.seconds, only)
    if args.flame:
        data["flame_graphs"] = flame(args.flame, max(args.seconds, 3.0))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=1) + "\n")
    print(table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
