"""The controls a test uses to make an in-process cluster misbehave.

Each is a state change (:mod:`trikafka.cluster.state`) plus whatever copying it needs
(:mod:`trikafka.cluster.replication`), done without a checkpoint in between, so no request
ever sees half of it. Mixed into :class:`~trikafka.cluster.cluster.Cluster`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from trikafka.clock import Clock
from trikafka.cluster import reassignments
from trikafka.cluster.node import ClusterNode
from trikafka.cluster.replication import ClusterLogManager, catch_up
from trikafka.cluster.state import ClusterState
from trikafka.config import BrokerConfig
from trikafka.server.replica.cluster_view import (
    GROUP_KEY,
    TRANSACTION_KEY,
    UNCLEAN,
    OngoingReassignment,
    Outcome,
)
from trikafka.server.wiring import new_log_manager

__all__ = ["ClusterControls"]

log = logging.getLogger("trikafka.cluster")


class ClusterControls:
    """``move_leader``, ``move_coordinator``, ``shrink_isr``/``expand_isr``,
    ``stop_broker``/``start_broker``; and what the admin APIs ask of the cluster (the
    ClusterView's ``elect_leader``, ``alter_reassignment``, ``ongoing_reassignments``)."""

    state: ClusterState
    logs: ClusterLogManager
    config: BrokerConfig
    node_configs: dict[int, BrokerConfig]
    nodes: dict[int, ClusterNode]
    now_ms: Clock
    _log_managers: dict[int, Any]
    _parked: dict[int, Any]

    async def _start_node(self, node_id: int) -> None:
        raise NotImplementedError

    def move_leader(self, topic: str, partition: int, to: int) -> None:
        """Make broker ``to`` (a live in-sync replica) the leader; the leader epoch goes up."""
        self.state.move_leader(topic, partition, to)
        log.info("leader of %s-%d moved to broker %d", topic, partition, to)

    def move_coordinator(self, key: str, to: int, *, key_type: str | None = None) -> None:
        """Move the coordinator of a group (``key_type="group"``), a transactional id
        (``"transaction"``) or, by default, both, by moving the leader of the internal
        partition it hashes to — as Kafka's coordinators move (other ids on it move too)."""
        if key_type not in (None, "group", "transaction"):
            raise ValueError(f"key_type={key_type!r}: allowed values are group, transaction")
        kinds = (
            [GROUP_KEY, TRANSACTION_KEY]
            if key_type is None
            else [GROUP_KEY if key_type == "group" else TRANSACTION_KEY]
        )
        for kind in kinds:
            topic, partition = self.state.coordinator_partition(kind, key)
            lead = self.state.leadership(topic, partition)
            if to not in lead.replicas:
                self.state.add_replica(topic, partition, to)
            if to not in lead.isr:
                self.expand_isr(topic, partition, [to])
            self.move_leader(topic, partition, to)

    def shrink_isr(self, topic: str, partition: int, to: Iterable[int]) -> None:
        """The ISR becomes ``to`` (holding the leader); the others stop receiving appends."""
        removed = self.state.shrink_isr(topic, partition, to)
        log.info("ISR of %s-%d shrank: %s left", topic, partition, list(removed))

    def expand_isr(self, topic: str, partition: int, to: Iterable[int] | None = None) -> None:
        """Replicas ``to`` (default: every live replica) catch up and rejoin the ISR."""
        lead = self.state.leadership(topic, partition)
        joining = [r for r in (lead.replicas if to is None else to) if r not in lead.isr]
        if to is None:
            joining = [r for r in joining if r in self.state.alive]
        if lead.leader < 0:
            raise ValueError(f"{topic}-{partition} has no live leader to catch up from")
        self._catch_up(topic, partition, joining)
        self.state.expand_isr(topic, partition, joining)

    def _catch_up(self, topic: str, partition: int, joining: Iterable[int]) -> None:
        if (topic, partition) not in self.logs.logs:
            return  # an internal partition not created yet: nothing to copy
        leader = self.logs.leader_log(topic, partition)
        for node_id in joining:
            manager = self._log_managers.get(node_id)
            if manager is None:
                raise ValueError(f"broker {node_id} is stopped: it cannot join an ISR")
            replica = manager.get_or_create_log(topic, partition, self.logs.config_of(topic, partition))
            catch_up(replica, leader)

    async def stop_broker(self, node_id: int) -> None:
        """Stop one broker: its connections drop, its partitions lead elsewhere (or go
        offline if it was their last in-sync replica) and its replicas close."""
        self.state.stop_broker(node_id)
        node = self.nodes[node_id]
        node.cancel_scope.cancel()  # at once: its connections drop, as a broker's that dies
        await node.stopped.wait()
        manager = self._log_managers[node_id]
        if not self.config.log_dirs:
            self._parked[node_id] = manager
        self._log_managers[node_id] = None
        log.info("broker %d stopped", node_id)

    async def start_broker(self, node_id: int) -> None:
        """Start a stopped broker: it reopens its replicas, catches up from the leaders,
        rejoins their ISRs and listens again on the same address."""
        self.state.start_broker(node_id)  # refuses an unknown or running broker first
        manager = self._parked.pop(node_id, None)
        if manager is None:
            manager = new_log_manager(self.node_configs[node_id], self.now_ms)
        self._log_managers[node_id] = manager
        assigned = set(self.state.replicas_on(node_id))
        for topic, partition in [tp for tp in manager.logs if tp not in assigned]:
            manager.delete_log(topic, partition)  # reassigned away while it was stopped
        self.logs.open_replicas(node_id)
        for topic, partition in self.state.replicas_on(node_id):
            lead = self.state.leadership(topic, partition)
            if lead.leader < 0:
                continue
            if lead.leader == node_id:  # it led again: the others follow it
                joining = [r for r in lead.replicas if r not in lead.isr and r in self.state.alive]
            else:
                joining = [node_id] if node_id not in lead.isr else []
            if joining:
                self._catch_up(topic, partition, joining)
                self.state.expand_isr(topic, partition, joining)
            self._progress_reassignment(topic, partition)
        await self._start_node(node_id)
        log.info("broker %d started", node_id)

    # --- the admin APIs (ClusterView) ---------------------------------------------------

    def elect_leader(self, topic: str, partition: int, election_type: int) -> Outcome:
        part = self.state.get(topic, partition)
        if part is None:
            return Outcome(3, f"No such partition as {topic}-{partition}")
        outcome = reassignments.elect(self.state, part, election_type)
        if outcome.error_code == 0:
            log.info("leader of %s-%d elected: broker %d (%s)", topic, partition, part.leader,
                     "unclean" if election_type == UNCLEAN else "preferred")
            if election_type == UNCLEAN:  # the live replicas follow the new leader's log
                self.expand_isr(topic, partition)
        return outcome

    def alter_reassignment(self, topic: str, partition: int, replicas: tuple[int, ...] | None) -> Outcome:
        part = self.state.get(topic, partition)
        if part is None:
            return Outcome(3, f"Unable to find partition {topic}:{partition}.")
        if replicas is None:
            outcome, left = reassignments.cancel_reassignment(self.state, topic, partition, part)
            self._drop_replicas(topic, partition, left)
            return outcome
        outcome = reassignments.begin_reassignment(self.state, part, tuple(replicas))
        if outcome.error_code == 0:
            log.info("reassigning %s-%d to %s", topic, partition, list(replicas))
            self._progress_reassignment(topic, partition)
        return outcome

    def ongoing_reassignments(self) -> dict[tuple[str, int], OngoingReassignment]:
        return reassignments.ongoing(self.state)

    def _progress_reassignment(self, topic: str, partition: int) -> None:
        """The adding replicas that are live copy the leader's log and join the ISR; then
        the reassignment completes if it can, and the leaving replicas' logs go."""
        part = self.state.get(topic, partition)
        if part is None or not (part.adding or part.removing):
            return
        joining = [r for r in part.adding if r in self.state.alive and r not in part.isr]
        if joining and part.leader >= 0:
            self._catch_up(topic, partition, joining)
            self.state.expand_isr(topic, partition, joining)
        left = reassignments.complete_if_ready(self.state, part)
        if left is not None:
            log.info("reassignment of %s-%d done: replicas %s", topic, partition, list(part.replicas))
            self._drop_replicas(topic, partition, left)

    def _drop_replicas(self, topic: str, partition: int, node_ids: Iterable[int]) -> None:
        """Delete the replicas of brokers no longer assigned (a stopped broker's in-memory
        replica too; a stopped broker's files go when it starts again)."""
        for node_id in node_ids:
            manager = self._log_managers.get(node_id) or self._parked.get(node_id)
            if manager is not None:
                manager.delete_log(topic, partition)
