"""What a ``KafkaContainer``'s environment variables mean to a broker with no container.

Confluent's and Apache's Kafka images turn ``KAFKA_*`` variables into broker properties
(``KAFKA_LOG_RETENTION_MS`` → ``log.retention.ms``; ``__`` stands for ``_`` and ``___`` for
``-``). :func:`broker_setting` does the same translation for
:class:`trikafka.testing.container.KafkaContainer` and sorts every variable into one of:

- a broker key (trikafka's, or one of Kafka's that trikafka accepts with no effect);
- a variable the container itself owns (listeners, process roles, ZooKeeper, controller quorum:
  the broker listens on 127.0.0.1 at the container's exposed port whatever they say);
- a JVM or log4j setting of the Kafka process (heap, GC, JMX), which has no meaning here;
- anything else: refused with a ``ValueError`` naming the variable and why.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

__all__ = ["CONTAINER_NETWORK", "CONTAINER_OWNED", "JVM_ONLY", "EnvRefusedError", "broker_key", "broker_setting"]

log = logging.getLogger("trikafka.testing.container")

#: The container's networking: testcontainers' constructor writes some of these. They stay in
#: ``env`` but do not configure the broker (it listens on 127.0.0.1 at the exposed port), and
#: ``with_env`` refuses a value other than the constructor's.
CONTAINER_NETWORK = frozenset({
    "KAFKA_LISTENERS",
    "KAFKA_ADVERTISED_LISTENERS",
    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
    "KAFKA_INTER_BROKER_LISTENER_NAME",
})  # fmt: skip

#: Process roles, controller quorum and ZooKeeper: trikafka's broker is its own controller and
#: has no ZooKeeper, whatever these say (accepted, one INFO line).
CONTAINER_OWNED = CONTAINER_NETWORK | frozenset({
    "KAFKA_PROCESS_ROLES",
    "KAFKA_CONTROLLER_QUORUM_VOTERS",
    "KAFKA_CONTROLLER_LISTENER_NAMES",
    "KAFKA_ZOOKEEPER_CONNECT",
})  # fmt: skip

#: Settings of the Kafka JVM and its log4j, not broker properties (Confluent's image leaves
#: them out of server.properties too): accepted, with one INFO line saying they do nothing.
JVM_ONLY = frozenset({
    "KAFKA_HEAP_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS",
    "KAFKA_OPTS",
    "KAFKA_GC_LOG_OPTS",
    "KAFKA_LOG4J_OPTS",
    "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL",
    "KAFKA_JMX_PORT",
    "KAFKA_JMX_HOSTNAME",
    "KAFKA_JMX_OPTS",
    "KAFKA_DEBUG",
})  # fmt: skip

#: Variables that name one broker key outside the ``KAFKA_`` rule.
_SPECIAL = {"CLUSTER_ID": "cluster.id", "KAFKA_BROKER_ID": "node.id"}


class EnvRefusedError(ValueError):
    """``with_env`` was given a variable that means nothing to a broker without a container."""


def broker_key(variable: str) -> str:
    """The broker key a ``KAFKA_*`` variable stands for, by the images' rule."""
    if variable in _SPECIAL:
        return _SPECIAL[variable]
    name = variable.removeprefix("KAFKA_").lower()
    return name.replace("___", "\0").replace("__", "\1").replace("_", ".").replace("\0", "-").replace("\1", "_")


@cache
def _known_keys() -> frozenset[str]:
    from trikafka.config import config_keys
    from trikafka.config.kafka_keys import KAFKA_BROKER_KEYS

    return frozenset(key for key, _, _ in config_keys()) | KAFKA_BROKER_KEYS


def broker_setting(variable: str, value: Any) -> tuple[str, str] | None:
    """``(key, value)`` for the broker, or None for a variable kept with no effect on it;
    :class:`EnvRefusedError` for one the broker cannot honour."""
    text = str(value)
    if variable in CONTAINER_NETWORK:
        return None
    if variable in CONTAINER_OWNED:
        log.info("%s=%s: trikafka's broker is its own controller, with no ZooKeeper; no effect", variable, text)
        return None
    if variable in JVM_ONLY:
        log.info("%s=%s: a setting of the Kafka JVM, with no effect on trikafka's broker", variable, text)
        return None
    if variable not in _SPECIAL and not variable.startswith("KAFKA_"):
        raise EnvRefusedError(
            f"with_env({variable!r}, {text!r}): not a Kafka setting; the broker runs in this process "
            "(KafkaContainer maps only KAFKA_* variables, and CLUSTER_ID, to broker keys)"
        )
    key = broker_key(variable)
    if key not in _known_keys():
        raise EnvRefusedError(
            f"with_env({variable!r}, {text!r}): {key!r} is not a broker key trikafka or Kafka knows "
            "(see docs/configuration.md for the keys)"
        )
    return key, text
