"""The order of the answers to a request naming several groups (ConsumerGroupDescribe,
StreamsGroupDescribe, ShareGroupDescribe, DescribeGroups, DeleteGroups).

Kafka's GroupCoordinatorService files the group ids by their `__consumer_offsets` partition in a
`new HashMap<TopicPartition, List<String>>()` filled with `computeIfAbsent` (request order within
a partition), then answers partition by partition in the order that map iterates, after the
blank ids it refused up front. A client that zips the answers with its request sees this order.

DeleteGroups goes partition by partition the same way, but within a partition it answers first the
share groups it could not delete (from a `HashMap<String, Errors>`), then the others in the order of
a `new HashSet<>(groupList)` (GroupCoordinatorService.deleteGroups).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Generic, TypeVar

from broker.coordinator.streams.javaorder import hashmap_order, hashmap_order_by, topic_partition_hash

T = TypeVar("T")


def coordinator_partition_order(topic: str, partitions: Iterable[int]) -> list[int]:
    """The distinct `partitions` (in the order they were first met) in the order Kafka's
    `HashMap<TopicPartition, _>` of them iterates."""
    return hashmap_order_by(partitions, lambda p: topic_partition_hash(topic, p), compute_if_absent=True)


def hashset_order(keys: Iterable[str]) -> list[str]:
    """The distinct `keys` in the order a `new HashSet<>(keys)` iterates them (JDK 17: a table of
    `max((int) (n / .75f) + 1, 16)`, filled by put)."""
    distinct = list(dict.fromkeys(keys))
    return hashmap_order(distinct, initial_capacity=max(int(len(distinct) / 0.75) + 1, 16))


def delete_order(group_ids: list[str], share_failed: Collection[str]) -> list[str]:
    """One coordinator partition's DeleteGroups answers: the share groups in `share_failed` (those
    whose share state could not be deleted, a non-empty one say) as a `new HashMap<>()` of them
    iterates, then the others as a HashSet of all `group_ids` iterates."""
    failed = [g for g in group_ids if g in share_failed]
    return hashmap_order(failed) + [g for g in hashset_order(group_ids) if g not in share_failed]


class CoordinatorOrder(Generic[T]):
    """Collects one answer per requested group and gives them back in Kafka's order: those refused
    before routing (blank ids) first, then partition by partition (`coordinator_partition_order`).
    A coordinator that is not active answers everything at once, in request order, as Kafka's."""

    def __init__(self, coordinator: Any) -> None:
        self._coordinator = coordinator
        self._entries: list[tuple[int | None, T]] = []

    def refused(self, answer: T) -> None:
        self._entries.append((None, answer))

    def routed(self, group_id: str, answer: T) -> None:
        self._entries.append((self._coordinator.partition_for(group_id), answer))

    def answers(self) -> list[T]:
        if not self._coordinator.active:
            return [a for _p, a in self._entries]
        by_partition: dict[int, list[T]] = {}
        for p, a in self._entries:
            if p is not None:
                by_partition.setdefault(p, []).append(a)
        order = coordinator_partition_order(self._coordinator.topic_name, by_partition)
        return [a for p, a in self._entries if p is None] + [a for p in order for a in by_partition[p]]
