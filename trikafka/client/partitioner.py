"""Which partition a record goes to — the Java client's rules, so keys land where other
clients put them (sans-IO).

* A record with a key: ``toPositive(murmur2(key)) % numPartitions``, Kafka's ``Utils.murmur2``
  (seed ``0x9747b28c``) over the key bytes. librdkafka does the same with
  ``partitioner=murmur2_random``; its own default (``consistent_random``, CRC32) does not.
* A record without a key: the *sticky* partition (KIP-480, with KIP-794's uniform switch): one
  partition is used until ``batch.size`` bytes went to it, then another one is chosen at
  random among the partitions that have a leader, so batches fill up instead of a record
  each going to a different partition.
"""

from __future__ import annotations

import random

__all__ = ["StickyPartitioner", "murmur2", "partition_for_key", "to_positive"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the signed 32-bit hash Java computes."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """The partition for key-less records, per topic; switches after ``batch_size`` bytes."""

    def __init__(self, batch_size: int, rng: random.Random | None = None) -> None:
        self.batch_size = max(batch_size, 1)
        self.rng = rng or random.Random()
        self._current: dict[str, tuple[int, int]] = {}  # topic → (partition, bytes so far)

    def partition(self, topic: str, available: list[int], num_partitions: int) -> int:
        current = self._current.get(topic)
        if current is not None and (current[0] in available or not available):
            return current[0]
        return self._switch(topic, available, num_partitions, None)

    def record_appended(self, topic: str, size: int, available: list[int], num_partitions: int) -> None:
        partition, produced = self._current.get(topic, (-1, 0))
        produced += size
        if produced >= self.batch_size:
            self._switch(topic, available, num_partitions, partition)
        else:
            self._current[topic] = (partition, produced)

    def _switch(self, topic: str, available: list[int], num_partitions: int, previous: int | None) -> int:
        choices = available or list(range(num_partitions))
        if len(choices) > 1 and previous in choices:
            choices = [p for p in choices if p != previous]
        partition = self.rng.choice(choices)
        self._current[topic] = (partition, 0)
        return partition
