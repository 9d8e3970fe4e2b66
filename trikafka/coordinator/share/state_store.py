"""Share state that outlives the broker: ``__share_group_state``, in a format of this project.

Kafka keeps share-partition state in ``__share_group_state`` (ShareSnapshot/ShareUpdate records
written by its share coordinator) and share-group metadata in ``__consumer_offsets``. trikafka
keeps both in one compacted internal topic, ``__share_group_state`` (one partition), as JSON:

* key ``["share-partition", group, topic, partition]`` → value
  ``{"start": SPSO, "end": end offset, "topic_id": id, "records": [[offset, state, delivery
  count], ...]}`` —
  the in-flight records as they are, except ACQUIRED, written as AVAILABLE (a restart ends
  every acquisition lock, as in Kafka); a null value (tombstone): the share partition is gone;
* key ``["share-group", group]`` → value ``{"configs": {...}}`` (a share group exists;
  membership is not kept: members join again), a tombstone when it is deleted;
* key ``["group-configs", group]`` → value ``{"configs": {...}}``: the GROUP config overrides
  of a group of any kind (consumer or share; configs in a ``share-group`` value, as an
  earlier trikafka wrote them, are read too), a tombstone when none are left.

Each change appends one record (unchanged values are not written again); the log cleaner keeps
the last value per key. Replayed once when the share coordinator starts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from trikafka.coordinator.ports import OffsetsPartitionLog
from trikafka.coordinator.share.partition import InFlight, RecordState, SharePartition
from trikafka.protocol.records import build_batch, iter_batches, iter_records

__all__ = ["SHARE_STATE_TOPIC", "ShareStateLog"]

SHARE_STATE_TOPIC = "__share_group_state"
_READ_CHUNK = 1 << 20

PartitionKey = tuple[str, str, int]


class ShareStateLog:
    def __init__(self, log: Callable[[], OffsetsPartitionLog], now_ms: Callable[[], float],
                 exists: Callable[[], bool]) -> None:
        self._log = log  # creates the topic on first use
        self._now_ms = now_ms
        self._exists = exists
        self._written: dict[bytes, bytes | None] = {}
        #: Records written to ``__share_group_state`` (Kafka's share-coordinator write-total).
        self.writes = 0

    def _append(self, key: list[Any], value: Any) -> None:
        raw_key = json.dumps(key).encode()
        raw = None if value is None else json.dumps(value, sort_keys=True).encode()
        if raw_key in self._written and self._written[raw_key] == raw:
            return
        self._written[raw_key] = raw
        now = int(self._now_ms())
        self._log().append(bytearray(build_batch([(raw_key, raw, [], now)])), leader_epoch=0, log_append_time_ms=now)
        self.writes += 1

    def write_partition(self, sp: SharePartition) -> None:
        key = ["share-partition", sp.group_id, sp.topic, sp.partition]
        if not sp.initialized:
            self._append(key, None)
            return
        records = [
            [offset, (RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state).value, r.delivery_count]
            for offset, r in sorted(sp.in_flight.items())
        ]
        self._append(key, {"start": sp.start_offset, "end": sp.end_offset, "topic_id": sp.topic_id, "records": records})

    def write_group(self, group_id: str, configs: Mapping[str, str] | None, exists: bool) -> None:
        self._append(["share-group", group_id], {"configs": dict(configs or {})} if exists else None)

    def write_configs(self, group_id: str, configs: Mapping[str, str] | None) -> None:
        """A group's config overrides, fsynced before IncrementalAlterConfigs is answered (as
        Kafka's metadata log keeps them): a crash right after the answer keeps them."""
        self._append(["group-configs", group_id], {"configs": dict(configs)} if configs else None)
        self._log().flush()

    def _replay(self) -> Iterator[tuple[list[Any], Any]]:
        if not self._exists():
            return
        log = self._log()
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, _READ_CHUNK).records
            if not data:
                break
            for header in iter_batches(data, validate_records=False):
                for record in iter_records(data, header):
                    if record.key:
                        yield json.loads(record.key), None if record.value is None else json.loads(record.value)
                offset = header.next_offset

    def load(self) -> tuple[dict[str, dict[str, str]], dict[PartitionKey, SharePartition], set[str]]:
        configs: dict[str, dict[str, str]] = {}
        groups: set[str] = set()
        partitions: dict[PartitionKey, SharePartition] = {}
        for key, value in self._replay():
            self._written[json.dumps(key).encode()] = (
                None if value is None else json.dumps(value, sort_keys=True).encode()
            )
            if key[0] == "group-configs":
                if value is None:
                    configs.pop(key[1], None)
                else:
                    configs[key[1]] = dict(value["configs"])
            elif key[0] == "share-group":
                group_id = key[1]
                if value is None:
                    groups.discard(group_id)
                    configs.pop(group_id, None)
                else:
                    groups.add(group_id)
                    if value.get("configs"):  # as an earlier trikafka wrote them
                        configs[group_id] = dict(value["configs"])
            elif key[0] == "share-partition":
                _, group_id, topic, partition = key
                if value is None:
                    partitions.pop((group_id, topic, partition), None)
                    continue
                sp = SharePartition(group_id, topic, partition, value["start"], value["end"], value.get("topic_id"))
                for offset, state, count in value["records"]:
                    sp.in_flight[offset] = InFlight(RecordState(state), count)
                partitions[(group_id, topic, partition)] = sp
                groups.add(group_id)
        return configs, partitions, groups
