"""Kafka 4.4's update mode of every broker key, as data.

Read from the "Update Mode" row of each key in Kafka 4.4's generated broker configuration
reference (apache/kafka-site ``44/generated/kafka_config.html``, the page behind
https://kafka.apache.org/44/configuration/broker-configs). Kafka's three modes:

* ``read-only``: read at start; IncrementalAlterConfigs / AlterConfigs refuse it;
* ``per-broker``: may be set for one broker (resource name ``"<node id>"``) only;
* ``cluster-wide``: may be set for one broker or as the cluster default (resource name ``""``).

Every key of the reference not listed here is ``read-only``; ``tests/test_update_modes.py``
checks that each listed key is in the reference (``tests/data/kafka-4.4-broker-keys.txt``).
"""

from __future__ import annotations

__all__ = [
    "CLUSTER_WIDE", "CLUSTER_WIDE_MODE", "PER_BROKER", "PER_BROKER_MODE", "READ_ONLY", "update_mode",
]

READ_ONLY, PER_BROKER_MODE, CLUSTER_WIDE_MODE = "read-only", "per-broker", "cluster-wide"

#: Keys whose update mode is ``per-broker``.
PER_BROKER: frozenset[str] = frozenset({
    "cordoned.log.dirs",
    "listener.security.protocol.map",
    "listeners",
    "principal.builder.class",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.mechanism.inter.broker.protocol",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class",
    "ssl.key.password",
    "ssl.keymanager.algorithm",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.protocol",
    "ssl.provider",
    "ssl.secure.random.implementation",
    "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
})

#: Keys whose update mode is ``cluster-wide``.
CLUSTER_WIDE: frozenset[str] = frozenset({
    "background.threads",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "config.providers",
    "errors.deadletterqueue.auto.create.topics.enable",
    "errors.deadletterqueue.topic.name.prefix",
    "follower.fetch.last.tiered.offset.enable",
    "follower.replication.throttled.rate",
    "group.consumer.assignment.interval.ms",
    "group.coordinator.cached.buffer.max.bytes",
    "group.share.assignment.interval.ms",
    "group.streams.assignment.interval.ms",
    "leader.replication.throttled.rate",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.threads",
    "log.cleanup.policy",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.index.interval.bytes",
    "log.index.size.max.bytes",
    "log.local.retention.bytes",
    "log.local.retention.ms",
    "log.message.timestamp.after.max.ms",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.type",
    "log.preallocate",
    "log.remote.copy.lag.bytes",
    "log.remote.copy.lag.ms",
    "log.retention.bytes",
    "log.retention.ms",
    "log.roll.jitter.ms",
    "log.roll.ms",
    "log.segment.bytes",
    "log.segment.delete.delay.ms",
    "max.connection.creation.rate",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "max.decompressed.message.bytes",
    "message.max.bytes",
    "metric.reporters",
    "min.insync.replicas",
    "num.io.threads",
    "num.network.threads",
    "num.recovery.threads.per.data.dir",
    "num.replica.fetchers",
    "producer.id.expiration.ms",
    "remote.fetch.max.wait.ms",
    "remote.list.offsets.request.timeout.ms",
    "remote.log.index.file.cache.total.size.bytes",
    "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.expiration.thread.pool.size",
    "remote.log.manager.fetch.max.bytes.per.second",
    "remote.log.manager.follower.thread.pool.size",
    "remote.log.reader.threads",
    "replica.alter.log.dirs.io.max.bytes.per.second",
    "share.coordinator.cached.buffer.max.bytes",
    "transaction.partition.verification.enable",
    "unclean.leader.election.enable",
})


def update_mode(key: str) -> str:
    """``read-only``, ``per-broker`` or ``cluster-wide``: how Kafka 4.4 lets ``key`` change at run
    time (a ``listener.name.<l>.`` prefixed key takes its base key's mode, per broker)."""
    if key.startswith("listener.name."):
        base = key.split(".", 3)[3] if key.count(".") >= 3 else key
        return PER_BROKER_MODE if base in PER_BROKER or base in CLUSTER_WIDE else READ_ONLY
    if key in PER_BROKER:
        return PER_BROKER_MODE
    if key in CLUSTER_WIDE:
        return CLUSTER_WIDE_MODE
    return READ_ONLY
