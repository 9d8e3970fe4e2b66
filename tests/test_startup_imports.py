"""Start-up cost, kept by what is imported, never by a clock.

pytest imports trikafka's plugin (``pytest11``) in every run where trikafka is installed, and
``python -m trikafka --help`` should answer at once: both must load nothing of the broker.
A broker process loads the web console, hypercorn, Starlette, Jinja2 and prometheus_client only
when ``metrics.port`` or ``--ui`` ask for them. Each check runs in a fresh interpreter (a
subprocess) and reads its ``sys.modules``; ``tests/test_layers.py`` holds the same rule over
the source, so that a module-level import added later fails there too, naming the module.
Speed itself is measured by ``make bench`` (benchmarks/startup.py), not here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 60

#: What the plugin's import may not bring (trio too: pytest-trio loads it when installed,
#: but a suite without pytest-trio should not pay for it through us).
NOT_FOR_THE_PLUGIN = (
    "trikafka.broker",
    "trikafka.server",
    "trikafka.client",
    "trikafka.cluster",
    "trikafka.log",
    "trikafka.network",
    "trikafka.coordinator",
    "trio",
    "hypercorn",
    "jinja2",
    "prometheus_client",
)

#: What ``--help``, ``--list-config`` and a command's ``--help`` may not bring.
BROKER_MODULES = (
    "trikafka.broker",
    "trikafka.server",
    "trikafka.cluster",
    "trikafka.log",
    "trikafka.coordinator",
    "trikafka.network",
    "trikafka.web",
    "trikafka.testing",
    "hypercorn",
    "jinja2",
    "prometheus_client",
)

#: What a broker without a data directory may not bring before a request needs it: the file
#: log, the coordinators (built on the first request that uses one), the schema registry (on
#: the first record validated or the first registry request), the crc32c package (whose
#: ``__init__`` reads importlib.metadata; on the first record batch).
NOT_FOR_AN_IN_MEMORY_START = (
    "trikafka.log.file",
    "trikafka.coordinator.group_coordinator",
    "trikafka.coordinator.transactions",
    "trikafka.coordinator.share",
    "trikafka.registry.service",
    "trikafka.registry.validation",
    "crc32c",
    "importlib.metadata",
)

#: What a broker without ``metrics.port`` or ``--ui`` may not bring (rich neither: into a
#: file or a pipe the CLI writes plain lines; nor Starlette and anyio, which the HTTP
#: servers every broker builds load when one first answers a request).
NOT_FOR_A_PLAIN_BROKER = (
    "rich",
    "starlette",
    "anyio",
    "opentelemetry",  # client telemetry (KIP-714): only once a client pushes metrics
    "google.protobuf",
    "trikafka.otlp",
    "hypercorn",
    "jinja2",
    "prometheus_client",
    "trikafka.console",
    "trikafka.web.metrics",
    "trikafka.spark",
    "pyspark",
    "trikafka.testing",
    "pytest",
    "trio.testing",
    "hypothesis",
)


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def _env() -> dict[str, str]:
    env = dict(os.environ, NO_COLOR="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _loaded(forbidden: tuple[str, ...], modules: list[str]) -> list[str]:
    return sorted(name for name in modules if _under(name, forbidden))


def _modules_after(code: str, tmp_path: Path) -> list[str]:
    """``sys.modules`` of a fresh interpreter after ``code``."""
    out = tmp_path / "modules.json"
    dump = f"\nimport json, sys\njson.dump(sorted(sys.modules), open({str(out)!r}, 'w'))\n"
    subprocess.run(
        [sys.executable, "-c", code + dump], cwd=tmp_path, env=_env(), check=True, timeout=TIMEOUT
    )
    return json.loads(out.read_text())


#: ``python -m trikafka ARGS`` (runpy, as ``-m`` runs it) that writes ``sys.modules`` to the
#: file named by its first argument when it ends, however it ends (SystemExit included).
_AS_MAIN = """
import json, runpy, sys
out = sys.argv.pop(1)
try:
    runpy.run_module("trikafka", run_name="__main__", alter_sys=True)
finally:
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)
"""


def _cli_modules(args: list[str], tmp_path: Path) -> tuple[list[str], str]:
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _AS_MAIN, str(out), *args],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), done.stdout


def test_the_plugin_imports_only_pytest(tmp_path):
    modules = _modules_after("import trikafka.testing.pytest_plugin", tmp_path)
    assert "trikafka.testing.pytest_plugin" in modules  # not vacuous
    assert _loaded(NOT_FOR_THE_PLUGIN, modules) == []


def test_the_testing_kit_and_the_package_load_on_first_use(tmp_path):
    code = (
        "import trikafka, trikafka.testing\n"
        "import sys\n"
        "assert 'trikafka.broker' not in sys.modules and 'trio' not in sys.modules\n"
        "from trikafka.testing import ThreadedBroker\n"
        "assert ThreadedBroker.__module__ == 'trikafka.testing.thread'\n"
    )
    modules = _modules_after(code, tmp_path)
    assert "trikafka.broker" in modules  # asked for, so loaded


def test_a_fixture_loads_the_broker_when_a_test_asks_for_it(tmp_path):
    """The other half: the plugin still serves a broker, loading it in the fixture's body."""
    (tmp_path / "test_one.py").write_text(
        "import sys\n\n"
        "def test_before():\n"
        "    assert 'trikafka.broker' not in sys.modules\n\n"
        "def test_uses(kafka_broker):\n"
        "    assert kafka_broker.bootstrap_servers.startswith('127.0.0.1:')\n"
        "    assert 'trikafka.broker' in sys.modules\n"
    )
    (tmp_path / "conftest.py").write_text(  # as tests/conftest.py: where the entry point is not
        "def pytest_configure(config):\n"
        "    if not config.pluginmanager.has_plugin('trikafka'):\n"
        "        config.pluginmanager.import_plugin('trikafka.testing.pytest_plugin')\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_one.py"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


@pytest.mark.parametrize(
    "args",
    [["--help"], ["--list-config", "--in-memory"], ["topics", "list", "--help"], ["produce", "--help"]],
    ids=["help", "list-config", "topics-list-help", "produce-help"],
)
def test_the_cli_loads_no_broker_for(args, tmp_path):
    modules, stdout = _cli_modules(args, tmp_path)
    assert "trikafka.cli" in modules and stdout  # it ran and answered
    assert _loaded(BROKER_MODULES, modules) == []


def test_an_embedded_broker_without_metrics_port_loads_no_web_server(tmp_path):
    code = (
        "import trio\n"
        "from trikafka import open_broker\n"
        "async def main():\n"
        "    async with open_broker(listeners='PLAINTEXT://127.0.0.1:0', log_dirs=''):\n"
        "        pass\n"
        "trio.run(main)\n"
    )
    modules = _modules_after(code, tmp_path)
    assert "trikafka.broker" in modules
    assert _loaded(NOT_FOR_A_PLAIN_BROKER, modules) == []


def _serve(args: list[str], tmp_path: Path, then: Callable[[AdminClient], object] | None = None) -> list[str]:
    """Start ``python -m trikafka ARGS`` (``--in-memory`` unless ARGS give ``--data-dir``),
    list topics with confluent-kafka once its banner is out (and call ``then`` with the admin
    client), stop it with SIGTERM (a graceful stop) and return what it had imported."""
    from confluent_kafka.admin import AdminClient

    out = tmp_path / "modules.json"
    storage = [] if "--data-dir" in args else ["--in-memory"]
    process = subprocess.Popen(
        [sys.executable, "-c", _AS_MAIN, str(out), "--listeners", "PLAINTEXT://127.0.0.1:0",
         *storage, "--log-level", "WARNING", *args],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: list[str] = []
    bootstrap = None
    # A bug must fail the test, not hang it: the process dies after TIMEOUT whatever happens.
    watchdog = threading.Timer(TIMEOUT, process.kill)
    watchdog.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if "listening on PLAINTEXT://" in line and line.startswith("  "):
                bootstrap = line.split("PLAINTEXT://")[1].strip()
            if line.startswith("  data: "):
                break
        assert bootstrap is not None, "".join(lines)
        # No KIP-714 push: librdkafka's GetTelemetrySubscriptions, racing the stop, would load the
        # telemetry API's first-use modules (crc32c) in some runs and not others.
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3, "enable.metrics.push": False})
        assert admin.list_topics(timeout=10).brokers  # answered over the request path
        if then is not None:
            then(admin)
        del admin
        process.send_signal(signal.SIGTERM)
        lines += process.stdout.readlines()
        assert process.wait(TIMEOUT) == 0, "".join(lines)
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
    return json.loads(out.read_text())


def test_a_broker_process_without_metrics_port_or_ui_loads_no_web_server(tmp_path):
    modules = _serve([], tmp_path)
    assert "trikafka.broker" in modules
    assert _loaded(NOT_FOR_A_PLAIN_BROKER, modules) == []


def test_a_broker_process_with_ui_loads_the_console(tmp_path):
    """The check above is not vacuous: asked for, the web server and the console load."""
    modules = _serve(["--ui", "--override", "metrics.port=0"], tmp_path)
    assert {"hypercorn", "jinja2", "prometheus_client"} <= set(modules)


def test_an_in_memory_broker_starts_without_the_file_log_the_coordinators_or_the_registry(tmp_path):
    modules = _serve([], tmp_path)
    assert "trikafka.log.memory" in modules
    assert _loaded(NOT_FOR_AN_IN_MEMORY_START, modules) == []


def test_the_first_group_request_loads_the_coordinators(tmp_path):
    """Not vacuous: listing the groups reaches the group coordinator, which loads then."""
    modules = _serve([], tmp_path, then=lambda admin: admin.list_consumer_groups().result(timeout=10))
    assert "trikafka.coordinator.group_coordinator" in modules
    assert "trikafka.log.file" not in modules


def test_a_broker_with_a_data_dir_loads_the_file_log_and_its_coordinators_at_start(tmp_path):
    """With a data directory the coordinators recover what it holds before the first answer."""
    modules = _serve(["--data-dir", str(tmp_path / "data")], tmp_path)
    assert {"trikafka.log.file", "trikafka.coordinator.group_coordinator"} <= set(modules)


def test_an_in_memory_broker_looks_up_no_c_library_until_a_syncfs(tmp_path):
    """``ctypes.util.find_library`` runs ``ldconfig -p`` in a child process: the file log's
    ``syncfs`` looks the C library up when it is first called, not when the broker starts."""
    code = (
        "import ctypes.util, os, trio\n"
        "calls = []\n"
        "real = ctypes.util.find_library\n"
        "ctypes.util.find_library = lambda name: calls.append(name) or real(name)\n"
        "from trikafka import open_broker\n"
        "async def main():\n"
        "    async with open_broker(listeners='PLAINTEXT://127.0.0.1:0', log_dirs=''):\n"
        "        pass\n"
        "trio.run(main)\n"
        "assert calls == [], calls\n"
        "from trikafka.log.storage import SYSTEM_IO\n"
        "fd = os.open('.', os.O_RDONLY)\n"
        "SYSTEM_IO.syncfs(fd)\n"
        "assert calls == ['c'], calls  # not vacuous: asked for, it is looked up\n"
    )
    _modules_after(code, tmp_path)
