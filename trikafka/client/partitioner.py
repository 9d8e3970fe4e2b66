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
import struct
from collections.abc import Callable

from trikafka.protocol.native import native_extension

__all__ = ["StickyPartitioner", "murmur2", "partition_for_key", "to_positive"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
# The key's whole 4-byte words, little-endian, in one C call (per-byte indexing was most of
# murmur2's time): a ready Struct for keys up to 256 bytes, struct's own cache beyond.
_WORDS = [struct.Struct(f"<{n}I").unpack_from for n in range(65)]


def _py_murmur2_unsigned(data: bytes) -> int:
    """The reference (and the fallback without the native extension, whose ``murmur2``
    answers the same ~20 times faster: a keyed send's largest cost here)."""
    length = len(data)
    h = 0x9747B28C ^ length
    words = length >> 2
    for k in _WORDS[words](data) if words <= 64 else struct.unpack_from(f"<{words}I", data):
        k = (k * _M) & _MASK
        k = ((k ^ (k >> 24)) * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        whole = length - tail
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h = ((h ^ data[whole]) * _M) & _MASK
    h = ((h ^ (h >> 13)) * _M) & _MASK
    return h ^ (h >> 15)


_murmur2_unsigned: Callable[[bytes], int] = getattr(native_extension(), "murmur2", None) or _py_murmur2_unsigned


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the signed 32-bit hash Java computes."""
    h = _murmur2_unsigned(data)
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """``toPositive(murmur2(key)) % numPartitions`` (the sign bit dropped, as Java's
    ``toPositive`` does to the signed hash)."""
    return (_murmur2_unsigned(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """The partition for key-less records, per topic; switches after ``batch_size`` bytes."""

    def __init__(self, batch_size: int, rng: random.Random | None = None) -> None:
        self.batch_size = max(batch_size, 1)
        self.rng = rng or random.Random()
        self._current: dict[str, list[int]] = {}  # topic → [partition, bytes so far]

    def partition(self, topic: str, size: int, available: list[int], num_partitions: int) -> int:
        """The partition for a ``size``-byte record (counted towards the switch): the sticky
        one while it has a leader (or none has), else a new one; after ``batch_size`` bytes
        the *next* record gets a new one."""
        current = self._current.get(topic)
        if current is None or not (current[0] in available or not available):
            current = self._current[topic] = [self._choose(available, num_partitions, None), 0]
        partition = current[0]
        current[1] += size
        if current[1] >= self.batch_size:
            current[0], current[1] = self._choose(available, num_partitions, partition), 0
        return partition

    def _choose(self, available: list[int], num_partitions: int, previous: int | None) -> int:
        choices = available or list(range(num_partitions))
        if len(choices) > 1 and previous in choices:
            choices = [p for p in choices if p != previous]
        return self.rng.choice(choices)
