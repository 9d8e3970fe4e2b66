"""Client configuration: Kafka's client key names and the Java client's defaults, in one table.

Every key is a :class:`ConfigKey` row of :data:`CLIENT_KEYS`: its Kafka name, default, parser,
check and the client roles (``producer``, ``consumer``, ``admin``) it applies to. Python code may
spell a key either way (``linger_ms=5`` or ``{"linger.ms": "5"}``); strings are parsed as a
``.properties`` file would hold them.

Refusals follow the broker's config (``trikafka/config/broker.py``): an unknown key names the closest
known one; a bad value names key, value and what is allowed. Kafka's Java clients only *warn*
about a key that belongs to another client role (``group.id`` given to a producer); trikafka
refuses it, saying which roles take it, because a key that silently does nothing is the bug a
user would otherwise chase. Cross-key rules are the Java client's: idempotence needs
``acks=all``, at most 5 in-flight requests and ``retries > 0`` (left at its default, idempotence
turns itself off instead, as Java 3.2+ does); ``transactional.id`` needs idempotence;
``delivery.timeout.ms >= linger.ms + request.timeout.ms``; ``heartbeat.interval.ms <
session.timeout.ms``.

Java has no ``rebalance.timeout.ms`` client key: its consumer sends ``max.poll.interval.ms`` as
the JoinGroup rebalance timeout, and so does trikafka's.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from trikafka.client.transport import parse_bootstrap
from trikafka.errors import ConfigError

__all__ = ["CLIENT_KEYS", "ClientConfig", "ConfigKey", "ROLES", "client_config_keys"]

INT32_MAX = 2**31 - 1
ROLES = ("producer", "consumer", "admin")
ALL = frozenset(ROLES)
PRODUCER = frozenset({"producer"})
CONSUMER = frozenset({"consumer"})


@attrs.frozen
class ConfigKey:
    """One row of the table: a Kafka client key."""

    key: str
    default: Any
    parse: Callable[[Any, str], Any]
    roles: frozenset[str]
    doc: str


# --- parsers: value (any spelling) → checked Python value, or ConfigError ---------------------


def _int(lo: int, hi: int = 2**63 - 1) -> Callable[[Any, str], int]:
    def parse(value: Any, key: str) -> int:
        allowed = f"an integer in [{lo}, {hi}] is required"
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise ConfigError(key, value, allowed) from None
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ConfigError(key, value, allowed)
        return value

    return parse


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, bool):
        return value
    raise ConfigError(key, value, "allowed values are true and false")


def _choice(*allowed: str) -> Callable[[Any, str], str]:
    def parse(value: Any, key: str) -> str:
        text = value.strip().lower() if isinstance(value, str) else value
        if text not in allowed:
            raise ConfigError(key, value, f"allowed values are {', '.join(allowed)}")
        return text

    return parse


def _optional_string(value: Any, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(key, value, "a string, or unset")
    return value.strip() or None


def _string(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(key, value, "a string")
    return value


def _acks(value: Any, key: str) -> int:
    """``all``/``-1``/``0``/``1`` → the int16 Produce carries (-1 for all)."""
    text = str(value).strip().lower() if not isinstance(value, bool) else ""
    table = {"all": -1, "-1": -1, "0": 0, "1": 1}
    if text not in table:
        raise ConfigError(key, value, "allowed values are all, -1, 0 and 1")
    return table[text]


def _servers(value: Any, key: str) -> tuple[str, ...]:
    """``host:port[,host:port]`` or a sequence of them, checked by the one bootstrap parser."""
    if not isinstance(value, str | list | tuple):
        raise ConfigError(key, value, "host:port entries, comma-separated or as a list")
    parse_bootstrap(value)  # raises ConfigError naming the entry and what is allowed
    items = value.split(",") if isinstance(value, str) else value
    return tuple(str(item).strip() for item in items if str(item).strip())


def _security_protocol(value: Any, key: str) -> str:
    text = str(value).strip().upper()
    if text not in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"):
        raise ConfigError(key, value, "allowed values are PLAINTEXT, SASL_PLAINTEXT, SSL and SASL_SSL")
    return text


def _sasl_mechanism(value: Any, key: str) -> str:
    text = str(value).strip().upper()
    if text not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ConfigError(
            key,
            value,
            "allowed values are PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (GSSAPI and OAUTHBEARER: not in "
            "the Trio client)",
        )
    return text


#: Assignor names the consumer implements, and the Java class names that mean the same.
ASSIGNORS = {
    "range": "range",
    "org.apache.kafka.clients.consumer.rangeassignor": "range",
    "cooperative-sticky": "cooperative-sticky",
    "org.apache.kafka.clients.consumer.cooperativestickyassignor": "cooperative-sticky",
}


def _assignors(value: Any, key: str) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items:
        raise ConfigError(key, value, "a list of assignor names")
    names = []
    for item in items:
        name = ASSIGNORS.get(str(item).strip().lower())
        if name is None:
            raise ConfigError(key, value, "allowed assignors are range and cooperative-sticky")
        names.append(name)
    return tuple(names)


def _row(key: str, default: Any, parse: Callable[..., Any], roles: frozenset[str], doc: str) -> ConfigKey:
    return ConfigKey(key, default, parse, roles, doc)


_P, _C, _A = "producer", "consumer", "admin"
CLIENT_KEYS: dict[str, ConfigKey] = {
    row.key: row
    for row in (
        _row("bootstrap.servers", None, _servers, ALL, "host:port list to learn the cluster from."),
        _row("client.id", "trikafka", _string, ALL, "Sent in every request header; shows in broker logs."),
        _row("request.timeout.ms", 30000, _int(0, INT32_MAX), ALL,
             "How long to wait for an answer before the connection is dropped and the request retried."),
        _row("metadata.max.age.ms", 300000, _int(0), ALL, "Metadata is refreshed at least this often."),
        _row("reconnect.backoff.ms", 50, _int(0), ALL,
             "First wait before reconnecting to a broker; doubles per failure."),
        _row("reconnect.backoff.max.ms", 1000, _int(0), ALL, "Upper bound of the reconnect backoff."),
        _row("retry.backoff.ms", 100, _int(0), ALL,
             "First wait before retrying a failed request; doubles per attempt."),
        _row("retry.backoff.max.ms", 1000, _int(0), ALL, "Upper bound of the retry backoff."),
        _row("security.protocol", "PLAINTEXT", _security_protocol, ALL, "PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL."),
        _row("sasl.mechanism", "GSSAPI", _sasl_mechanism, ALL,
             "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Java's default GSSAPI is not supported: set one)."),
        _row("sasl.jaas.config", None, _optional_string, ALL,
             "The login module with username and password, as Java's: PlainLoginModule or ScramLoginModule required "
             "username=\"…\" password=\"…\";"),
        _row("ssl.ca.location", None, _optional_string, ALL,
             "PEM file of the CA certificates that sign the brokers' certificates (default: the system's)."),
        _row("ssl.certificate.location", None, _optional_string, ALL,
             "PEM client certificate for mutual TLS (may hold the key too); the broker's principal is its subject."),
        _row("ssl.key.location", None, _optional_string, ALL, "PEM private key of ssl.certificate.location."),
        _row("ssl.key.password", None, _optional_string, ALL, "Password of an encrypted ssl.key.location."),
        _row("ssl.endpoint.identification.algorithm", "https", _choice("https", "none"), ALL,
             "https: the broker's certificate must name the host dialled; none: any name."),
        _row("enable.ssl.certificate.verification", True, _bool, ALL,
             "false accepts any broker certificate (testing only: no protection against impostors)."),
        _row("enable.metrics.push", True, _bool, frozenset({_P, _C}),
             "Push this client's metrics to the cluster when a client-metrics subscription matches it (KIP-714)."),
        _row("retries", INT32_MAX, _int(0, INT32_MAX), frozenset({_P, _A}),
             "How often a retriable failure is retried (bounded by delivery.timeout.ms)."),
        _row("default.api.timeout.ms", 60000, _int(0, INT32_MAX), frozenset({_C, _A}),
             "Bound of a blocking call that takes no timeout."),
        # producer
        _row("acks", -1, _acks, PRODUCER, "0: no answer; 1: the leader wrote it; all (-1): every in-sync replica."),
        _row("linger.ms", 5, _int(0), PRODUCER, "How long a batch waits for more records before it is sent."),
        _row("batch.size", 16384, _int(0, INT32_MAX), PRODUCER,
             "A partition's batch is sent once it holds this many bytes."),
        _row("compression.type", "none", _choice("none", "gzip", "snappy", "lz4", "zstd"), PRODUCER,
             "Codec of produced batches."),
        _row("enable.idempotence", True, _bool, PRODUCER,
             "Producer id and sequence numbers, so retries never duplicate."),
        _row("max.in.flight.requests.per.connection", 5, _int(1), PRODUCER,
             "Unanswered Produce requests per broker connection."),
        _row("delivery.timeout.ms", 120000, _int(0, INT32_MAX), PRODUCER,
             "Bound of send(): from the call to success or failure, retries included."),
        _row("max.request.size", 1048576, _int(0, INT32_MAX), PRODUCER,
             "Largest record (and request) the producer sends."),
        _row("buffer.memory", 33554432, _int(0), PRODUCER,
             "Bytes of records waiting to be sent before send() waits for room."),
        _row("max.block.ms", 60000, _int(0), PRODUCER, "How long send() waits for metadata of a new topic."),
        _row("transactional.id", None, _optional_string, PRODUCER,
             "Makes the producer transactional; survives restarts (fences older instances)."),
        _row("transaction.timeout.ms", 60000, _int(1, INT32_MAX), PRODUCER,
             "The coordinator aborts a transaction left open this long."),
        # consumer
        _row("group.id", None, _optional_string, CONSUMER, "Consumer group; needed for subscribe() and commits."),
        _row("group.instance.id", None, _optional_string, CONSUMER,
             "Static membership: a restart within the session keeps the assignment."),
        _row("group.protocol", "classic", _choice("classic", "consumer"), CONSUMER,
             "classic: JoinGroup/SyncGroup, the client assigns; consumer: KIP-848, the coordinator assigns "
             "(ConsumerGroupHeartbeat)."),
        _row("group.remote.assignor", None, _optional_string, CONSUMER,
             "With group.protocol=consumer: the coordinator's assignor (uniform, range); unset: the broker's default."),
        _row("session.timeout.ms", 45000, _int(1, INT32_MAX), CONSUMER,
             "A member without heartbeats this long is removed from the group."),
        _row("heartbeat.interval.ms", 3000, _int(1, INT32_MAX), CONSUMER,
             "Heartbeat period; below session.timeout.ms."),
        _row("max.poll.interval.ms", 300000, _int(1, INT32_MAX), CONSUMER,
             "Longest gap between polls before the member leaves; also the rebalance timeout."),
        _row("auto.offset.reset", "latest", _choice("earliest", "latest", "none"), CONSUMER,
             "Where to start without a committed offset."),
        _row("enable.auto.commit", True, _bool, CONSUMER, "Commit positions every auto.commit.interval.ms."),
        _row("auto.commit.interval.ms", 5000, _int(0, INT32_MAX), CONSUMER, "Auto-commit period."),
        _row("isolation.level", "read_uncommitted", _choice("read_uncommitted", "read_committed"), CONSUMER,
             "read_committed hides open and aborted transactions."),
        _row("fetch.min.bytes", 1, _int(0, INT32_MAX), CONSUMER,
             "A fetch waits for this many bytes (or fetch.max.wait.ms)."),
        _row("fetch.max.wait.ms", 500, _int(0, INT32_MAX), CONSUMER, "Longest wait of a fetch for fetch.min.bytes."),
        _row("fetch.max.bytes", 52428800, _int(0, INT32_MAX), CONSUMER, "Bound of one fetch answer."),
        _row("max.partition.fetch.bytes", 1048576, _int(0, INT32_MAX), CONSUMER,
             "Bound per partition of one fetch answer."),
        _row("partition.assignment.strategy", ("range", "cooperative-sticky"), _assignors, CONSUMER,
             "Assignors offered to the group, preferred first."),
        _row("max.poll.records", 500, _int(1, INT32_MAX), CONSUMER, "Most records one poll returns."),
        _row("queued.min.messages", 100000, _int(1, INT32_MAX), CONSUMER,
             "Prefetch: a partition is fetched ahead while it has fewer records buffered than this."),
        _row("queued.max.messages.kbytes", 65536, _int(1, 2097151), CONSUMER,
             "Prefetch: nothing is fetched ahead while the buffered fetched data exceeds this many KB."),
    )
}


def _unknown(raw_key: str, value: Any, role: str) -> ConfigError:
    key = raw_key.replace("_", ".")
    row = CLIENT_KEYS.get(key)
    if row is not None:
        roles = ", ".join(r for r in ROLES if r in row.roles)
        return ConfigError(raw_key, value, f"{key} is a {roles} setting; a {role} does not take it")
    known = [k for k, r in CLIENT_KEYS.items() if role in r.roles]
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(raw_key, value, f"unknown {role} configuration key{hint}")


def _read_only(values: Mapping[str, Any]) -> Mapping[str, Any]:
    return types.MappingProxyType(values)


@attrs.frozen
class ClientConfig:
    """Checked settings of one client. Read them as ``config["linger.ms"]`` or
    ``config.linger_ms``; ``explicit`` holds the keys the user gave."""

    role: str
    values: Mapping[str, Any] = attrs.field(converter=_read_only)
    explicit: frozenset[str] = frozenset()

    @classmethod
    def for_role(cls, role: str, items: Mapping[str, Any] | None = None, **more: Any) -> ClientConfig:
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {role!r}")
        given: dict[str, Any] = {}
        for raw_key, value in {**(items or {}), **more}.items():
            key = raw_key.replace("_", ".")
            row = CLIENT_KEYS.get(key)
            if row is None or role not in row.roles:
                raise _unknown(raw_key, value, role)
            given[key] = value if value is None and row.default is None else row.parse(value, key)
        values = {k: row.default for k, row in CLIENT_KEYS.items() if role in row.roles}
        values.update(given)
        config = cls(role, values, frozenset(given))
        return config._checked()

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name.replace("_", ".")]
        except KeyError:
            raise AttributeError(name) from None

    def _checked(self) -> ClientConfig:
        if self["security.protocol"] in ("SSL", "SASL_SSL"):
            from trikafka.client.tls import client_ssl_context

            client_ssl_context(self)  # raises naming the ssl.* key whose file does not load
        if self["security.protocol"] in ("SASL_PLAINTEXT", "SASL_SSL"):
            if "sasl.mechanism" not in self.explicit:
                raise ConfigError(
                    "sasl.mechanism",
                    "GSSAPI",
                    "GSSAPI (Java's default) is not supported: set PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
                )
            from trikafka.client.sasl import credentials_from_jaas

            credentials_from_jaas(self["sasl.jaas.config"])  # raises naming sasl.jaas.config
        if self.role == "producer":
            return self._checked_producer()
        if self.role == "consumer":
            if self["heartbeat.interval.ms"] >= self["session.timeout.ms"]:
                raise ConfigError(
                    "heartbeat.interval.ms", self["heartbeat.interval.ms"],
                    f"must be lower than session.timeout.ms ({self['session.timeout.ms']})",
                )
            if self["group.protocol"] == "classic" and self["group.remote.assignor"] is not None:
                raise ConfigError(
                    "group.remote.assignor",
                    self["group.remote.assignor"],
                    "is for group.protocol=consumer (KIP-848); the classic protocol assigns with "
                    "partition.assignment.strategy",
                )
            if self["group.protocol"] == "consumer" and "partition.assignment.strategy" in self.explicit:
                raise ConfigError(
                    "partition.assignment.strategy",
                    ",".join(self["partition.assignment.strategy"]),
                    "is for group.protocol=classic; with consumer the coordinator assigns (group.remote.assignor)",
                )
            if self["group.id"] is None and self["enable.auto.commit"]:
                if "enable.auto.commit" in self.explicit:
                    raise ConfigError("enable.auto.commit", True, "needs a group.id")
                return self._with(**{"enable.auto.commit": False})
        return self

    def _checked_producer(self) -> ClientConfig:
        changes: dict[str, Any] = {}
        conflicts = []
        if self["acks"] != -1:
            conflicts.append(("acks", self["acks"], "must be all (-1)"))
        if self["max.in.flight.requests.per.connection"] > 5:
            conflicts.append(
                (
                    "max.in.flight.requests.per.connection",
                    self["max.in.flight.requests.per.connection"],
                    "must be at most 5",
                )
            )
        if self["retries"] == 0:
            conflicts.append(("retries", 0, "must be above 0"))
        if self["enable.idempotence"] and conflicts:
            if "enable.idempotence" in self.explicit or self["transactional.id"] is not None:
                key, value, rule = conflicts[0]
                raise ConfigError(key, value, f"{rule} when enable.idempotence is true")
            changes["enable.idempotence"] = False
        if self["transactional.id"] is not None and not self["enable.idempotence"]:
            raise ConfigError("enable.idempotence", False, "must be true when transactional.id is set")
        floor = self["linger.ms"] + self["request.timeout.ms"]
        if self["delivery.timeout.ms"] < floor:
            if "delivery.timeout.ms" in self.explicit:
                raise ConfigError(
                    "delivery.timeout.ms", self["delivery.timeout.ms"],
                    f"must be at least linger.ms + request.timeout.ms ({floor})",
                )
            changes["delivery.timeout.ms"] = floor
        return self._with(**changes) if changes else self

    def _with(self, **changes: Any) -> ClientConfig:
        return ClientConfig(self.role, {**self.values, **changes}, self.explicit)


def client_config_keys() -> Iterable[tuple[str, str, str, str]]:
    """(key, default, roles, doc) for every key — README's table comes from here."""
    for key, row in CLIENT_KEYS.items():
        default = row.default
        if isinstance(default, tuple):
            default = ",".join(default)
        elif key == "acks":
            default = "all"
        elif isinstance(default, bool):
            default = str(default).lower()
        roles = ", ".join(r for r in ROLES if r in row.roles)
        yield key, "" if default is None else str(default), roles, row.doc
