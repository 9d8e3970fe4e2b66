"""``top``: the protocol panels against a broker with data, the request panels with ``--live``,
and the rich view as a person sees it, captured from a real terminal (tmux)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid

from tests.commands.support import ROOT, confluent_produce, trikafka
from tests.commands.test_groups import _member


def test_top_json_shows_topics_sizes_offsets_groups_and_lag(kafka_broker):
    b = kafka_broker.bootstrap_servers
    assert trikafka("topics", "create", "metrics", "--partitions", "2", bootstrap=b).code == 0
    confluent_produce(b, "metrics", [(None, b"x" * 100, i % 2) for i in range(20)])
    consumer = _member(b, "dash", "metrics", 5)
    try:
        run = trikafka("top", "--json", "-n", "2", "--interval", "0.2", bootstrap=b)
    finally:
        consumer.close()
    assert run.code == 0, run
    first, second = (json.loads(line) for line in run.out.splitlines())
    [topic] = [t for t in second["topics"] if t["name"] == "metrics"]
    assert (topic["partitions"], topic["end_offset"]) == (2, 20)
    assert topic["size"] > 20 * 100 and topic["messages_per_s"] == 0.0
    [group] = [g for g in second["groups"] if g["group"] == "dash"]
    assert (group["state"], group["members"]) == ("Stable", 1)
    # 5 committed on the partition it read first (10 records): lag 5 there; the other has no
    # commit, so no lag (kafka-consumer-groups prints "-" for it) rather than a guess.
    assert group["lag"] == 5
    assert first["requests"] is None and second["connections"] is None  # not in the protocol


def test_top_live_runs_the_broker_and_shows_its_request_metrics():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = trikafka("top", "--live", "--json", "-n", "3", "--interval", "0.2", bootstrap=f"127.0.0.1:{port}")
    assert run.code == 0, run
    last = json.loads(run.out.splitlines()[-1])
    assert last["metrics_source"] == "in-process broker statistics()"
    assert last["connections"]["PLAINTEXT"] >= 1
    metadata = last["requests"]["Metadata"]
    assert metadata["requests"] >= 3 and metadata["per_s"] > 0
    assert metadata["p99_ms"] >= metadata["p50_ms"] > 0
    assert set(metadata) >= {"queue_ms", "local_ms", "remote_ms", "resp-queue_ms", "send_ms"}


def _tmux() -> None:
    assert shutil.which("tmux"), "tmux is needed to see top as a person does: `make system-deps` installs it"


def _capture(socket_name: str, target: str, wanted: list[str], limit_s: float = 60) -> str:
    """The pane's text once every string in ``wanted`` is on it (bounded retries)."""
    screen = ""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        screen = subprocess.run(
            ["tmux", "-L", socket_name, "capture-pane", "-p", "-t", target], capture_output=True, text=True
        ).stdout
        if all(text in screen for text in wanted):
            return screen
        time.sleep(0.2)
    raise AssertionError(f"not all of {wanted} appeared within {limit_s} s; the pane shows:\n{screen}")


def test_top_in_a_terminal(kafka_broker):
    b = kafka_broker.bootstrap_servers
    confluent_produce(b, "screen-orders", [(None, b"y" * 50, 0) for _ in range(30)])
    consumer = _member(b, "screen-group", "screen-orders", 10)
    _tmux()
    socket_name = f"trikafka-test-{uuid.uuid4().hex[:8]}"
    command = f"{sys.executable} -m trikafka top -b {b} -n 120"
    try:
        subprocess.run(
            [
                "tmux",
                "-L",
                socket_name,
                "new-session",
                "-d",
                "-s",
                "top",
                "-x",
                "200",
                "-y",
                "50",
                "-c",
                str(ROOT),
                "env",
                "-u",
                "COLUMNS",
                "-u",
                "LINES",
                f"PATH={os.environ['PATH']}",
                "sh",
                "-c",
                command,
            ],
            check=True,
        )
        screen = _capture(socket_name, "top", ["trikafka top", "screen-orders", "screen-group", "Stable", "20"])
    finally:
        consumer.close()
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    lines = screen.splitlines()
    assert any("screen-orders" in line and "30" in line for line in lines), screen
    assert any("screen-group" in line and "Stable" in line and line.rstrip(" │").endswith("20") for line in lines), (
        screen
    )
    assert "Per-request metrics are not part of the Kafka protocol" in screen
    assert "Requests" in screen and "Topics (" in screen and "Groups (" in screen


def test_top_live_in_a_terminal_shows_the_time_split():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    _tmux()
    socket_name = f"trikafka-test-{uuid.uuid4().hex[:8]}"
    command = f"{sys.executable} -m trikafka top --live -b 127.0.0.1:{port} -n 120"
    try:
        subprocess.run(
            [
                "tmux",
                "-L",
                socket_name,
                "new-session",
                "-d",
                "-s",
                "top",
                "-x",
                "200",
                "-y",
                "50",
                "-c",
                str(ROOT),
                "env",
                "-u",
                "COLUMNS",
                "-u",
                "LINES",
                f"PATH={os.environ['PATH']}",
                "sh",
                "-c",
                command,
            ],
            check=True,
        )
        screen = _capture(socket_name, "top", ["Metadata", "ListGroups", "PLAINTEXT", "resp-queue ms"])
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    assert all(
        column in screen for column in ("req/s", "p50 ms", "p99 ms", "queue ms", "local ms", "remote ms", "send ms")
    )
    assert "in-process broker statistics()" in screen


def test_the_dev_broker_with_live_shows_top_and_stops_on_sigint(tmp_path):
    """``python -m trikafka --live``: the broker and top's view in one process; SIGINT stops
    both gracefully (exit 0)."""
    import signal
    import socket

    _tmux()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = tmp_path / "live.sh"
    script.write_text(
        f"cd {ROOT}\n{sys.executable} -m trikafka --in-memory --listeners PLAINTEXT://127.0.0.1:{port} --live\n"
        "echo EXIT=$?\nsleep 60\n"
    )
    socket_name = f"trikafka-test-{uuid.uuid4().hex[:8]}"
    try:
        subprocess.run(["tmux", "-L", socket_name, "new-session", "-d", "-s", "live", "-x", "200", "-y", "50",
                        "env", "-u", "COLUMNS", "-u", "LINES", "sh", str(script)], check=True)
        screen = _capture(
            socket_name, "live", ["trikafka top", "in-process broker statistics()", "Metadata", "PLAINTEXT"]
        )
        assert "Per-request metrics are not part" not in screen
        shell = subprocess.run(["tmux", "-L", socket_name, "list-panes", "-t", "live", "-F", "#{pane_pid}"],
                               capture_output=True, text=True, check=True).stdout.strip()
        broker = subprocess.run(["pgrep", "-P", shell], capture_output=True, text=True, check=True).stdout.split()[0]
        os.kill(int(broker), signal.SIGINT)
        after = _capture(socket_name, "live", ["EXIT="])
        assert "EXIT=0" in after and "Traceback" not in after, after
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)


def test_produce_shows_a_progress_bar_for_a_file_on_a_terminal(kafka_broker, tmp_path):
    _tmux()
    data = tmp_path / "big.txt"
    data.write_text("".join(f"record {i:06d} " + "x" * 100 + "\n" for i in range(20000)))
    script = tmp_path / "produce.sh"
    script.write_text(
        f"cd {ROOT}\n{sys.executable} -m trikafka produce progress --file {data} -b {kafka_broker.bootstrap_servers}\n"
        "echo EXIT=$?\nsleep 60\n"
    )
    socket_name = f"trikafka-test-{uuid.uuid4().hex[:8]}"
    try:
        subprocess.run(["tmux", "-L", socket_name, "new-session", "-d", "-s", "p", "-x", "160", "-y", "20",
                        "env", "-u", "COLUMNS", "-u", "LINES", "sh", str(script)], check=True)
        screen = _capture(socket_name, "p", ["EXIT="])
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    assert "EXIT=0" in screen and "Produced 20000 records" in screen, screen
    bar = next(line for line in screen.splitlines() if line.startswith("produce"))
    assert "━" in bar and "2.3/2.3 MB" in bar, screen


def test_top_reads_request_metrics_from_the_brokers_prometheus_endpoint(tmp_path):
    """``top --metrics URL`` against a broker process serving ``/metrics`` (metrics.port): the
    request, connection and byte-rate panels come from the scrape, with the JMX exporter's
    names, after real traffic."""
    from trikafka.testing.process import BrokerProcess

    broker = BrokerProcess("--in-memory", "--override", "metrics.port=0", cwd=tmp_path)
    try:
        broker.wait_ready()
        url = broker.wait_for_output("metrics on").split("metrics on", 1)[1].strip().rstrip("/")
        url = url if url.endswith("/metrics") else url + "/metrics"
        confluent_produce(broker.address, "scraped", [(None, b"z" * 1000, 0) for _ in range(50)])
        run = trikafka("top", "--metrics", url, "--json", "-n", "2", "--interval", "0.3", bootstrap=broker.address)
    finally:
        broker.stop()
    assert run.code == 0, run
    last = json.loads(run.out.splitlines()[-1])
    assert last["metrics_source"] == f"Prometheus {url}"
    produce = last["requests"]["Produce"]
    assert produce["requests"] >= 1 and produce["p99_ms"] >= produce["p50_ms"] > 0
    assert last["requests"]["Metadata"]["per_s"] > 0  # top's own Metadata between two scrapes
    assert last["connections"]["PLAINTEXT"] >= 1
    assert last["bytes_in_per_s"] is not None and last["bytes_out_per_s"] is not None
    [topic] = [t for t in last["topics"] if t["name"] == "scraped"]
    assert topic["end_offset"] == 50 and topic["size"] > 50 * 1000
