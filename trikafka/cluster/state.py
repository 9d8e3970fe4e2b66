"""The cluster's metadata as a pure state machine: brokers, replicas, leaders, ISRs.

Theory of operation. Kafka's controller keeps, per partition, the replica list, the leader,
the leader epoch and the in-sync replicas, and changes them on a few events. Here those
events are method calls and every rule is written next to the event it belongs to:

* **assign** (a topic or partitions are created): replicas are placed round-robin over the
  live brokers — partition ``p``'s first replica, its preferred leader, is the ``p``-th live
  broker, the others follow in id order — as Kafka's assignment without racks does (minus
  its random start). When brokers have racks, Kafka's rack-aware assignment spreads each
  partition's replicas over the racks (``placement.py``). The ISR is every replica; the
  leader epoch starts at 0.
* **move_leader**: only to a live in-sync replica (Kafka never elects an out-of-sync one
  without unclean election); the leader epoch goes up by one.
* **shrink_isr / expand_isr**: the ISR always holds the leader; a replica may rejoin only
  when it is live (the shell copies what it missed first, so "in sync" stays true).
* **stop_broker**: the broker leaves every ISR; a partition it led elects the next live ISR
  member (epoch + 1). When it was the last in-sync replica the partition is offline: leader
  -1, ISR kept as ``(it,)`` — Kafka's rule, so it leads again when it comes back.
* **start_broker**: offline partitions whose last ISR member returns get it as leader.

Coordinators follow Kafka: a group (transactional id) is coordinated by the leader of
``__consumer_offsets`` (``__transaction_state``) partition ``abs(javaHashCode(id)) %
partitions``. Those partitions are placed when the state is built, so coordinators exist
before the internal topic is first written to, and move with their partition's leader.

``version`` grows on every change; the Metadata answer cache keys on it and tests can wait
for it. Nothing here does I/O or knows about trio.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from trikafka.cluster.placement import rack_aware_replicas
from trikafka.server.replica.cluster_view import GROUP_KEY, PartitionLeadership

__all__ = [
    "ClusterState",
    "PartitionState",
    "OFFSETS_TOPIC",
    "TRANSACTION_STATE_PARTITIONS",
    "TRANSACTION_TOPIC",
    "java_hash_code",
]

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
TRANSACTION_STATE_PARTITIONS = 50  # Kafka's transaction.state.log.num.partitions default

TopicPartition = tuple[str, int]


def java_hash_code(text: str) -> int:
    """``String.hashCode()`` over UTF-16 code units, as a signed 32-bit int."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@attrs.define
class PartitionState:
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    #: A reassignment in progress (cluster/reassignments.py): replicas joining and leaving.
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


class ClusterState:
    def __init__(
        self,
        node_ids: Iterable[int],
        *,
        default_replication_factor: int = 1,
        offsets_partitions: int = 50,
        internal_replication_factor: int = 3,
        racks: Mapping[int, str | None] | None = None,
    ) -> None:
        self.node_ids: tuple[int, ...] = tuple(sorted(node_ids))
        #: node id → rack (``broker.rack``); with any, placement is rack-aware (placement.py).
        self.racks: dict[int, str | None] = dict(racks or {})
        if not self.node_ids or len(set(self.node_ids)) != len(self.node_ids):
            raise ValueError(f"node ids must be distinct and at least one: {self.node_ids}")
        self.alive: set[int] = set(self.node_ids)
        self.default_replication_factor = default_replication_factor
        self.partitions: dict[TopicPartition, PartitionState] = {}
        self.version = 0
        #: Told every new version (the Trio shell turns it into something to wait on).
        self.on_change: Callable[[int], None] | None = None
        self.offsets_partitions = offsets_partitions
        internal = min(internal_replication_factor, len(self.node_ids))
        self.assign(OFFSETS_TOPIC, range(offsets_partitions), internal)
        self.assign(TRANSACTION_TOPIC, range(TRANSACTION_STATE_PARTITIONS), internal)

    def _changed(self) -> None:
        self.version += 1
        if self.on_change is not None:
            self.on_change(self.version)

    def changed(self) -> None:
        """Something changed a partition's state in place (cluster/reassignments.py)."""
        self._changed()

    def get(self, topic: str, partition: int) -> PartitionState | None:
        return self.partitions.get((topic, partition))

    def endpoints_changed(self) -> None:
        """A broker (re)bound its listeners: answers naming brokers change too."""
        self._changed()

    def _get(self, topic: str, partition: int) -> PartitionState:
        state = self.partitions.get((topic, partition))
        if state is None:
            raise KeyError(f"no partition {topic}-{partition} in the cluster")
        return state

    # --- queries ---------------------------------------------------------------------

    def live_brokers(self) -> int:
        return len(self.alive)

    def leadership(self, topic: str, partition: int) -> PartitionLeadership:
        state = self.partitions.get((topic, partition))
        if state is None:
            return PartitionLeadership(-1, -1, (), ())
        offline = tuple(r for r in state.replicas if r not in self.alive)
        return PartitionLeadership(state.leader, state.leader_epoch, state.replicas, state.isr, offline)

    def coordinator_partition(self, key_type: int, key: str) -> TopicPartition:
        if key_type == GROUP_KEY:
            return OFFSETS_TOPIC, (java_hash_code(key) & 0x7FFFFFFF) % self.offsets_partitions
        return TRANSACTION_TOPIC, (java_hash_code(key) & 0x7FFFFFFF) % TRANSACTION_STATE_PARTITIONS

    def coordinator(self, key_type: int, key: str) -> int:
        return self._get(*self.coordinator_partition(key_type, key)).leader

    def replicas_on(self, node_id: int) -> list[TopicPartition]:
        return [tp for tp, state in self.partitions.items() if node_id in state.replicas]

    # --- events ----------------------------------------------------------------------

    def assign(
        self,
        topic: str,
        partitions: range,
        replication_factor: int = -1,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Place partitions not placed yet (-1: the topic's factor, else the default); a
        manual ``assignment`` (a replica tuple per partition, in order) is taken as it is,
        its live replicas in sync and the first live one leading."""
        if assignment is not None:
            for p, replicas in zip(partitions, assignment, strict=True):
                isr = tuple(r for r in replicas if r in self.alive) or (replicas[0],)
                leader = isr[0] if isr[0] in self.alive else -1
                self.partitions[(topic, p)] = PartitionState(tuple(replicas), leader, 0, isr)
            self._changed()
            return
        if replication_factor == -1:
            first = self.partitions.get((topic, 0))
            replication_factor = len(first.replicas) if first else self.default_replication_factor
        live = sorted(self.alive)
        if not 1 <= replication_factor <= len(live):
            raise ValueError(
                f"replication factor {replication_factor} for {topic}: {len(live)} live broker(s)"
            )
        for p in partitions:
            if (topic, p) in self.partitions:
                continue
            if any(self.racks.get(node) for node in live):
                replicas = rack_aware_replicas(live, self.racks, p, replication_factor)
            else:
                replicas = tuple(live[(p + j) % len(live)] for j in range(replication_factor))
            self.partitions[(topic, p)] = PartitionState(replicas, replicas[0], 0, replicas)
        self._changed()

    def restore(self, topic: str, partition: int, replicas: Iterable[int]) -> None:
        """Place a partition found on disk where its replicas are (a restart of the process)."""
        replicas = tuple(sorted(replicas))
        self.partitions[(topic, partition)] = PartitionState(replicas, replicas[0], 0, replicas)
        self._changed()

    def forget(self, topic: str) -> None:
        for tp in [tp for tp in self.partitions if tp[0] == topic]:
            del self.partitions[tp]
        self._changed()

    def move_leader(self, topic: str, partition: int, to: int) -> None:
        state = self._get(topic, partition)
        if to not in state.isr or to not in self.alive:
            raise ValueError(
                f"cannot move the leader of {topic}-{partition} to broker {to}: "
                f"it must be a live in-sync replica (ISR {list(state.isr)}, live {sorted(self.alive)})"
            )
        if state.leader != to:
            state.leader = to
            state.leader_epoch += 1
            self._changed()

    def add_replica(self, topic: str, partition: int, node_id: int) -> None:
        """Reassignment's first step: ``node_id`` becomes a replica (out of the ISR until it
        catches up and :meth:`expand_isr` lets it in)."""
        state = self._get(topic, partition)
        if node_id not in self.node_ids:
            raise ValueError(f"no broker {node_id} in this cluster (brokers {list(self.node_ids)})")
        if node_id not in state.replicas:
            state.replicas = (*state.replicas, node_id)
            self._changed()

    def shrink_isr(self, topic: str, partition: int, to: Iterable[int]) -> tuple[int, ...]:
        """The ISR becomes ``to`` (which must hold the leader); returns who left it."""
        state = self._get(topic, partition)
        keep = set(to)
        if state.leader not in keep or not keep <= set(state.isr):
            raise ValueError(
                f"the ISR of {topic}-{partition} can shrink to a subset of {list(state.isr)} "
                f"holding the leader {state.leader}, not {sorted(keep)}"
            )
        removed = tuple(r for r in state.isr if r not in keep)
        state.isr = tuple(r for r in state.replicas if r in keep)
        self._changed()
        return removed

    def expand_isr(self, topic: str, partition: int, joining: Iterable[int]) -> None:
        """``joining`` replicas are in sync now (the caller copied what they missed)."""
        state = self._get(topic, partition)
        joining = set(joining)
        bad = sorted(r for r in joining if r not in state.replicas or r not in self.alive)
        if bad:
            raise ValueError(
                f"brokers {bad} cannot join the ISR of {topic}-{partition}: "
                f"replicas {list(state.replicas)}, live {sorted(self.alive)}"
            )
        state.isr = tuple(r for r in state.replicas if r in joining or r in state.isr)
        self._changed()

    def stop_broker(self, node_id: int) -> None:
        if node_id not in self.node_ids:
            raise ValueError(f"no broker {node_id} in this cluster (brokers {list(self.node_ids)})")
        if node_id not in self.alive:
            raise ValueError(f"broker {node_id} is not running")
        self.alive.discard(node_id)
        for state in self.partitions.values():
            if node_id not in state.isr:
                continue
            rest = tuple(r for r in state.isr if r != node_id)
            if not rest:  # the last in-sync replica: offline, and it keeps its ISR seat
                if state.leader == node_id:
                    state.leader = -1
                    state.leader_epoch += 1
                continue
            state.isr = rest
            if state.leader == node_id:
                state.leader = rest[0]
                state.leader_epoch += 1
        self._changed()

    def start_broker(self, node_id: int) -> None:
        if node_id not in self.node_ids:
            raise ValueError(f"no broker {node_id} in this cluster (brokers {list(self.node_ids)})")
        if node_id in self.alive:
            raise ValueError(f"broker {node_id} is already running")
        self.alive.add(node_id)
        for state in self.partitions.values():
            if state.leader == -1 and state.isr == (node_id,):
                state.leader = node_id
                state.leader_epoch += 1
        self._changed()
