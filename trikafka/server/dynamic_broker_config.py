"""Which broker keys AlterConfigs / IncrementalAlterConfigs may change at run time, and why.

Kafka's rule (``DynamicBrokerConfig.validateConfigs``), checked on the broker's whole set of
dynamic overrides after the change, in this order, each failure INVALID_REQUEST with
Kafka's message (a Scala ``Set(...)``):

1. a key Kafka cannot update dynamically (not in its ``AllDynamicConfigs``):
   ``Cannot update these configs dynamically: Set(...)``;
2. a TLS key store key without a listener prefix: ``These security configs can be
   dynamically updated only per-listener using the listener prefix: Set(...)``;
3. the value's type (INVALID_REQUEST too: Kafka's KAFKA-13609 keeps it so);
4. a per-broker key (TLS and listener keys, SASL login keys) sent to the cluster default
   (empty resource name): ``Cannot update these configs at default cluster level, broker id
   must be specified: Set(...)``.

What trikafka does with a key Kafka accepts is one of three things, never a pretence:

* **applied** — the topic defaults (``log.retention.ms`` …, ``DYNAMIC_BROKER_KEYS`` in
  ``apis/configs.py``): every topic inheriting one follows at once;
* **inert** — keys of a feature trikafka does not have at all, where storing the value is all
  a Kafka broker without that feature does too: Kerberos (trikafka offers no GSSAPI) and the
  SASL login-refresh keys (they drive the broker's own client login, and a trikafka broker
  never logs in to another). Stored, described back as DYNAMIC_BROKER_CONFIG, no effect;
* **refused** — every other key Kafka reconfigures live (thread pools, connection limits, key
  stores, listeners …): INVALID_REQUEST naming the keys, since trikafka reads them only at
  start and silently keeping the old value would lie.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trikafka.config.topics import INT64_MAX, TopicConfigDef
from trikafka.errors import ConfigError, ErrorCode, KafkaProtocolError

__all__ = ["INERT_BROKER_KEYS", "KAFKA_DYNAMIC_BROKER_KEYS", "check_broker_overrides", "scala_set"]

#: SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only behind ``listener.name.<l>.``.
_SSL_STORES = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
#: DynamicListenerConfig.ReconfigurableConfigs.
_LISTENER = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm",
    "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds", "max.connections", "max.connection.creation.rate",
    "num.network.threads",
})
_CLUSTER_LEVEL_LISTENER = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
_PER_BROKER = (_SSL_STORES | _LISTENER) - _CLUSTER_LEVEL_LISTENER
#: The broker synonyms of topic configs (ServerTopicConfigSynonyms) but message.format.version.
_LOG = frozenset({
    "log.segment.bytes", "log.roll.ms", "log.roll.hours", "log.roll.jitter.ms", "log.roll.jitter.hours",
    "log.index.size.max.bytes", "log.flush.interval.messages", "log.flush.interval.ms",
    "log.flush.scheduler.interval.ms", "log.retention.bytes", "log.retention.ms", "log.retention.minutes",
    "log.retention.hours", "message.max.bytes", "log.index.interval.bytes",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms", "log.cleaner.min.cleanable.ratio",
    "log.cleanup.policy", "unclean.leader.election.enable", "min.insync.replicas", "compression.type",
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level", "log.preallocate",
    "log.message.timestamp.type", "log.message.timestamp.difference.max.ms",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
    "log.message.downconversion.enable", "log.local.retention.ms", "log.local.retention.bytes",
})
#: Kafka's DynamicBrokerConfig.AllDynamicConfigs.
KAFKA_DYNAMIC_BROKER_KEYS = _SSL_STORES | _LISTENER | _LOG | frozenset({
    # LogCleaner.ReconfigurableConfigs
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
    # DynamicThreadPool, metric reporters, SocketServer, producer state, remote log
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads",
    "metric.reporters", "max.connections.per.ip", "max.connections.per.ip.overrides",
    "producer.id.expiration.ms", "transaction.partition.verification.enable",
    "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.fetch.max.bytes.per.second",
    "remote.list.offsets.request.timeout.ms",
})


def _inert(name: str, kind: str, default: object, lo: float | None = None, hi: float | None = None) -> TopicConfigDef:
    return TopicConfigDef(name, kind, default, "Stored; trikafka has no such feature.", lo=lo, hi=hi, applied=False)


#: Kafka-dynamic keys of features trikafka lacks: typed as Kafka types them, stored, inert.
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
    )
}


def scala_set(names: Iterable[str]) -> str:
    """How Kafka's messages print a set of keys."""
    return f"Set({', '.join(sorted(names))})"


def check_broker_overrides(overrides: Mapping[str, str | None], applied: Iterable[str], per_broker: bool) -> None:
    """Raise INVALID_REQUEST as Kafka would for the broker's dynamic overrides after a
    change; ``applied`` are the keys trikafka applies live (the topic defaults)."""
    names = set(overrides)
    not_dynamic = names - KAFKA_DYNAMIC_BROKER_KEYS
    if not_dynamic:
        raise KafkaProtocolError(
            f"Cannot update these configs dynamically: {scala_set(not_dynamic)}", ErrorCode.invalid_request
        )
    unprefixed = names & _SSL_STORES
    if unprefixed:
        raise KafkaProtocolError(
            "These security configs can be dynamically updated only per-listener using the listener prefix: "
            + scala_set(unprefixed),
            ErrorCode.invalid_request,
        )
    for name in names & set(INERT_BROKER_KEYS):
        value = overrides[name]
        if value is not None:
            try:
                INERT_BROKER_KEYS[name].parse(value)
            except ConfigError as exc:
                raise KafkaProtocolError(str(exc), ErrorCode.invalid_request) from None
    if not per_broker and names & _PER_BROKER:
        raise KafkaProtocolError(
            "Cannot update these configs at default cluster level, broker id must be specified: "
            + scala_set(names & _PER_BROKER),
            ErrorCode.invalid_request,
        )
    unsupported = names - set(applied) - set(INERT_BROKER_KEYS)
    if unsupported:
        raise KafkaProtocolError(
            f"trikafka reads these configs only at start and cannot update them dynamically (Kafka can): "
            f"{scala_set(unsupported)}; restart the broker with the new values",
            ErrorCode.invalid_request,
        )
