"""Kafka broker keys newer than the trunk commit :mod:`trikafka.kafka_keys` was read from.

Two sources: later stored versions of ``GroupCoordinatorConfig.java`` and ``ShareGroupConfig.java``
(Kafka 4.1 era: streams groups, KIP-1071; share groups, KIP-932), and the keys of Kafka 4.4's
generated broker reference (``44/generated/kafka_config.html`` in apache/kafka-site) that the
trunk commit (4.0.0-SNAPSHOT, October 2024) lacks: OAuth assertion keys (KIP-1139), dead-letter
queues for share groups, assignment intervals, 2PC transactions (KIP-939), tiered-storage copy
lag, and others.
"""

from __future__ import annotations

__all__ = ["LATER_BROKER_KEYS"]

#: Broker keys of Kafka releases after the trunk commit, grouped by where they were read.
LATER_BROKER_KEYS: frozenset[str] = frozenset({
    # GroupCoordinatorConfig and ShareGroupConfig, later stored versions (Kafka 4.1 era)
    "group.consumer.regex.refresh.interval.ms",
    "group.share.assignors",
    "group.share.initialize.retry.interval.ms",
    "group.streams.heartbeat.interval.ms",
    "group.streams.max.heartbeat.interval.ms",
    "group.streams.max.session.timeout.ms",
    "group.streams.max.size",
    "group.streams.max.standby.replicas",
    "group.streams.min.heartbeat.interval.ms",
    "group.streams.min.session.timeout.ms",
    "group.streams.num.standby.replicas",
    "group.streams.session.timeout.ms",
    "group.share.max.delivery.count.limit",
    "group.share.max.share.sessions",
    "group.share.min.delivery.count.limit",
    "group.share.persister.class.name",
    # Kafka 4.4's broker reference, keys the trunk commit lacks
    "add.partitions.to.txn.retry.backoff.max.ms",
    "add.partitions.to.txn.retry.backoff.ms",
    "config.providers",
    "controller.quorum.auto.join.enable",
    "controller.quorum.fetch.max.bytes",
    "controller.quorum.fetch.snapshot.max.bytes",
    "cordoned.log.dirs",
    "errors.deadletterqueue.auto.create.topics.enable",
    "errors.deadletterqueue.topic.name.prefix",
    "follower.fetch.last.tiered.offset.enable",
    "group.consumer.assignment.interval.ms",
    "group.consumer.max.assignment.interval.ms",
    "group.consumer.min.assignment.interval.ms",
    "group.coordinator.background.threads",
    "group.coordinator.cached.buffer.max.bytes",
    "group.share.assignment.interval.ms",
    "group.share.max.assignment.interval.ms",
    "group.share.max.partition.max.record.locks",
    "group.share.min.assignment.interval.ms",
    "group.share.min.partition.max.record.locks",
    "group.streams.assignment.interval.ms",
    "group.streams.assignors",
    "group.streams.initial.rebalance.delay.ms",
    "group.streams.max.assignment.interval.ms",
    "group.streams.min.assignment.interval.ms",
    "group.streams.rack.aware.assignment.tags",
    "group.streams.topology.description.plugin.class",
    "log.remote.copy.lag.bytes",
    "log.remote.copy.lag.ms",
    "max.decompressed.message.bytes",
    "remote.log.manager.follower.thread.pool.size",
    "sasl.oauthbearer.allow.unverified.audience",
    "sasl.oauthbearer.allow.unverified.issuer",
    "sasl.oauthbearer.assertion.algorithm",
    "sasl.oauthbearer.assertion.claim.aud",
    "sasl.oauthbearer.assertion.claim.exp.seconds",
    "sasl.oauthbearer.assertion.claim.iss",
    "sasl.oauthbearer.assertion.claim.jti.include",
    "sasl.oauthbearer.assertion.claim.nbf.seconds",
    "sasl.oauthbearer.assertion.claim.sub",
    "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.template.file",
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.jwt.retriever.class",
    "sasl.oauthbearer.jwt.validator.class",
    "sasl.oauthbearer.scope",
    "share.coordinator.cached.buffer.max.bytes",
    "transaction.two.phase.commit.enable",
})
