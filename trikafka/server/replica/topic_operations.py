"""The topic operations of :class:`~trikafka.server.replica.replica_manager.ReplicaManager`.

CreateTopics (with Kafka's checks of partitions, replication factor, configs and a manual
assignment), auto-creation, DeleteTopics, CreatePartitions and the topic and broker config
changes of AlterConfigs: each changes the TopicStore and opens, deletes or reconfigures the
partitions' logs. ``ReplicaManager`` inherits them and holds the state they use.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from trikafka.config import BrokerConfig
from trikafka.errors import ConfigError, ErrorCode, KafkaProtocolError
from trikafka.log.config import LogConfig
from trikafka.log.partition_log import PartitionLogs
from trikafka.server.replica.cluster_view import ReplicaPlacement
from trikafka.server.replica.producer_state import ProducerStateManager
from trikafka.server.replica.topic_config import (
    LogConfigs,
    resolve_topic_config,
    validate_topic_configs,
)
from trikafka.server.replica.topics import TopicInfo, TopicStore, validate_topic_name

__all__ = ["TopicOperations", "INTERNAL_TOPICS", "MAX_PARTITIONS", "check_assignment", "known_brokers", "unknown_topic"]

log = logging.getLogger("trikafka.server")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
MAX_PARTITIONS = 100_000


def unknown_topic(name: str) -> KafkaProtocolError:
    return KafkaProtocolError(
        f"This server does not host this topic-partition: {name}",
        ErrorCode.unknown_topic_or_partition,
    )


class TopicOperations:
    """What ``ReplicaManager`` does to topics; the state it reads is the ReplicaManager's."""

    config: BrokerConfig
    static_config: BrokerConfig
    dynamic_broker_configs: dict[str, str]
    log_manager: PartitionLogs
    topics: TopicStore
    placement: ReplicaPlacement | None
    _log_configs: LogConfigs
    _producer_states: dict[tuple[str, int], ProducerStateManager]

    def effective_config(self, topic: TopicInfo) -> dict[str, Any]:
        return resolve_topic_config(topic.configs, self.config)

    def log_config(self, topic: TopicInfo) -> LogConfig:
        """The topic's LogConfig; topics with the same overrides share one (most have none)."""
        return self._log_configs.get(topic.configs, self.config)

    def _open_logs(
        self, topic: TopicInfo, partitions: range, replication_factor: int = -1, assignment: Any = None
    ) -> None:
        if self.placement is not None:
            self.placement.assign(topic.name, partitions, replication_factor, topic.is_internal, assignment)
        self.log_manager.create_logs(topic.name, partitions, self.log_config(topic))  # all or none

    def check_create(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str | None]
    ) -> tuple[int, dict[str, Any]]:
        """Validate a CreateTopics entry; returns (partitions, typed config overrides)."""
        self.topics.check_new_name(name)
        if name.startswith("__") and name in INTERNAL_TOPICS:
            raise KafkaProtocolError(f"Topic '{name}' is reserved for the broker.", ErrorCode.invalid_request)
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if not 1 <= num_partitions <= MAX_PARTITIONS:
            raise KafkaProtocolError(
                f"Number of partitions was set to an invalid non-positive value: {num_partitions}.",
                ErrorCode.invalid_partitions,
            )
        self.check_partition_cap(num_partitions)
        factor = self.config.default_replication_factor if replication_factor == -1 else replication_factor
        available = self.placement.live_brokers() if self.placement is not None else 1
        if not 1 <= factor <= available:
            raise KafkaProtocolError(
                f"Replication factor: {factor} larger than available brokers: {available}."
                if factor > 1
                else f"Replication factor must be larger than 0, or -1 to use the default value: {replication_factor}.",
                ErrorCode.invalid_replication_factor,
            )
        try:
            typed = validate_topic_configs(configs)
        except ConfigError as exc:
            raise KafkaProtocolError(str(exc), ErrorCode.invalid_config) from None
        return num_partitions, typed

    def check_partition_cap(self, adding: int) -> None:
        """POLICY_VIOLATION unless ``adding`` partitions fit under ``max.broker.partitions``."""
        self.topics.check_room(adding, self.config.max_broker_partitions)

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
        is_internal: bool = False,
        assignment: list[tuple[int, ...]] | None = None,
    ) -> TopicInfo:
        if is_internal:
            partitions, typed = num_partitions, validate_topic_configs(configs or {})
        else:
            partitions, typed = self.check_create(name, num_partitions, replication_factor, configs or {})
        topic = TopicInfo(name, uuid.uuid4(), partitions, typed, is_internal)
        if validate_only:
            return topic
        self._open_logs(topic, range(partitions), replication_factor, assignment)
        self.topics.add(topic)
        log.info("created topic %s with %d partition(s), id %s", name, partitions, topic.topic_id)
        return topic

    def auto_create(self, name: str) -> TopicInfo | None:
        """Metadata/Produce auto-creation; None when it is off or the name is illegal."""
        if not self.config.auto_create_topics_enable:
            return None
        try:
            validate_topic_name(name)
            return self.create_topic(name)
        except KafkaProtocolError:
            return self.topics.get(name)

    def delete_topic(self, name: str) -> TopicInfo:
        if not self.config.delete_topic_enable:
            raise KafkaProtocolError("Topic deletion is disabled.", ErrorCode.topic_deletion_disabled)
        topic = self.topics.get(name)
        if topic is None:
            raise unknown_topic(name)
        if topic.is_internal:
            raise KafkaProtocolError(f"Cannot delete internal topic {name}.", ErrorCode.invalid_request)
        self.topics.remove(name)
        for partition in range(topic.partitions):
            self.log_manager.delete_log(name, partition)
            self._producer_states.pop((name, partition), None)
        log.info("deleted topic %s", name)
        return topic

    def create_partitions(
        self, name: str, count: int, *, validate_only: bool = False, assignment: list[list[int]] | None = None
    ) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise unknown_topic(name)
        if count <= topic.partitions:
            raise KafkaProtocolError(
                f"Topic currently has {topic.partitions} partitions, which is higher than the "
                f"requested {count}." if count < topic.partitions
                else f"Topic already has {topic.partitions} partitions.",
                ErrorCode.invalid_partitions,
            )
        if count > MAX_PARTITIONS:
            raise KafkaProtocolError(f"{count} partitions is too many", ErrorCode.invalid_partitions)
        self.check_partition_cap(count - topic.partitions)
        checked = None
        if assignment is not None:
            if len(assignment) != count - topic.partitions:
                raise KafkaProtocolError(
                    f"Increasing the number of partitions by {count - topic.partitions} but "
                    f"{len(assignment)} assignments provided.",
                    ErrorCode.invalid_replica_assignment,
                )
            factor = self.placement.replication_factor(name) if self.placement is not None else 1
            checked = check_assignment(assignment, known_brokers(self), factor)
        if validate_only:
            return
        self._open_logs(topic, range(topic.partitions, count), -1, checked)
        self.topics.set_partitions(topic, count)

    def alter_topic_config(self, name: str, overrides: dict[str, Any], *, validate_only: bool = False) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise unknown_topic(name)
        if validate_only:
            return
        topic.configs = overrides
        self.topics.save()
        self.log_manager.update_topic_config(name, self.log_config(topic))

    def alter_broker_config(self, overrides: Mapping[str, str | None], *, validate_only: bool = False) -> None:
        """Replace the dynamic broker overrides; every topic inheriting a default follows."""
        cleaned = {k: v for k, v in overrides.items() if v is not None}
        new_config = self.static_config.with_overrides(**cleaned)  # raises ConfigError
        if validate_only:
            return
        self.config = new_config
        self._log_configs.clear()
        self.dynamic_broker_configs = cleaned
        for topic in self.topics:
            self.log_manager.update_topic_config(topic.name, self.log_config(topic))


def known_brokers(replicas: TopicOperations) -> tuple[int, ...]:
    """The broker ids a manual assignment may name: the cluster's, or this broker alone."""
    placement = replicas.placement
    return placement.broker_ids() if placement is not None else (replicas.config.node_id,)


def check_assignment(
    assignment: list[list[int]], known: tuple[int, ...], factor: int | None = None
) -> list[tuple[int, ...]]:
    """Every partition names the same number (``factor``, else the first's) of distinct
    brokers, all of them ``known``; INVALID_REPLICA_ASSIGNMENT with Kafka's words if not."""
    checked = []
    for replicas in assignment:
        if not replicas:
            raise KafkaProtocolError(
                "The manual partition assignment includes an empty replica list.", ErrorCode.invalid_replica_assignment
            )
        for broker in replicas:
            if broker not in known:
                raise KafkaProtocolError(
                    f"The manual partition assignment includes broker {broker}, but no such broker is registered.",
                    ErrorCode.invalid_replica_assignment,
                )
            if list(replicas).count(broker) > 1:
                raise KafkaProtocolError(
                    f"The manual partition assignment includes the broker {broker} more than once.",
                    ErrorCode.invalid_replica_assignment,
                )
        checked.append(tuple(replicas))
    factor = len(checked[0]) if factor is None and checked else factor
    if any(len(r) != factor for r in checked):
        raise KafkaProtocolError(
            f"All partitions in the manual partition assignment must have {factor} replicas.",
            ErrorCode.invalid_replica_assignment,
        )
    return checked
