"""ClusterView: what the request path asks about leadership, in one typed interface.

Why an interface. A lone broker leads every partition with leader epoch 0, is the whole
ISR and coordinates every group and transactional id — :class:`SingleBrokerView` says
exactly that and nothing else. Several brokers in one process (:mod:`trikafka.cluster`)
answer the same questions from a shared cluster state, so the API handlers stay the same
code either way: they ask, and answer NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS or
NOT_COORDINATOR as Kafka does. The view is ``ApiContext.cluster_view``; :func:`cluster_view`
falls back to the single-broker answer when none was wired.

``version`` changes whenever any answer would (a leader moved, an ISR shrank, a broker
stopped): the Metadata answer cache keys on it.

The admin side — ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments — asks
the same view to act: :class:`SingleBrokerView` answers as a one-broker Kafka does (the
preferred leader always leads: ELECTION_NOT_NEEDED; the only valid assignment is itself, done
at once; nothing is ever in progress), the cluster moves replicas (cluster/reassignments.py).
Outcomes carry Kafka's error code and message (``None`` where Kafka sends null).
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs

from trikafka.errors import ErrorCode

__all__ = [
    "ClusterView",
    "ELECTION_NOT_NEEDED",
    "GROUP_KEY",
    "OngoingReassignment",
    "Outcome",
    "PREFERRED",
    "UNCLEAN",
    "PartitionLeadership",
    "ReplicaPlacement",
    "SingleBrokerView",
    "TRANSACTION_KEY",
    "cluster_view",
    "leader_endpoints",
    "leader_epoch_error",
    "manual_assignment_error",
]

GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator's key types
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types


@attrs.frozen
class Outcome:
    """One partition's answer to an admin action: Kafka's error code and message."""

    error_code: int = 0
    error_message: str | None = None


ELECTION_NOT_NEEDED = Outcome(84, "Leader election not needed for topic partition.")


@attrs.frozen
class OngoingReassignment:
    """ListPartitionReassignments' entry: every replica (target first), joining, leaving."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def manual_assignment_error(replicas: Any, brokers: Any) -> Outcome | None:
    """Kafka's validateManualPartitionAssignment (INVALID_REPLICA_ASSIGNMENT), None if valid."""
    if not replicas:
        return Outcome(39, "The manual partition assignment includes an empty replica list.")
    seen: set[int] = set()
    for broker in sorted(replicas):
        if broker not in brokers:
            return Outcome(
                39, f"The manual partition assignment includes broker {broker}, but no such broker is registered."
            )
        if broker in seen:
            return Outcome(39, f"The manual partition assignment includes the broker {broker} more than once.")
        seen.add(broker)
    return None


@attrs.frozen
class PartitionLeadership:
    """A partition's leader (-1: none alive), its epoch, replicas and in-sync replicas."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()


class ClusterView(Protocol):
    @property
    def version(self) -> int: ...

    @property
    def changes(self) -> Any:
        """An :class:`~trikafka.log.log.EndOffset` holding ``version``, for a waiting Fetch to
        notice that leadership moved; None when it never changes (one broker)."""
        ...

    def leadership(self, topic: str, partition: int) -> PartitionLeadership: ...

    def coordinator(self, key_type: int, key: str) -> int:
        """The node id coordinating a group (key type 0) or transactional id (1); -1: none."""
        ...

    def endpoint(self, node_id: int, listener_name: str) -> Any:
        """The node's advertised ``BrokerEndpoint`` on that listener, or None."""
        ...

    def elect_leader(self, topic: str, partition: int, election_type: int) -> Outcome:
        """ElectLeaders for one existing partition (PREFERRED or UNCLEAN)."""
        ...

    def alter_reassignment(self, topic: str, partition: int, replicas: tuple[int, ...] | None) -> Outcome:
        """Start (or replace) a reassignment to ``replicas``; None cancels the one in progress."""
        ...

    def ongoing_reassignments(self) -> dict[tuple[str, int], OngoingReassignment]: ...


class ReplicaPlacement(Protocol):
    """Where new partitions' replicas go (the ReplicaManager calls it; a lone broker has none)."""

    def live_brokers(self) -> int: ...

    def broker_ids(self) -> tuple[int, ...]: ...

    def replication_factor(self, topic: str) -> int: ...

    def assign(
        self, topic: str, partitions: range, replication_factor: int, is_internal: bool, assignment: Any = None
    ) -> None:
        """Place ``partitions`` (-1: the default factor, or the topic's existing one), on
        ``assignment[i]``'s brokers for the i-th when a manual assignment is given."""
        ...


class SingleBrokerView:
    """One broker: it leads everything (epoch 0), the ISR is itself, it coordinates all."""

    version = 0
    changes = None

    def __init__(self, node_id: int, metadata_cache: Any = None) -> None:
        self.node_id = node_id
        self._me = PartitionLeadership(node_id, 0, (node_id,), (node_id,))
        self._cache = metadata_cache

    def leadership(self, topic: str, partition: int) -> PartitionLeadership:
        return self._me

    def coordinator(self, key_type: int, key: str) -> int:
        return self.node_id

    def endpoint(self, node_id: int, listener_name: str) -> Any:
        if self._cache is None or node_id != self.node_id:
            return None
        found = self._cache.alive_brokers(listener_name)
        return found[0] if found else None

    def elect_leader(self, topic: str, partition: int, election_type: int) -> Outcome:
        return ELECTION_NOT_NEEDED  # the preferred (only) replica leads, and a leader exists

    def alter_reassignment(self, topic: str, partition: int, replicas: tuple[int, ...] | None) -> Outcome:
        if replicas is None:
            return Outcome(85, None)  # NO_REASSIGNMENT_IN_PROGRESS, Kafka's null message
        return manual_assignment_error(replicas, (self.node_id,)) or Outcome()

    def ongoing_reassignments(self) -> dict[tuple[str, int], OngoingReassignment]:
        return {}


def leader_epoch_error(requested: int, lead: PartitionLeadership) -> Any:
    """Kafka's checkCurrentLeaderEpoch: a client's ``current_leader_epoch`` older than the
    partition's is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH; -1 means "any".
    None when it matches."""
    if requested < 0 or requested == lead.leader_epoch:
        return None
    return ErrorCode.fenced_leader_epoch if requested < lead.leader_epoch else ErrorCode.unknown_leader_epoch


def leader_endpoints(view: ClusterView, node_ids: Any, listener_name: str) -> list[dict[str, Any]]:
    """KIP-951's ``node_endpoints``: where the leaders named in ``current_leader`` fields
    listen, so a client can go there without asking Metadata first."""
    found = []
    for node_id in sorted(set(node_ids)):
        endpoint = view.endpoint(node_id, listener_name)
        if endpoint is not None:
            found.append({"node_id": node_id, "host": endpoint.host, "port": endpoint.port, "rack": endpoint.rack})
    return found


def cluster_view(context: Any) -> ClusterView:
    """The context's view; a single-broker view made once when none was wired."""
    view = context.cluster_view
    if view is None:
        view = context.cluster_view = SingleBrokerView(context.config.node_id, context.metadata_cache)
    result: ClusterView = view
    return result
