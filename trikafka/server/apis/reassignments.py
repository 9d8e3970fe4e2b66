"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments.

What ``kafka-leader-election`` and ``kafka-reassign-partitions`` send. The handlers check what
the request names (the topic and partition exist: UNKNOWN_TOPIC_OR_PARTITION with Kafka's
message otherwise) and ask the cluster view to act (server/replica/cluster_view.py): a lone broker
answers as a one-broker Kafka does, an in-process cluster elects and moves replicas
(cluster/reassignments.py). Every answer is per partition, as in Kafka, and immediate: the
election or the first step of a reassignment has happened when the response is sent (Kafka's
controller commits it before answering too); catching a new replica up is done at once when its
broker is live, else when it starts, so ListPartitionReassignments shows a reassignment only
while a replica it adds is on a stopped broker.

* ElectLeaders with no partitions named elects over every partition and leaves out those that
  needed no election (each topic still listed), as Kafka's controller does.
* AlterPartitionReassignments v1 (KIP-860): ``allow_replication_factor_change=false`` refuses
  a target of another size with INVALID_REPLICATION_FACTOR.
* ACLs as Kafka's controller checks them: ALTER on the cluster for the first two, DESCRIBE on
  the cluster for the list; denied, the whole request is CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request
from trikafka.protocol.registry import ApiKey
from trikafka.server.authorization import AclOperation
from trikafka.server.kafka_apis import Answer, ApiFamily, handles
from trikafka.server.replica.cluster_view import (
    ELECTION_NOT_NEEDED,
    PREFERRED,
    UNCLEAN,
    Outcome,
    cluster_view,
)

__all__ = ["ReassignmentApis"]


def _result(index_field: str, index: int, outcome: Outcome) -> dict[str, Any]:
    return {index_field: index, "error_code": outcome.error_code, "error_message": outcome.error_message}


class ReassignmentApis(ApiFamily):
    def _partitions_of(self, topic: str) -> int | None:
        info = self.replicas.topics.get(topic)
        return None if info is None else info.partitions

    # --- ElectLeaders ------------------------------------------------------------------------

    @handles(ApiKey.ELECT_LEADERS)
    async def handle_elect_leaders_request(self, request: Request) -> Any:
        self.require_cluster(request, AclOperation.ALTER)
        body = request.body
        election_type = getattr(body, "election_type", PREFERRED)  # v0: preferred only
        if election_type not in (PREFERRED, UNCLEAN):
            raise KafkaProtocolError(f"Unknown election type {election_type}", ErrorCode.invalid_request)
        view = cluster_view(self.context)
        results = []
        if body.topic_partitions is None:
            for info in sorted(self.replicas.topics, key=lambda t: t.name):
                outcomes = ((p, view.elect_leader(info.name, p, election_type)) for p in range(info.partitions))
                results.append({
                    "topic": info.name,
                    "partition_result": [
                        _result("partition_id", p, o) for p, o in outcomes if o != ELECTION_NOT_NEEDED
                    ],
                })
        else:
            for topic in body.topic_partitions:
                count = self._partitions_of(topic.topic)
                partition_results = []
                for p in topic.partitions:
                    if count is None:
                        outcome = Outcome(ErrorCode.unknown_topic_or_partition, f"No such topic as {topic.topic}")
                    elif not 0 <= p < count:
                        outcome = Outcome(
                            ErrorCode.unknown_topic_or_partition, f"No such partition as {topic.topic}-{p}"
                        )
                    else:
                        outcome = view.elect_leader(topic.topic, p, election_type)
                    partition_results.append(_result("partition_id", p, outcome))
                results.append({"topic": topic.topic, "partition_result": partition_results})
        return Answer(throttle_time=0, error_code=ErrorCode.none, replica_election_results=results)

    # --- AlterPartitionReassignments ---------------------------------------------------------

    @handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
    async def handle_alter_partition_reassignments_request(self, request: Request) -> Any:
        self.require_cluster(request, AclOperation.ALTER)
        body = request.body
        allow_rf_change = getattr(body, "allow_replication_factor_change", True)
        view = cluster_view(self.context)
        responses = []
        for topic in body.topics:
            count = self._partitions_of(topic.name)
            partitions = []
            for p in topic.partitions:
                index = p.partition_index
                if count is None:
                    outcome = Outcome(
                        ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {topic.name}."
                    )
                elif not 0 <= index < count:
                    outcome = Outcome(
                        ErrorCode.unknown_topic_or_partition, f"Unable to find partition {topic.name}:{index}."
                    )
                else:
                    refusal = self._rf_change_refused(view, topic.name, index, p.replicas, allow_rf_change)
                    outcome = refusal if refusal is not None else view.alter_reassignment(
                        topic.name, index, None if p.replicas is None else tuple(p.replicas)
                    )
                partitions.append(_result("partition_index", index, outcome))
            responses.append({"name": topic.name, "partitions": partitions})
        return Answer(throttle_time=0, error_code=ErrorCode.none, error_message=None, responses=responses)

    @staticmethod
    def _rf_change_refused(view: Any, topic: str, partition: int, target: Any, allowed: bool) -> Outcome | None:
        if allowed or target is None:
            return None
        lead = view.leadership(topic, partition)
        ongoing = view.ongoing_reassignments().get((topic, partition))
        current = len(lead.replicas) - (len(ongoing.adding) if ongoing else 0)
        if len(target) == current:
            return None
        return Outcome(
            ErrorCode.invalid_replication_factor,
            f"The replication factor is changed from {current} to {len(target)} "
            "but allow_replication_factor_change is false.",
        )

    # --- ListPartitionReassignments ----------------------------------------------------------

    @handles(ApiKey.LIST_PARTITION_REASSIGNMENTS)
    async def handle_list_partition_reassignments_request(self, request: Request) -> Any:
        self.require_cluster(request, AclOperation.DESCRIBE)
        ongoing = cluster_view(self.context).ongoing_reassignments()
        wanted = None
        if request.body.topics is not None:
            wanted = {(t.name, p) for t in request.body.topics for p in t.partition_indexes}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), r in sorted(ongoing.items()):
            if wanted is not None and (topic, partition) not in wanted:
                continue
            by_topic.setdefault(topic, []).append({
                "partition_index": partition,
                "replicas": list(r.replicas),
                "adding_replicas": list(r.adding),
                "removing_replicas": list(r.removing),
            })
        return Answer(
            throttle_time=0,
            error_code=ErrorCode.none,
            error_message=None,
            topics=[{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        )
