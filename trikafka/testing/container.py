"""``KafkaContainer``: testcontainers-python's Kafka container, with no Docker.

A suite written for ``testcontainers.kafka.KafkaContainer`` (or
``testcontainers.community.kafka``) switches by its import line: the same constructor, the
same ``with_*`` builders, ``start()``/``stop()``/``with``, ``get_bootstrap_server()``. The
broker is trikafka's, on a background Trio thread of this process
(:class:`~trikafka.testing.thread.ThreadedBroker`), listening on 127.0.0.1 — the image is
accepted and reported, never pulled.

What has a meaning without Docker keeps it: the container port is the broker's listener
(``get_exposed_port(9093)`` is the port it bound, ``with_bind_ports(9093, 19093)`` fixes it),
``KAFKA_*`` variables become broker keys (:mod:`trikafka.testing.container_env`),
``with_cluster_id`` the cluster id, ``with_name`` the thread's name, ``get_logs()`` the
broker's log lines. What has none (``exec``, volumes, networks, the Docker client) raises
``NotImplementedError`` saying what to do instead. ``broker`` gives trikafka's controls
(faults, recorder, waits) on the same broker; ``create_topic``, ``produce`` and ``read`` are
the container's own (:mod:`trikafka.testing.topics`).
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

from trikafka.testing.container_env import CONTAINER_NETWORK, broker_setting
from trikafka.testing.thread import START_TIMEOUT, BrokerHandle, ThreadedBroker

__all__ = ["DEFAULT_IMAGE", "KafkaContainer"]

DEFAULT_IMAGE = "confluentinc/cp-kafka:7.6.0"  # testcontainers' default, reported as given
HOST = "127.0.0.1"
#: DockerContainer's keyword arguments that mean something here (``docker_client_kw``: how
#: to reach Docker, so nothing); every other one, given a value, is refused.
_KWARGS = frozenset({"name", "env", "ports", "docker_client_kw"})


class _LogLines(logging.Handler):
    """The records one broker thread logs (those its loggers' levels let through)."""

    def __init__(self, thread_name: str) -> None:
        super().__init__()
        self.thread_name = thread_name
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.threadName == self.thread_name:
            self.lines.append(self.format(record))


def _on_the_broker(method: str) -> Any:
    """``container.<method>(...)``: the running broker's own (``create_topic``, ``produce``,
    ``read``), with its signature and docs."""

    @functools.wraps(getattr(BrokerHandle, method))
    def call(self: KafkaContainer, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._running(method), method)(*args, **kwargs)

    return call


def _refused(method: str, instead: str) -> Any:
    def refuse(self: KafkaContainer, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"KafkaContainer.{method}: there is no Docker container here; {instead}")

    refuse.__name__ = method
    refuse.__doc__ = f"Refused (no Docker container): {instead}"
    return refuse


class KafkaContainer:
    """testcontainers-python's ``KafkaContainer`` on trikafka's broker (module docstring)."""

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        port: int = 9093,
        wait_strategy_check_string: str = r".*\[KafkaServer id=\d+\] started.*",
        listener_name: str = "PLAINTEXT",
        security_protocol: str = "PLAINTEXT",
        **kwargs: Any,
    ) -> None:
        if "port_to_expose" in kwargs:
            raise ValueError("KafkaContainer: the parameter 'port_to_expose' is deprecated; use 'port'")
        if security_protocol != "PLAINTEXT":
            raise NotImplementedError(
                f"KafkaContainer(security_protocol={security_protocol!r}): only PLAINTEXT; for SASL or TLS "
                "use trikafka.testing.ThreadedBroker with the security keys (docs/security.md)"
            )
        for name, value in kwargs.items():
            if name not in _KWARGS and value is not None:
                raise NotImplementedError(f"KafkaContainer({name}=...): there is no Docker container here")
        self.image = image
        self.port = int(port)
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.wait_for: re.Pattern[str] = re.compile(wait_strategy_check_string)
        self.kraft_enabled = False
        self.cluster_id = "MkU3OEVBNTcwNTJENDM2Qk"  # testcontainers' fixed id
        self.env: dict[str, Any] = {}
        self.ports: dict[str, int | None] = {}
        self._name: str | None = kwargs.get("name")
        self._broker: ThreadedBroker | None = None
        self._logs: _LogLines | None = None
        self._stopped = False
        # What testcontainers' constructor writes, so that ``env`` reads the same.
        self.env.update({
            "KAFKA_LISTENERS": f"{listener_name}://0.0.0.0:{self.port},BROKER://0.0.0.0:9092",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": f"BROKER:PLAINTEXT,{listener_name}:{security_protocol}",
            "KAFKA_INTER_BROKER_LISTENER_NAME": "BROKER",
        })  # fmt: skip
        self.with_exposed_ports(self.port)
        for variable, value in (
            ("KAFKA_BROKER_ID", "1"),
            ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1"),
            ("KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS", "1"),
            ("KAFKA_LOG_FLUSH_INTERVAL_MESSAGES", "10000000"),
            ("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0"),
            *(kwargs.get("env") or {}).items(),
        ):
            self.with_env(variable, value)
        for exposed in kwargs.get("ports") or ():
            self.with_exposed_ports(exposed)

    # --- builders (each returns self, as testcontainers' do) ------------------------------

    def with_kraft(self) -> KafkaContainer:
        """Accepted: trikafka's broker keeps its metadata KRaft-style either way (there is no
        ZooKeeper in it), so the broker is the same with or without this call."""
        self.kraft_enabled = True
        return self

    def with_cluster_id(self, cluster_id: str) -> KafkaContainer:
        """The cluster id Metadata and DescribeCluster report (``cluster.id``)."""
        self.cluster_id = cluster_id
        return self

    def with_env(self, key: str, value: Any) -> KafkaContainer:
        """A ``KAFKA_*`` variable as the images read it: ``KAFKA_NUM_PARTITIONS=3`` sets
        ``num.partitions``. Refused (``ValueError``) when it names no broker key."""
        if key in CONTAINER_NETWORK and self.env.get(key) != value:
            raise ValueError(
                f"with_env({key!r}, {value!r}): the broker listens on {HOST} at get_exposed_port({self.port}); "
                "choose that port with port= or with_bind_ports, not with listener variables"
            )
        broker_setting(key, value)  # refuses what cannot be honoured, now rather than at start
        self.env[key] = value
        return self

    def with_envs(self, **variables: Any) -> KafkaContainer:
        for key, value in variables.items():
            self.with_env(key, value)
        return self

    def with_exposed_ports(self, *ports: int | str) -> KafkaContainer:
        for port in ports:
            self._container_port(port, "with_exposed_ports")
            self.ports.setdefault(str(self.port), None)
        return self

    def with_bind_ports(self, container: int | str, host: int | str | None = None) -> KafkaContainer:
        """Fix the host port the broker binds for the Kafka port (None: a free one)."""
        self._container_port(container, "with_bind_ports")
        self.ports[str(self.port)] = None if host is None else int(str(host).partition("/")[0])
        return self

    def with_name(self, name: str) -> KafkaContainer:
        """The name of the broker's thread and of this 'container' in its logs."""
        self._name = name
        return self

    def maybe_emulate_amd64(self) -> KafkaContainer:
        """Nothing to emulate: the broker is Python in this process."""
        return self

    # --- lifetime ---------------------------------------------------------------------

    def start(self, timeout: int = 30) -> KafkaContainer:
        """Start the broker (every listener bound on return); ``timeout`` in seconds."""
        if self._broker is not None:
            raise RuntimeError(f"{self!r} is running already")
        broker = ThreadedBroker(self._config())
        thread_name = f"trikafka-{self._name}" if self._name else broker.thread.name
        broker.thread.name = thread_name
        logs = _LogLines(thread_name)
        logging.getLogger("trikafka").addHandler(logs)
        try:
            broker.start(timeout or START_TIMEOUT)
        except BaseException:
            logging.getLogger("trikafka").removeHandler(logs)
            raise
        self._broker, self._logs, self._stopped = broker, logs, False
        # The line Kafka's images print once up (testcontainers' default wait_for matches it).
        logs.lines.append(
            f"[KafkaServer id={broker.config.node_id}] started: trikafka's broker for {self.image} "
            f"(not pulled) on {broker.bootstrap_servers}"
        )
        return self

    def _config(self) -> dict[str, Any]:
        host_port = self.ports.get(str(self.port)) or 0
        config: dict[str, Any] = {"listeners": f"{self.listener_name}://{HOST}:{host_port}"}
        if self.listener_name != "PLAINTEXT":
            config["listener.security.protocol.map"] = f"{self.listener_name}:PLAINTEXT"
        for variable, value in self.env.items():
            setting = broker_setting(variable, value)
            if setting is not None:
                config[setting[0]] = setting[1]
        config["cluster.id"] = self.cluster_id
        return config

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:
        """Stop the broker (gracefully; ``force`` and ``delete_volume`` change nothing: it
        keeps its data in memory, gone with it)."""
        broker, self._broker = self._broker, None
        if broker is None:
            return
        self._stopped = True
        try:
            broker.stop()
        finally:
            if self._logs is not None:
                logging.getLogger("trikafka").removeHandler(self._logs)

    def __enter__(self) -> KafkaContainer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, exc_type: object, exc_val: object, exc_tb: object) -> None:
        self.stop()

    # --- where it is ------------------------------------------------------------------

    def _running(self, method: str) -> ThreadedBroker:
        if self._broker is None:
            raise RuntimeError(f"KafkaContainer.{method}: the container is not started (call start() or use with)")
        return self._broker

    def _container_port(self, port: int | str, method: str) -> None:
        number = str(port).partition("/")[0]
        if number != str(self.port):
            raise NotImplementedError(
                f"KafkaContainer.{method}({port!r}): the broker has one port, the Kafka port {self.port}"
            )

    def get_bootstrap_server(self) -> str:
        return f"{self.get_container_host_ip()}:{self.get_exposed_port(self.port)}"

    def get_container_host_ip(self) -> str:
        return HOST

    def get_exposed_port(self, port: int | str) -> int:
        """The host port of the Kafka port (the one the broker bound)."""
        self._container_port(port, "get_exposed_port")
        broker = self._running("get_exposed_port")
        return int(broker.bootstrap_servers.rpartition(":")[2])

    def get_container_id(self) -> str:
        """An id for this broker: its thread's name."""
        return self._running("get_container_id").thread.name

    @property
    def status(self) -> str:
        """``running``, ``exited`` after stop, ``not_started`` before start (Docker's words)."""
        if self._broker is not None:
            return "running"
        return "exited" if self._stopped else "not_started"

    def reload(self) -> None:
        """Nothing to reload: ``status`` is read live."""

    def get_logs(self) -> tuple[bytes, bytes]:
        """(stdout, stderr) as Docker gives them: the line Kafka prints once started
        (``[KafkaServer id=1] started``, which ``wait_for`` matches), then the broker's log
        lines at the levels its ``trikafka.*`` loggers let through; nothing on stderr."""
        self._running("get_logs")
        assert self._logs is not None
        return "".join(line + "\n" for line in self._logs.lines).encode(), b""

    @property
    def broker(self) -> ThreadedBroker:
        """trikafka's controls on this broker: faults, recorder, ``wait_for_*``."""
        return self._running("broker")

    def __repr__(self) -> str:
        where = self.get_bootstrap_server() if self._broker is not None else self.status
        return f"<KafkaContainer {self.image} (trikafka) {where}>"

    # --- the everyday helpers, over the Kafka protocol (trikafka.testing.topics) ---------

    create_topic = _on_the_broker("create_topic")
    produce = _on_the_broker("produce")
    read = _on_the_broker("read")

    # --- what needs Docker -------------------------------------------------------------

    exec = _refused("exec", "call the admin client or `python -m trikafka topics ...` instead of kafka-topics")
    get_wrapped_container = _refused("get_wrapped_container", "use .broker for trikafka's controls")
    get_docker_client = _refused("get_docker_client", "nothing talks to Docker")
    with_command = _refused("with_command", "the broker is configured with with_env(KAFKA_...)")
    with_volume_mapping = _refused("with_volume_mapping", "the broker keeps its data in memory")
    with_tmpfs_mount = _refused("with_tmpfs_mount", "the broker keeps its data in memory")
    with_network = _refused("with_network", "the broker listens on 127.0.0.1 only, for this machine")
    with_network_aliases = _refused("with_network_aliases", "the broker listens on 127.0.0.1 only")
    with_kwargs = _refused("with_kwargs", "there are no Docker create options")
    with_copy_into_container = _refused("with_copy_into_container", "there is no file system to copy into")
    copy_into_container = _refused("copy_into_container", "there is no file system to copy into")
    copy_from_container = _refused("copy_from_container", "there is no file system to copy from")
    create_file = _refused("create_file", "there is no file system to write to")
    waiting_for = _refused("waiting_for", "start() returns once every listener is bound")
    wait = _refused("wait", "the broker runs until stop()")
