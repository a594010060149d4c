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
