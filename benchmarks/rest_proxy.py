"""v2 produce over HTTP beside the Kafka protocol: ``python -m benchmarks.rest_proxy [--records N]``.

Starts ``python -m trikafka --in-memory --rest-proxy-port P`` and, in one run, sends the same
records (100-byte values, one partition, acks=all) three ways from this process: over HTTP to
the proxy's ``POST /topics/{t}`` with one httpx client (``binary`` format, batches of 1, 10
and 100 records per request, each request waiting for its answer), and with the project's
Trio producer (``trikafka.client``) straight over the Kafka protocol, each record awaited and
all records pipelined. Prints a table of records/s. The proxy itself produces with the same
Trio producer, so the difference is the HTTP hop and the JSON (base64) of each record.
"""

from __future__ import annotations

import argparse
import base64
import subprocess
import sys
import time

from benchmarks.produce_cpu import _free_port

__all__ = ["main"]

VALUE = b"x" * 100


def _wait_ready(url: str, deadline: float) -> None:
    import httpx

    while True:
        try:
            if httpx.get(f"{url}/v3/clusters", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the proxy at {url} did not answer")
        time.sleep(0.1)


def _http(url: str, topic: str, records: int, batch: int) -> float:
    import httpx

    body = {"records": [{"value": base64.b64encode(VALUE).decode(), "partition": 0}] * batch}
    headers = {"Content-Type": "application/vnd.kafka.binary.v2+json"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        http.post(f"/topics/{topic}", json=body).raise_for_status()  # connection and topic warm
        started = time.perf_counter()
        for _ in range(records // batch):
            answer = http.post(f"/topics/{topic}", json=body)
            answer.raise_for_status()
        return time.perf_counter() - started


def _kafka(bootstrap: str, topic: str, records: int, pipelined: bool) -> float:
    import trio

    from trikafka.client import open_producer

    async def run() -> float:
        async with open_producer(bootstrap, acks="all", linger_ms=0 if not pipelined else 5) as producer:
            await producer.send(topic, VALUE, partition=0)
            started = time.perf_counter()
            if pipelined:
                futures = [await producer.enqueue(topic, VALUE, partition=0) for _ in range(records)]
                for future in futures:
                    await future.wait()
            else:
                for _ in range(records):
                    await producer.send(topic, VALUE, partition=0)
            return time.perf_counter() - started

    return trio.run(run)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rest_proxy")
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    port, proxy_port = _free_port(), _free_port()
    broker = subprocess.Popen(
        [sys.executable, "-m", "trikafka", "--in-memory", "--listeners", f"PLAINTEXT://127.0.0.1:{port}",
         "--rest-proxy-port", str(proxy_port), "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        bootstrap, url = f"127.0.0.1:{port}", f"http://127.0.0.1:{proxy_port}"
        _wait_ready(url, time.monotonic() + 60)
        n = args.records
        rows = []
        for batch in (1, 10, 100):
            count = n // 10 if batch == 1 else n
            rows.append((f"HTTP v2 produce, httpx, {batch} record(s) per request", count,
                         _http(url, f"http-{batch}", count, batch)))
        awaited = _kafka(bootstrap, "kafka-1", n // 10, False)
        rows.append(("Kafka protocol, Trio producer, each record awaited", n // 10, awaited))
        rows.append(("Kafka protocol, Trio producer, pipelined", n, _kafka(bootstrap, "kafka-n", n, True)))
        print(f"100-byte values, one partition, acks=all, one client; {time.strftime('%Y-%m-%d')}")
        print("| how | records | records/s |")
        print("|---|---|---|")
        for name, count, seconds in rows:
            print(f"| {name} | {count:,} | {count / seconds:,.0f} |")
    finally:
        broker.terminate()
        broker.wait(30)


if __name__ == "__main__":
    main()
