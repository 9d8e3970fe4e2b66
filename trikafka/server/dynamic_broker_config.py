"""Dynamic broker configs: which keys AlterConfigs / IncrementalAlterConfigs may change, and
where the changes are kept.

Each key's update mode is Kafka 4.4's (``trikafka/config/update_modes.py``). Kafka's checks, on
the resource's whole set of dynamic overrides after the change, in this order, each failure
INVALID_REQUEST with Kafka's message (Kafka 4.4's Java ``HashSet`` of the keys, ``[a, b]``):

1. a ``read-only`` key: ``Cannot update these configs dynamically: [...]``;
2. a TLS key store key without a listener prefix: ``These security configs can be
   dynamically updated only per-listener using the listener prefix: [...]``;
3. the value's type;
4. a ``per-broker`` key sent to the cluster default (empty resource name): ``Cannot update
   these configs at default cluster level, broker id must be specified: [...]``.

A key Kafka accepts is stored for its broker (resource name ``"<node id>"``, described as
DYNAMIC_BROKER_CONFIG) or as the cluster default (``""``, DYNAMIC_DEFAULT_BROKER_CONFIG); a
broker's own value wins over the default, which wins over its ``server.properties``. The topic
defaults (``log.retention.ms`` and friends) apply at once to every topic inheriting one; a key
of a part trikafka does not have (Kerberos, replication throttles, tiered storage, thread pools
of a JVM broker …) is kept and described back, as a Kafka broker without that part would.

:class:`DynamicBrokerConfigs` keeps them in ``<first log dir>/trikafka-broker-configs.json``,
rewritten atomically (temporary file, fsync, rename) before the request is answered, so a
restart — or a kill -9 right after the answer — keeps every one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from trikafka.config import BrokerConfig
from trikafka.config.topics import INT64_MAX, TOPIC_CONFIGS, TopicConfigDef
from trikafka.config.update_modes import CLUSTER_WIDE, PER_BROKER, PER_BROKER_MODE, READ_ONLY, update_mode
from trikafka.errors import ConfigError, ErrorCode, KafkaProtocolError
from trikafka.security.files import write_json_atomically

__all__ = [
    "APPLIED_BROKER_KEYS", "BROKER_CONFIGS_FILE", "DynamicBrokerConfigs", "INERT_BROKER_KEYS",
    "KAFKA_DYNAMIC_BROKER_KEYS", "applied", "check_broker_overrides", "java_set", "live_config",
]

BROKER_CONFIGS_FILE = "trikafka-broker-configs.json"

log = logging.getLogger("trikafka.server")

#: SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only behind ``listener.name.<l>.``.
_SSL_STORES = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
#: Kafka 4.4's keys of update mode ``per-broker`` or ``cluster-wide``.
KAFKA_DYNAMIC_BROKER_KEYS = PER_BROKER | CLUSTER_WIDE
#: The broker keys of topic defaults (``log.retention.ms`` …): applied to every topic at once.
APPLIED_BROKER_KEYS = frozenset(d.broker_key for d in TOPIC_CONFIGS.values() if d.broker_key)


def applied(overrides: Mapping[str, str]) -> dict[str, str]:
    """The overrides trikafka applies to its replicas (the topic defaults)."""
    return {k: v for k, v in overrides.items() if k in APPLIED_BROKER_KEYS}


def _inert(name: str, kind: str, default: object, lo: float | None = None, hi: float | None = None) -> TopicConfigDef:
    return TopicConfigDef(name, kind, default, "Stored; trikafka has no such feature.", lo=lo, hi=hi, applied=False)


#: Kafka-dynamic keys of features trikafka lacks: typed as Kafka types them, stored, inert.
INT32_MAX = 2**31 - 1
INERT_BROKER_KEYS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        _inert("sasl.kerberos.service.name", "string", None),
        _inert("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit"),
        _inert("sasl.kerberos.ticket.renew.window.factor", "double", 0.8, 0.0, float("inf")),
        _inert("sasl.kerberos.ticket.renew.jitter", "double", 0.05, 0.0, float("inf")),
        _inert("sasl.kerberos.min.time.before.relogin", "long", 60000, -INT64_MAX - 1, INT64_MAX),
        _inert("sasl.kerberos.principal.to.local.rules", "list", ("DEFAULT",)),
        _inert("sasl.login.refresh.window.factor", "double", 0.8, 0.5, 1.0),
        _inert("sasl.login.refresh.window.jitter", "double", 0.05, 0.0, 0.25),
        _inert("sasl.login.refresh.min.period.seconds", "int", 60, 0, 900),
        _inert("sasl.login.refresh.buffer.seconds", "int", 300, 0, 3600),
        # cluster-wide keys of parts a one-process broker does not have: one cleaner, no
        # replica fetcher threads or throttles between processes, no JVM thread pools
        _inert("log.cleaner.threads", "int", 1, 0, INT32_MAX),
        _inert("background.threads", "int", 10, 1, INT32_MAX),
        _inert("num.replica.fetchers", "int", 1, 1, INT32_MAX),
        _inert("num.recovery.threads.per.data.dir", "int", 2, 1, INT32_MAX),
        _inert("leader.replication.throttled.rate", "long", INT64_MAX, 0, INT64_MAX),
        _inert("follower.replication.throttled.rate", "long", INT64_MAX, 0, INT64_MAX),
        _inert("replica.alter.log.dirs.io.max.bytes.per.second", "long", INT64_MAX, 0, INT64_MAX),
    )
}


def _java_string_hash(text: str) -> int:
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():  # Java hashes UTF-16 code units
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def java_set(names: Iterable[str], capacity: int = 16) -> str:
    """How Kafka 4.4's messages print a set of keys: a Java ``HashSet``'s ``toString``, in its
    iteration order (by hash bucket of a table grown from ``capacity`` as HashMap grows it)."""
    keys = sorted(set(names))
    size = 1
    while size < capacity:
        size *= 2
    while len(keys) > size * 3 // 4:
        size *= 2

    def bucket(key: str) -> int:
        h = _java_string_hash(key)
        return (h ^ (h >> 16)) & (size - 1)

    return "[" + ", ".join(sorted(keys, key=lambda key: (bucket(key), key))) + "]"


def check_broker_overrides(
    overrides: Mapping[str, str | None], per_broker: bool, known: Mapping[str, object] | None = None
) -> None:
    """Raise INVALID_REQUEST as Kafka would for a broker resource's dynamic overrides after a
    change (``per_broker``: a broker's own, else the cluster default). ``known``: the keys
    trikafka's BrokerConfig reads, whose values it types itself (the caller checks them)."""
    names = set(overrides)
    not_dynamic = {name for name in names if update_mode(name) == READ_ONLY}
    if not_dynamic:
        raise KafkaProtocolError(
            # DynamicBrokerConfig.nonDynamicConfigs: a HashSet sized for every key of the request
            f"Cannot update these configs dynamically: {java_set(not_dynamic, max(int(len(names) / 0.75) + 1, 16))}",
            ErrorCode.invalid_request,
        )
    unprefixed = names & _SSL_STORES
    if unprefixed:
        raise KafkaProtocolError(
            "These security configs can be dynamically updated only per-listener using the listener prefix: "
            + java_set(unprefixed),
            ErrorCode.invalid_request,
        )
    for name in names & set(INERT_BROKER_KEYS):
        value = overrides[name]
        if value is not None and (known is None or name not in known):
            try:
                INERT_BROKER_KEYS[name].parse(value)
            except ConfigError as exc:
                raise KafkaProtocolError(str(exc), ErrorCode.invalid_request) from None
    at_broker_level = {name for name in names if update_mode(name) == PER_BROKER_MODE}
    if not per_broker and at_broker_level:
        raise KafkaProtocolError(
            "Cannot update these configs at default cluster level, broker id must be specified: "
            + java_set(at_broker_level),
            ErrorCode.invalid_request,
        )


class DynamicBrokerConfigs:
    """The dynamic broker overrides by resource name: ``""`` the cluster default, ``"<node id>"``
    a broker's own; one store for every node of an in-process cluster. ``path``: the JSON file
    they are kept in (None: in memory only)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._by_name: dict[str, dict[str, str]] = {}
        #: (node id, callback): told a node's effective overrides at every change.
        self._subscribers: list[tuple[int, Callable[[dict[str, str]], None]]] = []
        if path is not None and path.exists():
            try:
                document = json.loads(path.read_text(encoding="utf-8"))
                self._by_name = {
                    str(name): {str(k): str(v) for k, v in values.items()}
                    for name, values in document["brokers"].items()
                }
            except (OSError, ValueError, KeyError, AttributeError) as exc:
                raise ConfigError(str(path), "[file]", f"unreadable dynamic broker configs: {exc}") from None

    @classmethod
    def in_data_dir(cls, log_dirs: Sequence[str] | None) -> DynamicBrokerConfigs:
        return cls(Path(log_dirs[0]) / BROKER_CONFIGS_FILE if log_dirs else None)

    def overrides(self, name: str) -> dict[str, str]:
        """A copy of resource ``name``'s overrides."""
        return dict(self._by_name.get(name, {}))

    def effective(self, node_id: int) -> dict[str, str]:
        """What broker ``node_id`` runs with over its static config: the cluster default, then
        its own overrides."""
        return {**self._by_name.get("", {}), **self._by_name.get(str(node_id), {})}

    def replace(self, name: str, overrides: Mapping[str, str | None]) -> None:
        """Make ``overrides`` resource ``name``'s whole set, on disk before this returns."""
        cleaned = {k: v for k, v in overrides.items() if v is not None}
        if cleaned:
            self._by_name[name] = cleaned
        else:
            self._by_name.pop(name, None)
        if self.path is not None:
            write_json_atomically(self.path, {"version": 1, "brokers": self._by_name})
        for node_id, callback in self._subscribers:
            callback(self.effective(node_id))

    def subscribe(self, node_id: int, callback: Callable[[dict[str, str]], None]) -> None:
        """Call ``callback`` with broker ``node_id``'s effective overrides now (the kept ones,
        after a restart) and after every change."""
        self._subscribers.append((node_id, callback))
        callback(self.effective(node_id))


def live_config(static: BrokerConfig, overrides: Mapping[str, str]) -> BrokerConfig:
    """``static`` with the dynamic overrides of keys it has fields for: what a part that
    reconfigures itself at run time reads its settings from."""
    known = static.as_properties()
    try:
        return static.with_overrides(**{k: v for k, v in overrides.items() if k in known})
    except ConfigError as exc:  # each value was checked when set; a combination may still fail
        log.warning("dynamic broker configs not applied (%s); the broker keeps its previous values", exc)
        return static
