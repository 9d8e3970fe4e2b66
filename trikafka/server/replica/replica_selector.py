"""KIP-392: which replica a consumer should fetch from (Kafka's ``ReplicaSelector``).

The leader decides. With ``replica.selector.class`` set to Kafka's
``RackAwareReplicaSelector``, a consumer Fetch (v11+) naming its ``rack_id`` (``client.rack``)
is answered with ``preferred_read_replica``: the most caught-up in-sync replica in the
consumer's rack — the leader itself when it stands in that rack, or when no replica does (then
nothing is sent: -1). A partition answered with a preferred replica carries no records; the
consumer fetches from that broker next, which serves a consumer Fetch as an in-sync follower.

In an in-process cluster every in-sync follower has the leader's log end (appends reach the
ISR before they return, see ``cluster/replication.py``), so "most caught-up" is a tie broken
by the lowest node id.
"""

from __future__ import annotations

from collections.abc import Callable

from trikafka.config.racks import RACK_AWARE_SELECTOR
from trikafka.server.replica.cluster_view import PartitionLeadership

__all__ = ["preferred_read_replica"]


def preferred_read_replica(
    selector: str | None, lead: PartitionLeadership, client_rack: str | None, rack_of: Callable[[int], str | None]
) -> int:
    """The replica the consumer should read from, -1 for the leader (what Fetch sends)."""
    if selector != RACK_AWARE_SELECTOR or not client_rack:
        return -1
    same_rack = [node for node in lead.isr if rack_of(node) == client_rack]
    if not same_rack or lead.leader in same_rack:
        return -1
    return min(same_rack)
