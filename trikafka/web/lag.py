"""Consumer-group offsets and lag, named as kafka-lag-exporter names them.

kafka-lag-exporter (Lightbend, now seglo/kafka-lag-exporter) is what most Kafka dashboards
chart lag from; it asks the cluster for every group's committed offsets and each partition's
latest offset and serves ``kafka_consumergroup_group_{offset,lag,max_lag,sum_lag,
topic_sum_lag}`` with ``cluster_name``, ``group``, ``topic``, ``partition`` and the owning
member's ``member_host``, ``consumer_id`` and ``client_id``. Here the broker computes the
same from its group coordinator at scrape time. Lag is latest offset (the high watermark)
minus the committed offset, never below 0; lag in seconds is not served (it needs the
exporter's sampled offset→time table).

The owner of a partition comes from the members' assignments, in the consumer protocol's
``ConsumerProtocolAssignment`` encoding (version, [topic, [partition]], user data); a group
of another protocol type (Connect, a custom one) has no owners and empty member labels. A
KIP-848 consumer group keeps its offsets in the same holder but its members and assignment in
the ``consumer_group`` the coordinator looks up by id: its owners, state and member count come
from there, so ``group.protocol=consumer`` groups chart as classic ones do.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

__all__ = ["decode_assignment", "lag_families"]

GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
_MEMBER_LABELS = ["cluster_name", "group", "topic", "partition", "member_host", "consumer_id", "client_id"]


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """topic → partitions of a consumer-protocol assignment; {} if it is not one."""
    try:
        offset = 2  # version: v0..v3 all start with the topic array
        (count,) = struct.unpack_from(">i", data, offset)
        offset += 4
        topics: dict[str, list[int]] = {}
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", data, offset)
            offset += 2
            topic = data[offset : offset + length].decode()
            offset += length
            (n,) = struct.unpack_from(">i", data, offset)
            offset += 4
            topics[topic] = list(struct.unpack_from(f">{max(n, 0)}i", data, offset))
            offset += 4 * max(n, 0)
        return topics
    except (struct.error, UnicodeDecodeError):
        return {}


def _owners(group: Any, consumer: Any = None) -> dict[tuple[str, int], tuple[str, str, str]]:
    """(topic, partition) → (member_host, consumer_id, client_id) of the member it is assigned to."""
    owners: dict[tuple[str, int], tuple[str, str, str]] = {}
    if consumer is not None:  # KIP-848: the assignment is topic → partitions already
        for member in consumer.members.values():
            for topic, partitions in member.assigned.items():
                for partition in partitions:
                    owners[(topic, partition)] = (member.client_host, member.member_id, member.client_id)
        return owners
    if group.protocol_type != "consumer":
        return owners
    for member in group.members.values():
        for topic, partitions in decode_assignment(member.assignment).items():
            for partition in partitions:
                owners[(topic, partition)] = (member.client_host, member.member_id, member.client_id)
    return owners


def lag_families(
    groups: Iterable[Any], latest_offset: Callable[[str, int], int | None], cluster_name: str,
    consumer_groups: Mapping[str, Any] = MappingProxyType({}),
    share_groups: int = 0,
) -> Iterator[Metric]:
    """The kafka-lag-exporter families for ``groups`` (the coordinator's GroupMetadata, which
    holds every group's offsets) and ``consumer_groups`` (group id → KIP-848 group: its
    members, even before a commit gave it an offsets holder); ``share_groups`` (how many share
    groups the share coordinator holds) is only counted in ``group-count``."""
    offset = GaugeMetricFamily(
        "kafka_consumergroup_group_offset", "Last committed offset of a group's partition.", labels=_MEMBER_LABELS
    )
    lag = GaugeMetricFamily(
        "kafka_consumergroup_group_lag", "Latest offset minus the committed offset.", labels=_MEMBER_LABELS
    )
    max_lag = GaugeMetricFamily(
        "kafka_consumergroup_group_max_lag", "A group's largest partition lag.", labels=["cluster_name", "group"]
    )
    sum_lag = GaugeMetricFamily(
        "kafka_consumergroup_group_sum_lag", "A group's lag over all partitions.", labels=["cluster_name", "group"]
    )
    topic_sum_lag = GaugeMetricFamily(
        "kafka_consumergroup_group_topic_sum_lag", "A group's lag over one topic's partitions.",
        labels=["cluster_name", "group", "topic"],
    )
    members = GaugeMetricFamily(
        "kafka_consumergroup_members", "Members of a group now.", labels=["cluster_name", "group", "state"]
    )
    by_state: dict[str, int] = {}
    offsets_count = 0
    groups = sorted(groups, key=lambda g: g.group_id)
    for group in groups:
        consumer = consumer_groups.get(group.group_id)
        holder = group if consumer is None else consumer
        state = getattr(holder.state, "value", str(holder.state))
        by_state[state] = by_state.get(state, 0) + 1
        offsets_count += len(group.offsets)
        members.add_metric([cluster_name, group.group_id, state], len(holder.members))
        owners = _owners(group, consumer)
        per_topic: dict[str, int] = {}
        lags: list[int] = []
        for (topic, partition), committed in sorted(group.offsets.items()):
            latest = latest_offset(topic, partition)
            if latest is None:
                continue
            host, consumer, client = owners.get((topic, partition), ("", "", ""))
            labels = [cluster_name, group.group_id, topic, str(partition), host, consumer, client]
            value = max(latest - committed.offset, 0)
            offset.add_metric(labels, committed.offset)
            lag.add_metric(labels, value)
            lags.append(value)
            per_topic[topic] = per_topic.get(topic, 0) + value
        if lags:
            max_lag.add_metric([cluster_name, group.group_id], max(lags))
            sum_lag.add_metric([cluster_name, group.group_id], sum(lags))
            for topic, total in sorted(per_topic.items()):
                topic_sum_lag.add_metric([cluster_name, group.group_id, topic], total)
    listed = {group.group_id for group in groups}
    for group_id, consumer in sorted(consumer_groups.items()):
        if group_id not in listed:
            state = consumer.state.value
            by_state[state] = by_state.get(state, 0) + 1
            members.add_metric([cluster_name, group_id, state], len(consumer.members))
    yield from (offset, lag, max_lag, sum_lag, topic_sum_lag, members)
    # Groups per type, in Kafka's vocabulary (ListGroups' group_type, kafka-groups.sh's TYPE):
    # kafka.server:type=group-coordinator-metrics,name=group-count,protocol=classic|consumer|share.
    count = GaugeMetricFamily(
        "kafka_server_group_coordinator_metrics_group_count", "Groups per group type.", labels=["protocol"]
    )
    count.add_metric(["classic"], len(listed - set(consumer_groups)))
    count.add_metric(["consumer"], len(consumer_groups))
    count.add_metric(["share"], share_groups)
    yield count
    # The coordinator's own gauges (kafka.coordinator.group:type=GroupMetadataManager).
    stem = "kafka_coordinator_group_groupmetadatamanager_"
    yield GaugeMetricFamily(f"{stem}numgroups", "Groups on this coordinator.", value=sum(by_state.values()))
    for state in GROUP_STATES:
        yield GaugeMetricFamily(
            f"{stem}numgroups{state.lower()}", f"Groups in state {state}.", value=by_state.get(state, 0)
        )
    yield GaugeMetricFamily(f"{stem}numoffsets", "Committed offsets held.", value=offsets_count)
