"""What the test controls act on: one broker's faults and recorder, and the state it answers.

A single :class:`~trikafka.broker.Broker` is all three at once. In a cluster from
``trikafka.cluster`` each broker (``cluster.nodes[node_id]``) has its own request path and
so its own faults (``Faults.of(node)``), while groups, offsets and transactions are the
cluster's — its ``wait_for_*`` (``AwaitableState``) when it has them, else the node's.
:func:`broker_targets` finds them for either shape, so the thread-hosted handles and the
HTTP control interface need not know which one they serve.
"""

from __future__ import annotations

from typing import Any

import attrs

from trikafka.testing.faults import Faults

__all__ = ["BrokerTarget", "broker_targets"]


@attrs.frozen
class BrokerTarget:
    node_id: int
    faults: Faults
    state: Any  # has the wait_for_* methods of trikafka.server.awaitable.AwaitableState
    node: Any  # the Broker or cluster node itself

    @property
    def rack(self) -> str | None:
        """The broker's rack (``broker.rack``), or None."""
        result: str | None = self.node.rack
        return result

    @property
    def bootstrap_servers(self) -> str:
        """The broker's ``host:port`` (read in the Trio thread: it follows restarts)."""
        result: str = self.node.bootstrap_servers
        return result


def _has_waits(obj: Any) -> bool:
    return callable(getattr(obj, "wait_for_high_watermark", None))


def _faults_of(node: Any) -> Faults:
    return Faults.of(node)


def broker_targets(obj: object) -> list[BrokerTarget]:
    """The brokers of a Broker, a ``trikafka.cluster`` cluster (``nodes``) or anything with a
    ``brokers`` list, in node id order."""
    if hasattr(obj, "nodes") and isinstance(obj.nodes, dict):
        shared = obj if _has_waits(obj) else None
        return [
            BrokerTarget(node_id, _faults_of(node), shared or node, node)
            for node_id, node in sorted(obj.nodes.items())
        ]
    if hasattr(obj, "brokers") and not hasattr(obj, "path"):
        return [target for broker in obj.brokers for target in broker_targets(broker)]
    broker: Any = obj  # a Broker (or a cluster node): read duck-typed, as above
    return [BrokerTarget(broker.config.node_id, _faults_of(broker), broker, broker)]


def target_by_id(obj: Any, node_id: int) -> BrokerTarget:
    for target in broker_targets(obj):
        if target.node_id == node_id:
            return target
    known = [t.node_id for t in broker_targets(obj)]
    raise LookupError(f"no broker {node_id}; brokers: {known}")


__all__ += ["target_by_id"]
