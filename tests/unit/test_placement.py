"""Replica placement (broker/topics/placement.py) against Kafka's own expectations.

Kafka's StripedReplicaPlacerTest drives the placer with MockRandom (java.util.Random with a
fixed linear generator); `JavaMockRandom` is the same generator and Random.nextInt /
Collections.shuffle over it, so the exact placements Kafka's tests expect are expected here.
Messages are Kafka 4.4's (its placer names cordoned log directories too)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from broker.topics.placement import (
    Placement,
    PlacementError,
    StripedPlacer,
    UsableBroker,
    _BrokerList,
    check_manual_assignment,
    place,
)
from protocol.errors import ErrorCode

MASK64 = (1 << 64) - 1


class JavaMockRandom(random.Random):
    """org.apache.kafka.server.util.MockRandom: next(bits) of a 64-bit linear generator, with
    java.util.Random.nextInt(bound) on top (Python's shuffle walks the list as Java's does)."""

    def __init__(self, state: int = 17) -> None:
        self.state = state
        super().__init__(0)

    def seed(self, *args: object, **kwargs: object) -> None:  # random.Random.__init__ calls it
        pass

    def _next(self, bits: int) -> int:
        self.state = (self.state * 2862933555777941757 + 3037000493) & MASK64
        value = self.state >> (64 - bits)
        return value - (1 << 32) if value >= 1 << 31 else value

    def _randbelow(self, n: int) -> int:  # type: ignore[override]
        r = self._next(31)
        m = n - 1
        if n & m == 0:
            return (n * r) >> 31
        u = r
        while True:
            r = u % n
            if u - r + m < (1 << 31):
                return r
            u = self._next(31)


def broker(node: int, rack: str | None = None, fenced: bool = False) -> UsableBroker:
    return UsableBroker(node, rack, fenced)


def test_broker_list() -> None:
    brokers = _BrokerList()
    brokers.brokers = [0, 1, 2, 3]
    assert [brokers.next(0) for _ in range(6)] == [0, 1, 2, 3, -1, -1]
    assert [brokers.next(1) for _ in range(5)] == [1, 2, 3, 0, -1]
    assert _BrokerList().next(1) == -1


def test_avoid_fenced_replica_if_possible_on_single_rack() -> None:
    rack_list = StripedPlacer([broker(3), broker(1, fenced=True), broker(0), broker(4), broker(2)], JavaMockRandom())
    assert (rack_list.total, rack_list.unfenced, rack_list.rack_names) == (5, 4, [None])
    for bad in (0, -1):
        with pytest.raises(PlacementError):
            rack_list.place(bad)
    assert [rack_list.place(4) for _ in range(5)] == [[3, 4, 0, 2], [4, 0, 2, 3], [0, 2, 3, 4], [2, 3, 4, 0], [0, 4, 3, 2]]


def test_multi_partition_topic_on_a_single_unfenced_broker() -> None:
    assert place([broker(0), broker(1, fenced=True)], 3, 1, JavaMockRandom()) == [[0], [0], [0]]


def test_placement_on_fenced_replica_on_single_rack() -> None:
    rack_list = StripedPlacer([broker(3), broker(1, fenced=True), broker(2)], JavaMockRandom())
    assert [rack_list.place(3) for _ in range(4)] == [[3, 2, 1], [2, 3, 1], [3, 2, 1], [2, 3, 1]]


def test_rack_list_with_multiple_racks() -> None:
    brokers = [broker(11, "1"), broker(10, "1"), broker(30, "3"), broker(31, "3"), broker(21, "2"), broker(20, "2", fenced=True)]
    rack_list = StripedPlacer(brokers, JavaMockRandom())
    assert (rack_list.total, rack_list.unfenced, rack_list.rack_names) == (6, 5, ["1", "2", "3"])
    assert [rack_list.place(4) for _ in range(3)] == [[11, 21, 31, 10], [21, 30, 10, 20], [31, 11, 21, 30]]


def test_rack_list_with_invalid_racks() -> None:
    brokers = [
        broker(11, "1"),
        broker(10, "1"),
        broker(30, "3", fenced=True),
        broker(31, "3", fenced=True),
        broker(20, "2", fenced=True),
        broker(21, "2", fenced=True),
        broker(41, "4"),
        broker(40, "4", fenced=True),
    ]
    rack_list = StripedPlacer(brokers, JavaMockRandom())
    assert (rack_list.total, rack_list.unfenced, rack_list.rack_names) == (8, 3, ["1", "2", "3", "4"])
    assert [rack_list.place(4) for _ in range(3)] == [[41, 11, 21, 30], [10, 20, 31, 41], [41, 21, 30, 11]]


def test_successful_placement() -> None:
    placed = place([broker(0), broker(3), broker(2), broker(1)], 5, 3, JavaMockRandom())
    assert placed == [[2, 3, 0], [3, 0, 1], [0, 1, 2], [1, 2, 3], [1, 0, 2]]


def test_even_distribution() -> None:
    placed = place([broker(0), broker(1), broker(2), broker(3)], 200, 2, JavaMockRandom())
    counts = Counter(tuple(r) for r in placed)
    assert counts == {
        (0, 1): 14,
        (0, 2): 22,
        (0, 3): 14,
        (1, 0): 17,
        (1, 2): 17,
        (1, 3): 16,
        (2, 0): 13,
        (2, 1): 17,
        (2, 3): 20,
        (3, 0): 20,
        (3, 1): 19,
        (3, 2): 11,
    }


def test_brokers_without_a_rack_sort_first() -> None:
    rack_list = StripedPlacer([broker(1, "b"), broker(2), broker(3, "a")], JavaMockRandom())
    assert rack_list.rack_names == [None, "a", "b"]


@pytest.mark.parametrize(
    ("brokers", "rf", "message"),
    [
        (
            [broker(11, "1", fenced=True), broker(10, "1", fenced=True)],
            1,
            "Unable to replicate the partition 1 time(s): All brokers are currently fenced, or have all their log directories cordoned.",
        ),
        (
            [broker(11, "1"), broker(10, "1")],
            3,
            "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached because only 2 "
            "broker(s) are registered or some brokers have all their log directories cordoned.",
        ),
        (
            [broker(11, "1"), broker(10, "1")],
            0,
            "Unable to replicate the partition 0 time(s): Invalid replication factor 0: the replication factor must be positive.",
        ),
    ],
)
def test_refusals(brokers: list[UsableBroker], rf: int, message: str) -> None:
    with pytest.raises(PlacementError) as refused:
        place(brokers, 1, rf, JavaMockRandom())
    assert (refused.value.code, refused.value.message) == (ErrorCode.INVALID_REPLICATION_FACTOR, message)


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_properties(seed: int) -> None:
    """Whatever the random draws: distinct replicas on as many racks as there are, every unfenced
    broker leading some, a fenced broker none."""
    brokers = [broker(1, "r1"), broker(2, "r1"), broker(3, "r2"), broker(4, "r2"), broker(5, "r3"), broker(6, "r3", fenced=True)]
    racks = {b.id: b.rack for b in brokers}
    placed = place(brokers, 30, 3, random.Random(seed))
    leaders = Counter(r[0] for r in placed)
    assert 6 not in leaders and set(leaders) == {1, 2, 3, 4, 5}
    for replicas in placed:
        assert len(set(replicas)) == 3 and len({racks[r] for r in replicas}) == 3


def test_without_racks_every_broker_leads_its_share() -> None:
    placed = place([broker(1), broker(2), broker(3)], 30, 3, random.Random(7))
    assert Counter(r[0] for r in placed) == {1: 10, 2: 10, 3: 10}
    assert all(sorted(r) == [1, 2, 3] for r in placed)


@pytest.mark.parametrize(
    ("ids", "expected", "message"),
    [
        ([], None, "The manual partition assignment includes an empty replica list."),
        ([1, 9], None, "The manual partition assignment includes broker 9, but no such broker is registered."),
        ([3, 2, 3], None, "The manual partition assignment includes the broker 3 more than once."),
        (
            [1, 2],
            3,
            "The manual partition assignment includes a partition with 2 replica(s), but this is not consistent with previous "
            "partitions, which have 3 replica(s).",
        ),
    ],
)
def test_manual_assignment_refusals(ids: list[int], expected: int | None, message: str) -> None:
    with pytest.raises(PlacementError) as refused:
        check_manual_assignment(ids, expected, [1, 2, 3])
    assert (refused.value.code, refused.value.message) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)


def test_manual_assignment_checks_unknown_brokers_in_id_order() -> None:
    """Kafka sorts the ids first: the lowest unknown one is named, before a later duplicate."""
    with pytest.raises(PlacementError) as refused:
        check_manual_assignment([3, 3, 0], None, [1, 2, 3])
    assert refused.value.message == "The manual partition assignment includes broker 0, but no such broker is registered."


def test_a_new_partition_needs_an_active_replica() -> None:
    placement = Placement(lambda: [broker(1), broker(2, fenced=True)])
    assert placement.assignment_isr([2, 1], 0, manual=True) == [1]
    with pytest.raises(PlacementError) as refused:
        placement.assignment_isr([2], 4, manual=True)
    assert refused.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert (
        refused.value.message
        == "All brokers specified in the manual partition assignment for partition 4 are fenced or in controlled shutdown."
    )
    assert placement.internal_replication_factor == 2
