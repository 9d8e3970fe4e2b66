"""What the dev broker writes: --list-config, the start-up block, log lines in a pipe, JSON
lines, progress of loading a big data directory.

Output shapes are checked where users meet them: ``python -m trikafka`` as a subprocess whose
stdout and stderr are a pipe (a file or ``| grep`` alike), never a terminal.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from trikafka import cli
from trikafka.log import LogConfig
from trikafka.log.manager import PROGRESS_MIN_SEGMENTS, LogManager
from trikafka.testing.process import BrokerProcess

from .log.log_conformance import batch

ROOT = Path(__file__).resolve().parent.parent


# --- --list-config: the values the broker will use -------------------------------------------


def _listed(capsys, *argv: str) -> dict[str, str]:
    assert cli.main(["--list-config", *argv]) == 0
    out = {}
    for line in capsys.readouterr().out.splitlines():
        setting, _, _ = line.partition("\t# ")
        key, _, value = setting.partition("=")
        out[key] = value
    return out


def test_list_config_prints_the_dev_brokers_values_not_kafkas_defaults(capsys):
    listed = _listed(capsys)
    config = cli.build_config(cli.parse_args([]))
    assert listed["group.initial.rebalance.delay.ms"] == "0" == str(config.group_initial_rebalance_delay_ms)
    assert listed["log.dirs"] == config.as_properties()["log.dirs"]
    # every listed value is the one the broker would run with
    actual = config.as_properties()
    assert {k: v for k, v in listed.items() if k in actual} == actual


def test_list_config_follows_the_other_flags(capsys):
    listed = _listed(
        capsys, "--in-memory", "--override", "group.initial.rebalance.delay.ms=3000", "--override", "metrics.port=9404"
    )
    assert listed["group.initial.rebalance.delay.ms"] == "3000"
    assert listed["metrics.port"] == "9404"
    assert listed["log.dirs"] == ""
    assert listed["log.retention.bytes"] == cli.MEMORY_DEFAULTS["log.retention.bytes"]


def test_list_config_names_why_a_value_is_not_the_default(capsys):
    assert cli.main(["--list-config"]) == 0
    line = next(
        line for line in capsys.readouterr().out.splitlines() if line.startswith("group.initial.rebalance.delay.ms=")
    )
    assert line.endswith("[dev default; default 3000]")


def test_dev_defaults_are_one_table():
    """The broker's config, --list-config and the start-up block read the same table."""
    config, reasons = cli.resolve_config(cli.parse_args([]))
    for key, (value, _why) in cli.DEV_DEFAULTS.items():
        assert config.as_properties()[key] == value and reasons[key] == "dev default"
    changed = cli.changed_from_defaults(config, reasons)
    assert changed["group.initial.rebalance.delay.ms"] == ("0", "dev default")


# --- a broker process writing into a pipe ----------------------------------------------------

LONG_TOPIC = "orders-" + "x" * 200 + "-end"  # 211 characters: Kafka allows 249
LONG_CLIENT = "reporting-service-" + "c" * 150


def test_log_lines_in_a_pipe_are_never_wrapped(tmp_path):
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = BrokerProcess("--in-memory", cwd=tmp_path)  # stdout and stderr: one pipe
    try:
        broker.wait_ready()
        admin = AdminClient({"bootstrap.servers": broker.address})
        admin.create_topics([NewTopic(LONG_TOPIC, num_partitions=1, replication_factor=1)])[LONG_TOPIC].result(30)
        consumer = Consumer(
            {
                "bootstrap.servers": broker.address,
                "group.id": "wrap-check",
                "client.id": LONG_CLIENT,
                "session.timeout.ms": 6000,
            }
        )
        consumer.subscribe([LONG_TOPIC])
        for _ in range(100):  # bounded: 0.1 s a poll
            consumer.poll(0.1)
            if consumer.assignment():
                break
        assert consumer.assignment()
        consumer.close()  # LeaveGroup: "member <client.id>-<uuid> left wrap-check"
        broker.wait_for_output("left wrap-check")
        line = broker.wait_for_output("created topic")
        assert LONG_TOPIC in line
        left = broker.wait_for_output("left wrap-check")
        assert f"member {LONG_CLIENT}-" in left
    finally:
        assert broker.stop(15) == 0
    # Plain lines: time, level, logger, message; the start-up block as written, unwrapped.
    output = broker.output.splitlines()
    assert any(
        line.endswith(
            f"INFO trikafka.server: created topic {LONG_TOPIC} with 1 partition(s), id " + line.rsplit(" ", 1)[-1]
        )
        for line in output
    )
    # every line is a whole record or a line of the block: none is the tail of a wrapped one
    for line in output:
        assert line[:4].isdigit() or line.startswith(("trikafka ", "  ")), line
    assert "Ctrl-C stops gracefully" in broker.output


def test_log_format_json_writes_one_object_per_line(tmp_path):
    broker = BrokerProcess("--in-memory", "--log-format", "json", "--override", "metrics.port=0", cwd=tmp_path)
    try:
        ready = json.loads(broker.wait_for_output('"event": "ready"'))
    finally:
        assert broker.stop(15) == 0
    assert ready["level"] == "INFO" and ready["logger"] == "trikafka"
    assert ready["version"] and ready["listeners"][0].startswith("PLAINTEXT://127.0.0.1:")
    assert ready["config_changed"]["group.initial.rebalance.delay.ms"] == "0"
    assert ready["http"]["metrics"].endswith("/metrics")
    records = [json.loads(line) for line in broker.output.splitlines() if line.strip()]
    assert {"ts", "level", "logger", "message"} <= set(records[0])
    assert any(r["message"] == "broker 1 stopped" for r in records)


def test_the_start_up_block_says_where_everything_is(tmp_path):
    broker = BrokerProcess(
        "--data-dir",
        str(tmp_path / "data"),
        "--override",
        "metrics.port=0",
        "--override",
        "num.io.threads=3",
        cwd=tmp_path,
    )
    try:
        broker.wait_ready()
        broker.wait_for_output("Ctrl-C stops gracefully")
    finally:
        assert broker.stop(15) == 0
    block = broker.output[broker.output.index("broker 1 ready") :]
    from trikafka import __version__

    assert f"trikafka {__version__} · broker 1 ready · cluster {broker.cluster_id}" in broker.output
    assert "  metrics on http://127.0.0.1:" in block
    assert f"  listening on PLAINTEXT://127.0.0.1:{broker.port}" in block
    assert f"  data: {tmp_path / 'data'}" in block
    assert "    num.io.threads=3\n" in block
    assert "    group.initial.rebalance.delay.ms=0  (dev default)" in block
    assert "  open file limit (RLIMIT_NOFILE): " in block


# --- progress of loading many segments -------------------------------------------------------


def _data_dir_of_many_partitions(path: Path, partitions: int = 600) -> int:
    manager = LogManager([path])
    manager.create_logs("history", range(partitions), LogConfig(segment_bytes=100))
    for p in range(partitions):
        manager.get_log("history", p).append(batch(1), leader_epoch=0)  # its directory appears
    count = len(manager.logs)
    manager.close()
    return count


def test_loading_reports_progress_after_each_partition(tmp_path):
    total = _data_dir_of_many_partitions(tmp_path / "data")
    assert total == 600 >= PROGRESS_MIN_SEGMENTS
    seen: list[tuple[int, int]] = []
    LogManager([tmp_path / "data"], progress=lambda done, of, where: seen.append((done, of))).close()
    assert seen == [(i + 1, 600) for i in range(600)]


def test_loading_a_big_data_dir_logs_progress_lines_when_not_a_terminal(tmp_path):
    _data_dir_of_many_partitions(tmp_path / "data")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trikafka",
            "--data-dir",
            str(tmp_path / "data"),
            "--listeners",
            "PLAINTEXT://127.0.0.1:0",
            "--list-config",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0  # --list-config loads nothing
    assert "loading logs" not in result.stderr
    broker = BrokerProcess("--data-dir", str(tmp_path / "data"), cwd=tmp_path)
    try:
        broker.wait_ready()
    finally:
        assert broker.stop(15) == 0
    lines = [line for line in broker.output.splitlines() if "loading logs in" in line]
    # at every tenth of the partitions
    assert [line.rsplit(": ", 1)[1] for line in lines] == [
        f"{60 * i} of 600 partitions ({10 * i}%)" for i in range(1, 11)
    ]
    assert all(" INFO trikafka.log.manager: " in line for line in lines)


def test_a_small_data_dir_loads_quietly(tmp_path, caplog):
    seen: list[int] = []
    _data_dir_of_many_partitions(tmp_path / "data", partitions=10)
    LogManager([tmp_path / "data"], progress=lambda done, of, where: seen.append(done)).close()
    assert seen == list(range(1, 11))  # a reporter hears it ...
    with caplog.at_level("INFO", logger="trikafka.log.manager"):
        LogManager([tmp_path / "data"]).close()
    assert not [r for r in caplog.records if "loading logs" in r.getMessage()]  # ... the default one is quiet
