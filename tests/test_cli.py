"""The CLI as a function: ``main(argv) -> int``, and how flags, overrides and files combine.

Only paths that return before the broker starts are driven here; the running process is
tested end to end in ``tests/compat/``.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from trikafka import BrokerConfig, ConfigError, cli
from trikafka.cli import DEFAULT_DATA_DIR, build_config, parse_args
from trikafka.security.config import SECURITY_KEYS


def _error_lines(capsys) -> list[str]:
    captured = capsys.readouterr()
    assert captured.out == ""
    return [line for line in captured.err.splitlines() if line.strip()]


def test_bad_override_value_exits_2_with_one_clear_line(capsys):
    assert cli.main(["--override", "num.io.threads=zero"]) == 2
    (line,) = _error_lines(capsys)
    assert line.startswith("trikafka: ")
    assert "num.io.threads" in line
    assert "zero" in line
    assert "an integer in [1, 1024]" in line
    assert "Traceback" not in line


def test_unknown_override_key_suggests_the_close_key(capsys):
    assert cli.main(["--override", "num.io.thread=4"]) == 2
    (line,) = _error_lines(capsys)
    assert "num.io.thread" in line
    assert "did you mean 'num.io.threads'" in line


def test_override_without_equals_sign(capsys):
    assert cli.main(["--override", "num.io.threads"]) == 2
    (line,) = _error_lines(capsys)
    assert "--override takes KEY=VALUE" in line
    assert "num.io.threads" in line


def test_bad_listeners_flag(capsys):
    assert cli.main(["--listeners", "localhost:9092"]) == 2
    (line,) = _error_lines(capsys)
    assert "listeners" in line
    assert "localhost:9092" in line
    assert "NAME://host:port" in line


def test_missing_config_file(capsys, tmp_path):
    missing = tmp_path / "nope.properties"
    assert cli.main(["--config", str(missing)]) == 2
    (line,) = _error_lines(capsys)
    assert str(missing) in line


def test_bad_config_file_line(capsys, tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("num.io.threads=4\nnonsense\n", encoding="utf-8")
    assert cli.main(["--config", str(path)]) == 2
    (line,) = _error_lines(capsys)
    assert f"{path}:2" in line


def test_bad_log_level(capsys):
    assert cli.main(["--log-level", "LOUD", "--in-memory"]) == 2
    (line,) = _error_lines(capsys)
    assert "LOUD" in line


def test_list_config_prints_every_key(capsys):
    assert cli.main(["--list-config"]) == 0
    captured = capsys.readouterr()
    printed = {}
    for line in captured.out.splitlines():
        setting, _, doc = line.partition("\t# ")
        key, sep, default = setting.partition("=")
        assert sep and doc, line
        printed[key] = default
    keys = [f.metadata["key"] for f in attrs.fields(BrokerConfig) if f.name != "security"]
    assert sorted(printed) == sorted([*keys, *SECURITY_KEYS])
    assert printed["num.io.threads"] == "8"
    assert printed["socket.request.max.bytes"] == "104857600"


def test_list_config_refuses_a_config_the_broker_would_refuse(capsys):
    """--list-config shows the values the broker would use: a bad override is the same one
    clear line and exit code 2 as when starting."""
    assert cli.main(["--list-config", "--override", "num.io.threads=zero"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert "num.io.threads" in line and "zero" in line


# --- precedence -------------------------------------------------------------------------


def _properties(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(text, encoding="utf-8")
    return path


def test_precedence_file_then_override_then_listeners(tmp_path):
    path = _properties(
        tmp_path,
        "num.io.threads=2\n"
        "num.network.threads=5\n"
        "queued.max.requests=42\n"
        "listeners=PLAINTEXT://127.0.0.1:1111\n",
    )
    config = build_config(
        parse_args(
            [
                "--config",
                str(path),
                "--override",
                "num.io.threads=3",
                "--override",
                "listeners=PLAINTEXT://127.0.0.1:2222",
                "--listeners",
                "PLAINTEXT://127.0.0.1:3333",
                "--in-memory",
            ]
        )
    )
    assert config.queued_max_requests == 42  # file only
    assert config.num_network_threads == 5  # file only
    assert config.num_io_threads == 3  # --override beats the file
    assert [listener.port for listener in config.listeners] == [3333]  # --listeners beats both


def test_override_beats_file_without_listeners_flag(tmp_path):
    path = _properties(tmp_path, "listeners=PLAINTEXT://127.0.0.1:1111\n")
    config = build_config(
        parse_args(
            ["--config", str(path), "--override", "listeners=PLAINTEXT://127.0.0.1:2222"]
        )
    )
    assert [listener.port for listener in config.listeners] == [2222]


def test_later_override_of_the_same_key_wins():
    config = build_config(
        parse_args(["--override", "num.io.threads=3", "--override", "num_io_threads=4"])
    )
    assert config.num_io_threads == 4


def test_in_memory_means_no_log_dirs(tmp_path):
    path = _properties(tmp_path, "log.dirs=/var/lib/kafka\n")
    config = build_config(parse_args(["--config", str(path), "--in-memory"]))
    assert config.log_dirs is None
    assert build_config(parse_args(["--in-memory"])).log_dirs is None


def test_in_memory_keeps_a_bounded_window_unless_told_otherwise(tmp_path):
    config = build_config(parse_args(["--in-memory"]))
    assert (config.log_retention_bytes, config.log_segment_bytes) == (128 * 2**20, 16 * 2**20)
    assert config.log_retention_check_interval_ms == 1000
    # Kafka's keys override it, in either spelling, from the file or the command line.
    path = _properties(tmp_path, "log.segment.bytes=1073741824\n")
    config = build_config(
        parse_args(
            ["--in-memory", "--config", str(path), "--override", "log_retention_bytes=-1"]
        )
    )
    assert (config.log_retention_bytes, config.log_segment_bytes) == (-1, 2**30)
    assert config.log_retention_check_interval_ms == 1000
    # Files keep Kafka's defaults.
    config = build_config(parse_args(["--data-dir", str(tmp_path)]))
    assert (config.log_retention_bytes, config.log_segment_bytes) == (-1, 2**30)
    assert config.log_retention_check_interval_ms == 300_000


def test_default_data_dir():
    assert DEFAULT_DATA_DIR == "./trikafka-data"
    config = build_config(parse_args([]))
    assert config.log_dirs == (str(Path(DEFAULT_DATA_DIR)),)


def test_data_dir_flag_beats_the_file(tmp_path):
    path = _properties(tmp_path, "log.dirs=/from/file\n")
    assert build_config(parse_args(["--config", str(path)])).log_dirs == ("/from/file",)
    config = build_config(parse_args(["--config", str(path), "--data-dir", str(tmp_path)]))
    assert config.log_dirs == (str(tmp_path),)


def test_build_config_raises_config_error():
    with pytest.raises(ConfigError) as info:
        build_config(parse_args(["--override", "socket.request.max.bytes=-5"]))
    assert info.value.key == "socket.request.max.bytes"


def test_dotted_keys_in_overrides_and_files_alike(tmp_path):
    path = _properties(tmp_path, "num_network_threads=7\n")
    config = build_config(
        parse_args(["--config", str(path), "--override", "connections_max_idle_ms=1000"])
    )
    assert config.num_network_threads == 7
    assert config.connections_max_idle_ms == 1000


def test_the_cli_does_not_import_test_tooling():
    """The dev broker's start-up time (goal < 500 ms to the first answer) must not pay for
    pytest, which ``trio.testing`` imports: only the in-memory transport uses it, lazily."""
    import subprocess
    import sys

    # trikafka.broker too: the CLI imports it only when it starts one (tests/test_startup_imports.py).
    code = (
        "import sys, trikafka.cli, trikafka.broker; print(sorted(m for m in ('pytest', "
        "'trio.testing') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_dev_request_memory_pool_is_bounded_and_fits_the_largest_request():
    """queued.max.request.bytes: 256 MiB in the dev broker (Kafka's -1 when set so), never
    below a socket.request.max.bytes the user raised (Kafka requires the pool to fit it)."""
    config, reasons = cli.resolve_config(cli.parse_args([]))
    assert config.queued_max_request_bytes == 256 * 1024 * 1024
    assert reasons["queued.max.request.bytes"] == "dev default"
    config, _ = cli.resolve_config(cli.parse_args(["--override", "socket.request.max.bytes=500000000"]))
    assert config.queued_max_request_bytes == 500_000_000
    config, reasons = cli.resolve_config(cli.parse_args(["--override", "queued.max.request.bytes=-1"]))
    assert config.queued_max_request_bytes == -1 and "queued.max.request.bytes" not in reasons


def test_the_broker_imports_are_frozen_and_the_collector_left_as_it_was(capsys):
    """The broker's imports run without the cyclic collector and are frozen after (start-up
    speed); the collector is back on for the broker itself, and stays off for a caller that
    had turned it off. A taken port ends the start right after the imports."""
    import gc
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        argv = ["--in-memory", "--listeners", f"PLAINTEXT://127.0.0.1:{taken.getsockname()[1]}"]
        gc.unfreeze()
        try:
            assert gc.isenabled()
            assert cli.main(argv) == 1
            assert gc.isenabled()
            assert gc.get_freeze_count() > 0
            gc.disable()
            try:
                assert cli.main(argv) == 1
                assert not gc.isenabled()
            finally:
                gc.enable()
        finally:
            gc.unfreeze()
    assert "Address already in use" in capsys.readouterr().err
