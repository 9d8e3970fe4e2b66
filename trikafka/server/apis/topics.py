"""CreateTopics, DeleteTopics, CreatePartitions: the admin side of topics.

Per-topic results, as Kafka gives them: one bad entry never fails its neighbours, and a name
listed twice in one request is refused for that name with INVALID_REQUEST.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request
from trikafka.protocol.registry import ApiKey
from trikafka.server.apis.configs import topic_config_entries
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.kafka_apis import Answer, ApiFamily, errors_into, handles
from trikafka.server.replica.replica_manager import check_assignment, known_brokers

__all__ = ["TopicAdminApis"]



def _duplicates(names: list[str]) -> set[str]:
    return {name for name, n in Counter(names).items() if n > 1}


class TopicAdminApis(ApiFamily):
    @handles(ApiKey.CREATE_TOPICS)
    async def handle_create_topics_request(self, request: Request) -> Any:
        body = request.body
        duplicates = _duplicates([t.name for t in body.topics])
        # CREATE on the cluster allows every topic; else CREATE on each topic.
        any_topic = self.authorize(request, AclOperation.CREATE, ResourceType.CLUSTER)
        results = []
        with self.replicas.topics.deferred_saves():  # one write of the topic file per request
            for entry in body.topics:
                result: dict[str, Any] = {
                    "name": entry.name,
                    "topic_id": None,
                    "error_code": ErrorCode.none,
                    "error_message": None,
                    "num_partitions": -1,
                    "replication_factor": -1,
                    "configs": None,
                    "topic_config_error_code": 0,
                }
                with errors_into(result, message=True) as outcome:
                    if entry.name in duplicates:
                        raise KafkaProtocolError(
                            f"Create topics request from client `{request.client_id}` contains "
                            f"multiple entries for the following topics: {entry.name}",
                            ErrorCode.invalid_request,
                        )
                    if not any_topic and not self.authorize(
                        request, AclOperation.CREATE, ResourceType.TOPIC, entry.name
                    ):
                        raise KafkaProtocolError("Authorization failed.", ErrorCode.topic_authorization_failed)
                    if entry.assignments:
                        if entry.num_partitions != -1 or entry.replication_factor != -1:
                            raise KafkaProtocolError(
                                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                "Both cannot be used at the same time.",
                                ErrorCode.invalid_request,
                            )
                        ordered = sorted(entry.assignments, key=lambda a: a.partition_index)
                        if [a.partition_index for a in ordered] != list(range(len(ordered))):
                            raise KafkaProtocolError(
                                "Partitions in the manual partition assignment should be a consecutive "
                                "0-based integer sequence.",
                                ErrorCode.invalid_replica_assignment,
                            )
                        assignment = check_assignment(
                            [list(a.broker_ids) for a in ordered], known_brokers(self.replicas)
                        )
                        partitions, factor = len(assignment), len(assignment[0])
                    else:
                        assignment, partitions, factor = None, entry.num_partitions, entry.replication_factor
                    topic = self.replicas.create_topic(
                        entry.name,
                        partitions,
                        factor,
                        {c.name: c.value for c in entry.configs},
                        validate_only=body.validate_only,
                        assignment=assignment,
                    )
                describable = self.authorize(request, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, entry.name)
                if not describable:  # the topic is created; its configs are not shown (Kafka)
                    result["topic_config_error_code"] = ErrorCode.topic_authorization_failed
                if not outcome.failed:
                    result.update(
                        topic_id=topic.topic_id,
                        num_partitions=topic.partitions,
                        replication_factor=(
                            factor if factor != -1 else self.replicas.config.default_replication_factor
                        ),
                        configs=None if not describable else [
                            {
                                "name": e["name"],
                                "value": e["value"],
                                "read_only": e["read_only"],
                                "config_source": e["config_source"],
                                "is_sensitive": False,
                            }
                            for e in topic_config_entries(self.context, topic)
                        ],
                    )
                results.append(result)
        return Answer(throttle_time=0, topics=results)

    @handles(ApiKey.DELETE_TOPICS)
    async def handle_delete_topics_request(self, request: Request) -> Any:
        body = request.body
        states = (
            body.topics
            if request.api_version >= 6
            else [_NameOnly(name) for name in body.topic_names]
        )
        results = []
        with self.replicas.topics.deferred_saves():
            for state in states:
                name, topic_id = state.name, getattr(state, "topic_id", None)
                if topic_id is not None and topic_id.int == 0:
                    topic_id = None
                result: dict[str, Any] = {
                    "name": name,
                    "topic_id": topic_id,
                    "error_code": ErrorCode.none,
                    "error_message": None,
                }
                with errors_into(result, message=True):
                    if name is None and topic_id is None:
                        raise KafkaProtocolError("Neither topic name nor id were specified.", ErrorCode.invalid_request)
                    if name is not None and topic_id is not None:
                        raise KafkaProtocolError(
                            "You may not specify both topic name and topic id.", ErrorCode.invalid_request
                        )
                    if topic_id is not None:
                        info = self.replicas.topic_by_id(topic_id)
                        if info is None:
                            raise KafkaProtocolError(
                                "This server does not host this topic ID.", ErrorCode.unknown_topic_id
                            )
                        name = info.name
                        if not self.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                            # By id without DESCRIBE: the name is not told (the id is no secret).
                            raise KafkaProtocolError(
                                "Topic authorization failed.", ErrorCode.topic_authorization_failed
                            )
                        result["name"] = name
                    if not self.authorize(request, AclOperation.DELETE, ResourceType.TOPIC, name):
                        raise KafkaProtocolError("Topic authorization failed.", ErrorCode.topic_authorization_failed)
                    info = self.replicas.delete_topic(name)
                    result["topic_id"] = info.topic_id
                results.append(result)
        return Answer(throttle_time=0, responses=results)

    @handles(ApiKey.CREATE_PARTITIONS)
    async def handle_create_partitions_request(self, request: Request) -> Any:
        body = request.body
        duplicates = _duplicates([t.name for t in body.topics])
        results = []
        with self.replicas.topics.deferred_saves():
            for entry in body.topics:
                result: dict[str, Any] = {"name": entry.name, "error_code": ErrorCode.none, "error_message": None}
                with errors_into(result, message=True):
                    if entry.name in duplicates:
                        raise KafkaProtocolError("Duplicate topic in request.", ErrorCode.invalid_request)
                    if not self.authorize(request, AclOperation.ALTER, ResourceType.TOPIC, entry.name):
                        raise KafkaProtocolError(
                            "The topic authorization is failed.", ErrorCode.topic_authorization_failed
                        )
                    self.replicas.create_partitions(
                        entry.name,
                        entry.count,
                        validate_only=body.validate_only,
                        assignment=None
                        if entry.assignments is None
                        else [list(a.broker_ids) for a in entry.assignments],
                    )
                results.append(result)
        return Answer(throttle_time=0, results=results)


class _NameOnly:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
