"""Where a new partition's replicas go: Kafka's rack-aware assignment (KIP-36), pure.

When brokers have racks, Kafka spreads each partition's replicas over as many racks as it can.
The brokers are first laid out alternating by rack (rack ``a``'s first broker, rack ``b``'s
first, ..., then each rack's second, ...; racks and the brokers in each sorted). Partition
``p``'s first replica — its preferred leader — is entry ``p`` of that list (round-robin, so
leaders are spread over brokers and racks). Each further replica is found by walking the
list from the first one with a step that grows with the partition number (every full turn
over the brokers shifts it by one, so followers spread too), taking a broker only when its
rack holds no replica of this partition yet (unless every rack does) and it is not a replica
already. Kafka starts the walk at a random index and shift; trikafka starts at 0, as its
assignment without racks does, so placements are the same on every run.

A broker without a rack counts as one rack of its own (``None``), as KRaft's placer treats it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["rack_alternated", "rack_aware_replicas"]


def rack_alternated(brokers: Sequence[int], racks: Mapping[int, str | None]) -> list[int]:
    """The brokers laid out alternating by rack."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(brokers):
        by_rack.setdefault(racks.get(broker) or "", []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    return [column[row] for row in range(max(map(len, columns))) for column in columns if row < len(column)]


def rack_aware_replicas(
    brokers: Sequence[int], racks: Mapping[int, str | None], partition: int, replication_factor: int
) -> tuple[int, ...]:
    """Partition ``partition``'s replicas over ``brokers``, the first its preferred leader."""
    arranged = rack_alternated(brokers, racks)
    count = len(arranged)
    rack_count = len({racks.get(b) or "" for b in arranged})
    shift = partition // count  # one more on every full turn over the brokers
    first = partition % count
    replicas = [arranged[first]]
    used_racks = {racks.get(arranged[first]) or ""}
    step = 0
    while len(replicas) < replication_factor:
        offset = 1 + (shift * rack_count + step) % (count - 1)
        broker = arranged[(first + offset) % count]
        rack = racks.get(broker) or ""
        step += 1
        if (rack not in used_racks or len(used_racks) == rack_count) and broker not in replicas:
            replicas.append(broker)
            used_racks.add(rack)
    return tuple(replicas)
