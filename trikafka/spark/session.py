"""A SparkSession set up the way the trikafka source wants, with what users trip over applied.

Measured on a 2-core machine with pyspark 4.3 and Java 17:

- Spark's Python workers must run the interpreter that has trikafka, pyarrow and
  confluent-kafka installed: ``PYSPARK_PYTHON`` defaults to this one (``sys.executable``).
- Spark 4 needs Java 17 or 21: when ``JAVA_HOME`` is unset and the ``java`` on ``PATH`` is
  not one of those, a JDK 17/21 from the usual places is used.
- ``SPARK_LOCAL_IP=127.0.0.1`` keeps a local Spark on loopback (no hostname look-ups, no
  warning about a 127.0.1.1 hostname, nothing listening on the LAN).
- ``spark.sql.shuffle.partitions`` defaults to 200; a windowed aggregation of a small stream
  then runs 200 tasks per micro-batch, 3x slower here. Local sessions get one per core.
- For local sessions ``-XX:TieredStopAtLevel=1 -XX:+UseSerialGC`` cut the JVM's CPU by a
  third (short jobs never pay back the C2 compiler and the parallel collector).
- The Spark UI and its console progress bar are off unless asked for, and the ``trikafka``
  data source is registered.

Everything here is a default: a conf key the caller passes wins, and an environment variable
already set is left alone. A later call returns the running session (Spark's ``getOrCreate``),
with the data source registered again.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["configure_environment", "find_java_home", "register", "spark_session"]

SUPPORTED_JAVA = (17, 21)
LOCAL_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

_JDK_GLOBS = (
    "/usr/lib/jvm/*",  # Debian, Ubuntu, Fedora
    "/usr/lib64/jvm/*",  # SUSE
    "/Library/Java/JavaVirtualMachines/*/Contents/Home",  # macOS
    "/opt/homebrew/opt/openjdk@*/libexec/openjdk.jdk/Contents/Home",
    os.path.expanduser("~/.sdkman/candidates/java/*"),
)


def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)', out)
    return int(match.group(1)) if match else None


def find_java_home() -> str | None:
    """A JDK Spark 4 runs on: ``$JAVA_HOME``, the ``java`` on PATH, or a known location.

    Returns ``None`` when ``java`` on PATH is already suitable (nothing to set) or when no
    suitable JDK is found (Spark will then say what it thinks).
    """
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    on_path = shutil.which("java")
    if on_path and _java_major(on_path) in SUPPORTED_JAVA:
        return None
    candidates = sorted({path for pattern in _JDK_GLOBS for path in glob.glob(pattern)})
    for wanted in SUPPORTED_JAVA:
        for home in candidates:
            java = os.path.join(home, "bin", "java")
            if os.path.isfile(java) and not os.path.islink(home) and _java_major(java) == wanted:
                return home
    return None


def configure_environment() -> None:
    """Set ``PYSPARK_PYTHON``, ``PYSPARK_DRIVER_PYTHON``, ``JAVA_HOME`` and ``SPARK_LOCAL_IP``
    where they are unset (before the JVM starts: they do nothing afterwards)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java_home = find_java_home()
    if java_home and not os.environ.get("JAVA_HOME"):
        os.environ["JAVA_HOME"] = java_home


def _local_cores(master: str) -> int | None:
    match = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master.strip())
    if match is None:
        return None
    threads = match.group(1)
    if threads is None:
        return 1
    return (os.cpu_count() or 1) if threads == "*" else int(threads)


def register(spark: SparkSession) -> None:
    """Register ``format("trikafka")`` with ``spark``."""
    from trikafka.spark.datasource import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)


def spark_session(
    app_name: str = "trikafka",
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession with the defaults above and the ``trikafka`` data source registered."""
    configure_environment()
    from pyspark.sql import SparkSession

    settings: dict[str, str] = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
    cores = _local_cores(master)
    if cores is not None:
        settings["spark.sql.shuffle.partitions"] = str(max(cores, 1))
        settings["spark.driver.extraJavaOptions"] = LOCAL_JVM_OPTIONS
    settings.update(conf or {})
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
