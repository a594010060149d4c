"""The order of the answers to a describe naming several groups (ConsumerGroupDescribe,
StreamsGroupDescribe, ShareGroupDescribe, DescribeGroups): Kafka's GroupCoordinatorService files
the ids in a HashMap<TopicPartition, List<String>> by computeIfAbsent and answers in its order.
DeleteGroups too, each partition's groups in HashSet order after its failed share groups."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.coordinator.describe_order import CoordinatorOrder, coordinator_partition_order, delete_order, hashset_order
from protocol.javahash import partition_for


@pytest.mark.parametrize(
    ("put", "iterated"),
    [  # what a java.util.HashMap<TopicPartition, _> of __consumer_offsets partitions filled by computeIfAbsent iterates (JDK 17)
        ([10, 42], [42, 10]),  # one bucket: computeIfAbsent puts the newer key first
        ([4, 0, 3, 2, 1], [0, 3, 4, 1, 2]),
        ([34, 25, 30, 23, 47, 33, 45], [47, 45, 30, 25, 23, 33, 34]),
        (  # 24 keys: the map was resized twice
            [1, 30, 25, 38, 10, 23, 49, 4, 33, 16, 44, 17, 35, 46, 0, 37, 19, 15, 36, 22, 12, 47, 6, 13],
            [47, 15, 16, 13, 46, 12, 44, 10, 23, 22, 19, 17, 49, 0, 30, 25, 37, 6, 38, 35, 36, 4, 33, 1],
        ),
    ],
)
def test_kd_1_groups_follow_kafkas_hashmap_of_coordinator_partitions(put: list[int], iterated: list[int]) -> None:
    assert coordinator_partition_order("__consumer_offsets", put) == iterated


def _coordinator(active: bool = True) -> SimpleNamespace:
    return SimpleNamespace(active=active, topic_name="__consumer_offsets", partition_for=lambda g: partition_for(g, 5))


def test_kd_1_blank_ids_first_then_partition_by_partition_in_request_order_within_each() -> None:
    ids = [f"g{i}" for i in range(12)]
    order = CoordinatorOrder[str](_coordinator())
    for g in ids:
        order.routed(g, g)
    order.refused("")
    answers = order.answers()
    partitions = [partition_for(g, 5) for g in answers[1:]]
    assert answers[0] == ""
    assert list(dict.fromkeys(partitions)) == coordinator_partition_order("__consumer_offsets", [partition_for(g, 5) for g in ids])
    for p in set(partitions):  # within a partition, request order
        assert [g for g in answers[1:] if partition_for(g, 5) == p] == [g for g in ids if partition_for(g, 5) == p]
    assert answers[1:] != ids  # the example is one where the orders differ


def test_kd_1_inactive_coordinator_answers_in_request_order() -> None:
    order = CoordinatorOrder[str](_coordinator(active=False))
    for g in ("g3", "g1", "g2"):
        order.routed(g, g)
    assert order.answers() == ["g3", "g1", "g2"]


@pytest.mark.parametrize(
    ("added", "iterated"),
    [  # what `new HashSet<>(added)` iterates (JDK 17)
        (["g0", "g1", "g2"], ["g0", "g1", "g2"]),
        (["orders", "payments", "audit", "x.y"], ["x.y", "audit", "payments", "orders"]),
        (  # 13 keys: a table of 32 rather than 16
            [f"group-{i}" for i in range(13)],
            [
                "group-10",
                "group-12",
                "group-11",
                "group-7",
                "group-6",
                "group-9",
                "group-8",
                "group-3",
                "group-2",
                "group-5",
                "group-4",
                "group-1",
                "group-0",
            ],
        ),
    ],
)
def test_dl_1_hashset_order_is_javas(added: list[str], iterated: list[str]) -> None:
    assert hashset_order(added) == iterated


def test_dl_1_failed_share_groups_first_then_the_others_in_hashset_order() -> None:
    ids = ["orders", "payments", "audit", "x.y"]
    assert delete_order(ids, share_failed=set()) == ["x.y", "audit", "payments", "orders"]
    assert delete_order(ids, share_failed={"orders"}) == ["orders", "x.y", "audit", "payments"]
