"""What users install: the sdist and the wheels built from a copy of this checkout, each wheel
installed alone into a fresh venv and used from a directory outside the checkout.

Two flavours: the wheel with the C record walk, and the pure-Python one built with
``TRIKAFKA_NO_EXTENSIONS=1``. Each is built once (a module-scoped fixture) as ``make dist``
builds it (``python -m build``: the sdist, then the wheel from the sdist) and checked as
``make dist`` checks it (``twine check --strict``). In its venv: ``trikafka --version``, a
broker process (``python -m trikafka`` on a free port) that the Trio client produces to and
consumes from, the registry key refused by name without its extra; in a second venv, the wheel
with its ``pytest`` extra runs a throwaway test file on the plugin's fixtures, in their three
flavours. Last, ``mypy --strict`` on a user's program (``user_app.py``) against the installed
wheel, as a user's CI would run it.

Nothing here imports the checkout: every interpreter is the venv's, run with no PYTHONPATH
from a temporary directory. pip installs from its index as configured on the machine (a local
cache here). The venvs are made without pip (``--without-pip``) and filled by this
interpreter's pip (``pip --python``): ensurepip would cost each one seconds for nothing tested.
The tests of one flavour share its built wheel, so under pytest-xdist they stay on one worker
(``xdist_group``, with ``--dist loadgroup``); the two flavours may run on two.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import tomllib
import zipfile
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
TIMEOUT = 600  # a build or an install from an empty pip cache

#: The wheel flavours: the environment each is built in.
FLAVOURS = {"native": {}, "pure": {"TRIKAFKA_NO_EXTENSIONS": "1"}}


def _flavour(name: str) -> object:
    """A flavour as a parameter, in the xdist group of the tests that share its wheel."""
    return pytest.param(name, marks=pytest.mark.xdist_group(f"packaging-{name}"))


def _env(**extra: str) -> dict[str, str]:
    """This process's environment without what would put the checkout or this venv first."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(NO_COLOR="1", PYTHONUNBUFFERED="1", **extra)
    return env


def _run(args: list[str | Path], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=_env(**extra), capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
    return done


@attrs.frozen
class Built:
    flavour: str
    sdist: Path
    wheel: Path


@attrs.frozen
class Venv:
    path: Path
    work: Path  # a directory outside the checkout to run from

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def pip_install(self, *requirements: str | Path) -> None:
        _run([sys.executable, "-m", "pip", "--python", self.python, "install", "-q", *requirements], self.work)

    def run(self, *args: str | Path, **extra: str) -> subprocess.CompletedProcess[str]:
        return _run(list(args), self.work, **extra)


def _copy_source(to: Path) -> Path:
    """What the sdist is made of, copied, so that building writes nothing into the checkout
    (setuptools leaves build/ and *.egg-info behind) and parallel builds do not meet."""
    source = to / "source"
    shutil.copytree(
        ROOT / "trikafka", source / "trikafka", ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc")
    )
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy2(ROOT / name, source / name)
    return source


@pytest.fixture(scope="module", params=[_flavour(name) for name in sorted(FLAVOURS)])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    flavour = request.param
    where = tmp_path_factory.mktemp(f"build-{flavour}")
    source = _copy_source(where)
    _run([sys.executable, "-m", "build", "--outdir", where / "dist", source], where, **FLAVOURS[flavour])
    (sdist,) = (where / "dist").glob("*.tar.gz")
    (wheel,) = (where / "dist").glob("*.whl")
    return Built(flavour, sdist, wheel)


def _new_venv(tmp_path_factory: pytest.TempPathFactory, name: str, *requirements: str | Path) -> Venv:
    where = tmp_path_factory.mktemp(name)
    venv = Venv(where / "venv", where / "work")
    venv.work.mkdir()
    _run([sys.executable, "-m", "venv", "--without-pip", venv.path], where)
    venv.pip_install(*requirements)
    return venv


@pytest.fixture(scope="module")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """The wheel alone (no extra) in a fresh venv."""
    return _new_venv(tmp_path_factory, f"venv-{built.flavour}", built.wheel)


def test_the_sdist_and_the_wheel_pass_twine_check_and_say_what_they_are(built):
    _run([sys.executable, "-m", "twine", "check", "--strict", built.sdist, built.wheel], built.wheel.parent)
    with tarfile.open(built.sdist) as sdist:
        names = sdist.getnames()
        pkg_info = sdist.extractfile(f"trikafka-{VERSION}/PKG-INFO")
        assert pkg_info is not None
        metadata = pkg_info.read().decode()
    assert f"trikafka-{VERSION}/trikafka/protocol/_recordwalk.c" in names  # either flavour builds from it
    assert not any("/tests/" in name for name in names)
    assert "License-Expression: Apache-2.0" in metadata and f"Version: {VERSION}" in metadata
    with zipfile.ZipFile(built.wheel) as wheel:
        native = [name for name in wheel.namelist() if name.endswith(".so")]
        assert not [name for name in wheel.namelist() if name.endswith(".c")]  # the sdist's
        metadata = wheel.read(f"trikafka-{VERSION}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata and f"Version: {VERSION}" in metadata
    if built.flavour == "pure":
        assert built.wheel.name == f"trikafka-{VERSION}-py3-none-any.whl" and native == []
    else:
        tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
        assert built.wheel.name.startswith(f"trikafka-{VERSION}-{tag}-{tag}-"), built.wheel.name
        assert [Path(name).name.split(".")[0] for name in native] == ["_recordwalk"]


def test_the_installed_command_says_its_version(installed, built):
    assert installed.run(installed.path / "bin" / "trikafka", "--version").stdout == f"trikafka {VERSION}\n"
    assert installed.run(installed.python, "-m", "trikafka", "--version").stdout == f"trikafka {VERSION}\n"
    code = (
        "import trikafka; from trikafka.protocol.records import NATIVE_RECORD_WALK\n"
        "print(trikafka.__version__, trikafka.__file__, NATIVE_RECORD_WALK)"
    )
    version, where, native = installed.run(installed.python, "-c", code).stdout.split()
    assert version == VERSION
    assert Path(where).is_relative_to(installed.path), where  # the wheel's, not the checkout's
    assert native == str(built.flavour == "native")


def _broker_process(venv: Venv, *args: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    """``python -m trikafka`` in ``venv`` on a free port; its process, bootstrap and output."""
    process = subprocess.Popen(
        [str(venv.python), "-m", "trikafka", "--listeners", "PLAINTEXT://127.0.0.1:0", "--in-memory", *args],
        cwd=venv.work, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if "listening on PLAINTEXT://" in line:
            return process, line.split("PLAINTEXT://")[1].split()[0], lines
    process.wait(TIMEOUT)
    raise AssertionError("the broker ended before it listened:\n" + "".join(lines))


def test_the_broker_process_serves_the_trio_client(installed):
    shutil.copy2(HERE / "user_app.py", installed.work / "user_app.py")
    watchdog = None
    process, bootstrap, lines = _broker_process(installed)
    try:
        watchdog = threading.Timer(TIMEOUT, process.kill)  # a hang fails the test, never the run
        watchdog.start()
        done = installed.run(installed.python, "user_app.py", bootstrap)
        assert done.stdout == "round trip: [b'hello']\n"
        process.send_signal(signal.SIGTERM)  # a graceful stop
        assert process.stdout is not None
        lines += process.stdout.readlines()
        assert process.wait(TIMEOUT) == 0, "".join(lines)
    finally:
        if watchdog is not None:
            watchdog.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_registry_key_without_its_extra_refuses_to_start(installed):
    """The base install has no registry extra (fastavro, jsonschema, proto-schema-parser)."""
    done = subprocess.run(
        [str(installed.python), "-m", "trikafka", "--listeners", "PLAINTEXT://127.0.0.1:0", "--in-memory",
         "--override", "schema.registry.port=0"],
        cwd=installed.work, env=_env(), capture_output=True, text=True, timeout=60,  # a broker that starts: fail
    )
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("trikafka: invalid configuration schema.registry.port=0: "), line
    assert "pip install 'trikafka[registry]'" in line and "fastavro" in line


#: A user's test file on the plugin's fixtures in their three flavours: plain pytest
#: (``kafka_broker``), asyncio (pytest-asyncio, ``kafka_broker.aio``) and Trio
#: (``trikafka_broker``, pytest-trio).
USER_TESTS = '''
import asyncio

import pytest
import trio

from trikafka.client import open_producer


def produce(bootstrap_servers, topic):
    async def send():
        async with open_producer(bootstrap_servers) as producer:
            return await producer.send(topic, b"one", partition=0)

    return trio.run(send)


def test_a_plain_test(kafka_broker):
    assert produce(kafka_broker.bootstrap_servers, "orders").offset == 0
    assert kafka_broker.wait_for_high_watermark("orders", 0, at_least=1) == 1


@pytest.mark.asyncio
async def test_an_asyncio_test(kafka_broker):
    await asyncio.to_thread(produce, kafka_broker.bootstrap_servers, "events")
    assert await kafka_broker.aio.wait_for_high_watermark("events", 0, at_least=1) == 1


async def test_a_trio_test(trikafka_broker, autojump_clock):
    async with open_producer(trikafka_broker) as producer:
        record = await producer.send("orders", b"one", partition=0)
    assert record.offset == 0
    assert await trikafka_broker.wait_for_high_watermark("orders", 0, at_least=1) == 1
'''


def test_the_pytest_extra_runs_the_fixtures(built, tmp_path_factory):
    venv = _new_venv(tmp_path_factory, f"venv-pytest-{built.flavour}", f"{built.wheel}[pytest]")
    (venv.work / "test_user.py").write_text(USER_TESTS)
    done = venv.run(venv.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py")
    assert "3 passed" in done.stdout, done.stdout


@pytest.mark.parametrize("built", [_flavour("native")], indirect=True)  # the pure wheel: the same .py files
def test_a_users_program_type_checks_against_the_wheel(built, tmp_path_factory):
    """mypy --strict on user_app.py against the installed wheel. It needs the package's py.typed
    marker and annotations: without them mypy says "missing library stubs or py.typed marker"."""
    venv = _new_venv(tmp_path_factory, "venv-mypy", built.wheel, "mypy")
    shutil.copy2(HERE / "user_app.py", venv.work / "user_app.py")
    done = subprocess.run(
        [str(venv.python), "-m", "mypy", "--strict", "--no-incremental", "user_app.py"],
        cwd=venv.work, env=_env(), capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
