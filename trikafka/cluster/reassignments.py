"""Leader elections and partition reassignments as rules over the cluster state (pure).

Theory of operation, after Kafka's controller (ReplicationControlManager, PartitionChangeBuilder):

* **Preferred election**: the preferred leader is the first replica. When it leads already the
  answer is ELECTION_NOT_NEEDED; when it is live and in the ISR it becomes the leader (epoch
  + 1); otherwise PREFERRED_LEADER_NOT_AVAILABLE.
* **Unclean election**: only for a partition with no leader (else ELECTION_NOT_NEEDED). A live
  ISR member is preferred; failing that the first live replica leads with itself as the ISR —
  data the old ISR had beyond it is lost, which is what "unclean" means. None live:
  ELIGIBLE_LEADERS_NOT_AVAILABLE.
* **Reassignment** to a target list: the replica list becomes target + the replicas leaving
  (``removing`` = current − target), ``adding`` = target − current. It completes once every
  adding replica is in the ISR and the ISR keeps a replica of the target: replicas = target,
  the leaving ones drop out of the ISR, and a leader that is leaving hands over to the first
  target replica in the ISR (epoch + 1). A change that adds nothing (a reorder, a shrink)
  completes at once. A new target while one is in progress starts from the current list (its
  adding replicas leave again if the new target omits them), as in Kafka.
* **Cancel** (target null): the replicas being added leave, the list and ISR go back to the
  rest; with nothing in progress NO_REASSIGNMENT_IN_PROGRESS; when no ISR member would remain,
  INVALID_REPLICA_ASSIGNMENT (Kafka's "would require an unclean leader election").

Who catches the adding replicas up is the shell's business (cluster/controls.py).
"""

from __future__ import annotations

from trikafka.cluster.state import ClusterState, PartitionState
from trikafka.server.replica.cluster_view import (
    ELECTION_NOT_NEEDED,
    PREFERRED,
    OngoingReassignment,
    Outcome,
    manual_assignment_error,
)

__all__ = ["begin_reassignment", "cancel_reassignment", "complete_if_ready", "elect", "ongoing"]

PREFERRED_LEADER_NOT_AVAILABLE = Outcome(80, "The preferred leader was not available.")
ELIGIBLE_LEADERS_NOT_AVAILABLE = Outcome(83, "Eligible topic partition leaders are not available.")
NO_REASSIGNMENT_IN_PROGRESS = Outcome(85, None)  # Kafka sends null: the message is the default


def _lead(part: PartitionState, leader: int) -> None:
    if part.leader != leader:
        part.leader = leader
        part.leader_epoch += 1


def elect(state: ClusterState, part: PartitionState, election_type: int) -> Outcome:
    if election_type == PREFERRED:
        preferred = part.replicas[0]
        if part.leader == preferred:
            return ELECTION_NOT_NEEDED
        if preferred not in part.isr or preferred not in state.alive:
            return PREFERRED_LEADER_NOT_AVAILABLE
        _lead(part, preferred)
        state.changed()
        return Outcome()
    if part.leader >= 0:
        return ELECTION_NOT_NEEDED
    live_isr = [r for r in part.isr if r in state.alive]
    if live_isr:
        _lead(part, live_isr[0])
    else:
        live = [r for r in part.replicas if r in state.alive and r not in part.adding]
        if not live:
            return ELIGIBLE_LEADERS_NOT_AVAILABLE
        _lead(part, live[0])
        part.isr = (live[0],)
    state.changed()
    return Outcome()


def begin_reassignment(state: ClusterState, part: PartitionState, target: tuple[int, ...]) -> Outcome:
    error = manual_assignment_error(target, state.node_ids)
    if error is not None:
        return error
    current = part.replicas
    removing = tuple(sorted(set(current) - set(target)))
    part.adding = tuple(sorted(set(target) - set(current)))
    part.removing = removing
    part.replicas = tuple(target) + removing
    state.changed()
    return Outcome()


def complete_if_ready(state: ClusterState, part: PartitionState) -> tuple[int, ...] | None:
    """Finish the partition's reassignment if it can; returns the replicas that left."""
    if not part.adding and not part.removing:
        return None
    if any(r not in part.isr for r in part.adding):
        return None
    target = tuple(r for r in part.replicas if r not in part.removing)
    isr = tuple(r for r in target if r in part.isr)
    if not isr:
        return None  # Kafka waits for an ISR member that stays
    removed = part.removing
    part.replicas, part.isr, part.adding, part.removing = target, isr, (), ()
    if part.leader not in isr:
        live = [r for r in isr if r in state.alive]
        _lead(part, live[0] if live else -1)
    state.changed()
    return removed


def cancel_reassignment(
    state: ClusterState, topic: str, partition: int, part: PartitionState
) -> tuple[Outcome, tuple[int, ...]]:
    """Revert to the replicas before the reassignment; returns the outcome and who left."""
    if not part.adding and not part.removing:
        return NO_REASSIGNMENT_IN_PROGRESS, ()
    isr = tuple(r for r in part.isr if r not in part.adding)
    if not isr:
        return Outcome(
            39,
            f"Unable to revert partition assignment for {topic}:{partition} because it would "
            "require an unclean leader election.",
        ), ()
    left = part.adding
    part.replicas = tuple(r for r in part.replicas if r not in part.adding)
    part.isr, part.adding, part.removing = isr, (), ()
    if part.leader not in isr:
        live = [r for r in isr if r in state.alive]
        _lead(part, live[0] if live else -1)
    state.changed()
    return Outcome(), left


def ongoing(state: ClusterState) -> dict[tuple[str, int], OngoingReassignment]:
    return {
        tp: OngoingReassignment(part.replicas, part.adding, part.removing)
        for tp, part in state.partitions.items()
        if part.adding or part.removing
    }
