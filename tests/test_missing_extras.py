"""A broker key whose feature needs an extra that is not installed refuses the start: one line
naming the key and the ``pip install 'trikafka[...]'`` that brings it, exit status 2, nothing
made (no data directory, no port bound). Where the key is a default (the fixtures serve a
registry), the default gives way instead.

"Not installed" is made the way Python spells it for an import: ``sys.modules[name] = None``
in a fresh interpreter, before trikafka loads (``BLOCK``), so ``import fastavro`` raises
ModuleNotFoundError there and the import system finds no such module. trikafka's own code
runs as it is. (tests/packaging/test_wheel.py does the same with a venv that truly lacks the
extra.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trikafka.registry.extra import REGISTRY_MODULES

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 60

BLOCK = "import sys\nfor name in sys.argv.pop(1).split(','):\n    sys.modules[name] = None\n"

CLI = BLOCK + "from trikafka.cli import main\nsys.exit(main())\n"


def _python(tmp_path: Path, code: str, blocked: tuple[str, ...], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, ",".join(blocked), *args],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
    )


@pytest.mark.parametrize("blocked", [("fastavro",), REGISTRY_MODULES], ids=["fastavro", "all"])
@pytest.mark.parametrize("brokers", [1, 2])
def test_schema_registry_port_without_the_registry_extra_refuses_to_start(tmp_path, blocked, brokers):
    data = tmp_path / "data"
    done = _python(
        tmp_path, CLI, blocked, "--listeners", "PLAINTEXT://127.0.0.1:0", "--data-dir", str(data),
        "--brokers", str(brokers), "--override", "schema.registry.port=0", "--override", "metrics.port=0",
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("trikafka: invalid configuration schema.registry.port=0: "), line
    assert line.endswith("pip install 'trikafka[registry]', or leave schema.registry.port unset"), line
    assert all(name in line for name in blocked), line
    assert not data.exists()  # refused before anything was made


def test_an_embedded_broker_and_cluster_refuse_it_too(tmp_path):
    code = BLOCK + (
        "import trio\n"
        "from trikafka import ConfigError, open_broker, open_cluster\n"
        "async def main():\n"
        "    for opened in (open_broker, lambda **kw: open_cluster(2, **kw)):\n"
        "        try:\n"
        "            async with opened(listeners='PLAINTEXT://127.0.0.1:0', log_dirs='', schema_registry_port=0):\n"
        "                print('started')\n"
        "        except ConfigError as exc:\n"
        "            print(exc.key)\n"
        "trio.run(main)\n"
    )
    done = _python(tmp_path, code, ("jsonschema",))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["schema.registry.port", "schema.registry.port"]


def test_without_the_key_a_broker_starts_without_the_extra(tmp_path):
    """Not vacuous: the blocked modules stop only the registry."""
    code = BLOCK + (
        "import trio\n"
        "from trikafka import open_broker\n"
        "async def main():\n"
        "    async with open_broker(listeners='PLAINTEXT://127.0.0.1:0', log_dirs='') as broker:\n"
        "        print(broker.schema_registry_url, broker.port > 0)\n"
        "trio.run(main)\n"
    )
    done = _python(tmp_path, code, REGISTRY_MODULES)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "True"]


FIXTURE_TESTS = '''
import pytest


def test_the_fixture_starts_without_a_registry(kafka_broker):
    assert kafka_broker.bootstrap_servers.startswith("127.0.0.1:")
    with pytest.raises(RuntimeError, match=r"pip install 'trikafka\\[registry\\]'"):
        kafka_broker.schema_registry_url


def test_a_cluster_too(kafka_cluster):
    cluster = kafka_cluster(brokers=2)
    assert cluster.schema_registry_urls == []


@pytest.mark.trikafka(config={"schema.registry.port": 0})
def test_asked_for_it_is_refused(kafka_broker):
    pass
'''


def test_the_fixtures_serve_no_registry_without_the_extra_unless_asked(tmp_path):
    (tmp_path / "test_user.py").write_text(FIXTURE_TESTS)
    (tmp_path / "conftest.py").write_text(  # the plugin as tests/conftest.py loads it
        "def pytest_configure(config):\n"
        "    if not config.pluginmanager.has_plugin('trikafka'):\n"
        "        config.pluginmanager.import_plugin('trikafka.testing.pytest_plugin')\n"
    )
    code = BLOCK + "import pytest\nsys.exit(pytest.main(sys.argv[1:]))\n"
    done = _python(tmp_path, code, ("fastavro",), "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "test_user.py")
    assert "2 passed, 1 error" in done.stdout, done.stdout + done.stderr
    assert "invalid configuration schema.registry.port=0" in done.stdout
