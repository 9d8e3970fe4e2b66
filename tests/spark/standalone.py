"""Spark daemons for the tests, started from pyspark's own ``bin/spark-class`` on 127.0.0.1.

A standalone master and worker (``org.apache.spark.deploy.master.Master`` /
``...worker.Worker``) and a Spark Connect server
(``org.apache.spark.sql.connect.service.SparkConnectServer``), each on port 0: the port is
read from the daemon's own log line ("Starting Spark master at spark://127.0.0.1:40123"), so
readiness is an event, not a sleep. Every wait is bounded; :meth:`SparkDaemon.stop` ends the
process by its PID (``spark-class`` execs the JVM, so the PID is the JVM's).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

__all__ = ["DAEMON_TIMEOUT", "SparkDaemon", "executor_conf", "spark_home", "start_connect_server", "start_standalone"]

#: Seconds a daemon may take to log that it is ready (two cores shared by many JVMs).
DAEMON_TIMEOUT = 180
#: Small, quick JVMs: no C2 compiler, the serial collector.
DAEMON_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: The worktree holding trikafka and these tests: what the executors' Python must import.
ROOT = Path(__file__).resolve().parents[2]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    from trikafka.spark import configure_environment

    configure_environment()  # JAVA_HOME, PYSPARK_PYTHON, SPARK_LOCAL_IP
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="384m",
        SPARK_DAEMON_JAVA_OPTS=DAEMON_JAVA_OPTIONS,
        PYSPARK_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p),
    )
    env.update(extra or {})
    return env


class SparkDaemon:
    """One ``spark-class`` process; its output is kept and watched for a line."""

    def __init__(
        self, name: str, args: list[str], env: Mapping[str, str], cwd: Path, ready: str, script: str = "spark-class"
    ) -> None:
        self.name = name
        self.lines: list[str] = []
        self._ready = re.compile(ready)
        self._found = threading.Event()
        self.match: re.Match[str] | None = None
        self.process = subprocess.Popen(
            [str(spark_home() / "bin" / script), *args],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        self._reader = threading.Thread(target=self._drain, name=f"{name}-output", daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            if self.match is None:
                match = self._ready.search(line)
                if match:
                    self.match = match
                    self._found.set()
                elif line.startswith('Exception in thread "main"'):
                    self._found.set()  # failed to start (it may linger): stop waiting
        self._found.set()  # the process ended: wake the waiter

    def wait_ready(self, timeout: float = DAEMON_TIMEOUT) -> re.Match[str]:
        self._found.wait(timeout)
        if self.match is None:
            tail = "\n".join(self.lines[-30:])
            state = f"exited with {self.process.poll()}" if self.process.poll() is not None else "still running"
            raise RuntimeError(f"{self.name} not ready within {timeout} s ({state}); last output:\n{tail}")
        return self.match

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
        self._reader.join(10)


def start_standalone(work_dir: Path, cores: int = 2, memory: str = "1g") -> tuple[str, list[SparkDaemon]]:
    """A master and one worker; returns the master URL and the daemons (stop them)."""
    env = _environment()
    daemons: list[SparkDaemon] = []
    try:
        master = SparkDaemon(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
            env,
            work_dir,
            r"Starting Spark master at (spark://[\d.]+:\d+)",
        )
        daemons.append(master)
        url = master.wait_ready().group(1)
        worker = SparkDaemon(
            "worker",
            [
                "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                "--cores", str(cores), "--memory", memory, "--work-dir", str(work_dir / "worker"),
                url,
            ],
            env,
            work_dir,
            r"Successfully registered with master",
        )
        daemons.append(worker)
        worker.wait_ready()
    except BaseException:
        for daemon in reversed(daemons):
            daemon.stop()
        raise
    return url, daemons


def executor_conf(memory: str = "512m") -> dict[str, str]:
    """What executors of another JVM need to run trikafka's source and sink."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {
        "spark.executor.memory": memory,
        "spark.executor.cores": "2",
        "spark.executor.extraJavaOptions": DAEMON_JAVA_OPTIONS,
        "spark.executorEnv.PYTHONPATH": path,
        "spark.executorEnv.SPARK_LOCAL_IP": "127.0.0.1",
        "spark.pyspark.python": sys.executable,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }


def start_connect_server(work_dir: Path, master: str, conf: Mapping[str, str]) -> tuple[int, SparkDaemon]:
    """A Spark Connect server on 127.0.0.1 (port 0), running its jobs on ``master``.

    Started as ``sbin/start-connect-server.sh`` does, without its daemon wrapper:
    ``bin/spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer
    spark-internal`` (the server reads its master and settings from spark-submit).
    """
    args = ["--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", master]
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": "0",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": DAEMON_JAVA_OPTIONS,
        **conf,
    }
    for key, value in settings.items():
        args += ["--conf", f"{key}={value}"]
    args += ["--name", "trikafka-connect", "--driver-memory", "1g", "spark-internal"]
    server = SparkDaemon(
        "connect-server",
        args,
        _environment({"SPARK_DAEMON_MEMORY": "1g"}),
        work_dir,
        r"Spark Connect server started at: [^\s]*:(\d+)",
        script="spark-submit",
    )
    try:
        port = int(server.wait_ready().group(1))
    except BaseException:
        server.stop()
        raise
    return port, server
