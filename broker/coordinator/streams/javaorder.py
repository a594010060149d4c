"""The iteration orders of Java's HashMap and PriorityQueue, so that the sticky task assignor
breaks ties exactly as Kafka's does.

Kafka's StickyTaskAssignor is deterministic but not order-free: which process gets a task when
two are equally loaded depends on the order a `HashMap<String, ...>` iterates its keys (by
bucket: `(h ^ h >>> 16) & (capacity - 1)` of `String.hashCode()`, then insertion order within
a bucket) and on the binary-heap layout of a `java.util.PriorityQueue`. Both are reproduced here
so that the same members and process ids get the same tasks on kaflet as on Kafka 4.4
(tests/unit/test_streams_assignor.py; tests/differential/streams/ compares live assignments).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from protocol.javahash import java_string_hashcode

K = TypeVar("K")
T = TypeVar("T")

_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64


def topic_partition_hash(topic: str, partition: int) -> int:
    """TopicPartition.hashCode()."""
    h = (31 * (31 + partition) + java_string_hashcode(topic)) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def table_size_for(cap: int) -> int:
    """HashMap.tableSizeFor: the power of two at or above `cap` (1 for 0)."""
    n = 1
    while n < cap:
        n <<= 1
    return n


def hashmap_order(keys: Iterable[str], initial_capacity: int | None = None, compute_if_absent: bool = False) -> list[str]:
    """The keys (distinct, in insertion order) in the order a `new HashMap<>()` (or
    `new HashMap<>(initial_capacity)`) filled with them in that order iterates them; with
    `compute_if_absent`, filled by `computeIfAbsent`, which resizes before an insertion rather than
    after it (and so may leave the table one size smaller) and puts a new key first in its bucket."""
    return hashmap_order_by(keys, java_string_hashcode, initial_capacity, compute_if_absent)


def hashmap_order_by(
    keys: Iterable[K], hash_code: Callable[[K], int], initial_capacity: int | None = None, compute_if_absent: bool = False
) -> list[K]:
    """`hashmap_order` for keys whose Java hashCode() is `hash_code(key)`."""
    ordered = list(dict.fromkeys(keys))
    hashes = [_spread(hash_code(k)) for k in ordered]
    capacity = 0  # no table until the first insertion
    threshold = table_size_for(initial_capacity) if initial_capacity is not None else 0
    bins: dict[int, int] = {}
    for size, h in enumerate(hashes):  # `size` keys are in before this one
        if capacity == 0 or (compute_if_absent and size > threshold):
            capacity, threshold = _resize(capacity, threshold)
            bins = _bins(hashes[:size], capacity)
        index = h & (capacity - 1)
        bins[index] = bins.get(index, 0) + 1
        # treeifyBin() on a small table resizes instead: put() calls it for a 9th node in a bin, computeIfAbsent() for an 8th
        if bins[index] >= _TREEIFY_THRESHOLD + (0 if compute_if_absent else 1) and capacity < _MIN_TREEIFY_CAPACITY:
            capacity, threshold = _resize(capacity, threshold)
            bins = _bins(hashes[: size + 1], capacity)
        if not compute_if_absent and size + 1 > threshold:
            capacity, threshold = _resize(capacity, threshold)
            bins = _bins(hashes[: size + 1], capacity)
    if capacity == 0:
        return ordered
    mask = capacity - 1
    # put() appends to a bucket's list, computeIfAbsent() puts the new node first; a resize keeps the order.
    sign = -1 if compute_if_absent else 1
    return [k for _i, k in sorted(enumerate(ordered), key=lambda e: (hashes[e[0]] & mask, sign * e[0]))]


def _bins(hashes: list[int], capacity: int) -> dict[int, int]:
    bins: dict[int, int] = {}
    for h in hashes:
        i = h & (capacity - 1)
        bins[i] = bins.get(i, 0) + 1
    return bins


def _resize(capacity: int, threshold: int) -> tuple[int, int]:
    """HashMap.resize(): (new capacity, new threshold)."""
    if capacity > 0:
        new_capacity = capacity << 1
        if capacity >= 16:
            return new_capacity, threshold << 1
        return new_capacity, int(new_capacity * 0.75)
    if threshold > 0:  # the initial capacity a constructor recorded
        return threshold, int(threshold * 0.75)
    return 16, 12


class JavaPriorityQueue(Generic[T]):
    """java.util.PriorityQueue: a binary heap with Java's siftUp / siftDown, so that equal
    elements come out in the order Java's queue gives them."""

    def __init__(self, compare: Callable[[T, T], int]) -> None:
        self._queue: list[T] = []
        self._compare = compare

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, x: T) -> None:
        queue = self._queue
        queue.append(x)
        k = len(queue) - 1
        while k > 0:
            parent = (k - 1) >> 1
            e = queue[parent]
            if self._compare(x, e) >= 0:
                break
            queue[k] = e
            k = parent
        queue[k] = x

    def poll(self) -> T | None:
        queue = self._queue
        if not queue:
            return None
        result = queue[0]
        x = queue.pop()
        n = len(queue)
        if n > 0:
            k = 0
            half = n >> 1
            while k < half:
                child = 2 * k + 1
                c = queue[child]
                right = child + 1
                if right < n and self._compare(c, queue[right]) > 0:
                    child = right
                    c = queue[child]
                if self._compare(x, c) <= 0:
                    break
                queue[k] = c
                k = child
            queue[k] = x
        return result


def compare_numbers(a: float, b: float) -> int:
    """Double.compare / Integer.compare for finite numbers."""
    return -1 if a < b else (1 if a > b else 0)
