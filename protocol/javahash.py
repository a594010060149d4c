"""Java's String.hashCode and Kafka's Utils.abs, for coordinator partitioning (CO-1..CO-3)."""

from __future__ import annotations

import struct


def java_string_hashcode(s: str) -> int:
    """`String.hashCode()` over UTF-16 code units, as a signed 32-bit int (CO-2)."""
    data = s.encode("utf-16-be")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """`Utils.abs`: 0 for Integer.MIN_VALUE, |n| otherwise (CO-3)."""
    return 0 if n == -0x80000000 else abs(n)


def partition_for(key: str, partitions: int) -> int:
    """The `__consumer_offsets` (or `__transaction_state`) partition owning `key` (CO-1)."""
    return kafka_abs(java_string_hashcode(key)) % partitions


def _int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - 0x100000000 if n & 0x80000000 else n


def topic_partition_hashcode(topic: str, partition: int) -> int:
    """`TopicPartition.hashCode()`: 31 * (31 + partition) + topic.hashCode(), as a signed int."""
    return _int32(31 * (31 + partition) + java_string_hashcode(topic))


def hashmap_order(hashes: list[int]) -> list[int]:
    """The order in which a `java.util.HashMap` (default capacity 16, load factor 0.75) whose keys
    have `hashes`, put in this order and all distinct, iterates them: the indexes of `hashes`.
    Buckets in ascending order, each in insertion order (resizes keep the relative order); a bucket
    turned into a tree (8 or more colliding keys) is not modelled."""
    capacity = 16
    while len(hashes) > capacity * 3 // 4:
        capacity *= 2

    def bucket(h: int) -> int:
        h &= 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(range(len(hashes)), key=lambda i: (bucket(hashes[i]), i))
