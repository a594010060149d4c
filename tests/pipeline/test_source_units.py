"""The source's pure parts: how offset ranges become tasks, and how a read limit is shared (no Spark, no broker)."""

from __future__ import annotations

import itertools

from pipeline.source.ranges import OffsetRange, plan
from pipeline.source.stream import StreamReader, from_json, to_json


def test_one_task_per_nonempty_partition_without_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 5, 5), OffsetRange("t", 2, 3, 4)]
    assert plan(ranges, None) == [OffsetRange("t", 0, 0, 10), OffsetRange("t", 2, 3, 4)]
    assert plan(ranges, 2) == [OffsetRange("t", 0, 0, 10), OffsetRange("t", 2, 3, 4)]  # already enough


def test_min_partitions_prorates_by_size_and_covers_every_offset_once() -> None:
    ranges = [OffsetRange("a", 0, 100, 190), OffsetRange("b", 0, 0, 10)]
    pieces = plan(ranges, 10)
    assert [p for p in pieces if p.topic == "b"] == [OffsetRange("b", 0, 0, 10)]  # a small one is never starved
    a = [p for p in pieces if p.topic == "a"]
    assert len(a) == 9 and a[0].start == 100 and a[-1].until == 190
    assert all(x.until == y.start for x, y in itertools.pairwise(a))  # contiguous, no overlap
    assert max(p.size for p in a) - min(p.size for p in a) <= 1


def test_max_records_per_partition_cuts_big_ranges() -> None:
    pieces = plan([OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 7)], None, 30)
    assert [(p.partition, p.start, p.until) for p in pieces] == [(0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100), (1, 0, 7)]


def test_max_offsets_per_trigger_is_shared_by_backlog_with_at_least_one_each() -> None:
    begin = {("t", 0): 0, ("t", 1): 0, ("t", 2): 50}
    until = {("t", 0): 1000, ("t", 1): 10, ("t", 2): 50, ("t", 3): 5}  # 3 is new since `begin`: from 0
    limited = StreamReader._rate_limit(begin, until, 100)
    # backlogs 1000, 10, 0, 5 of 1015: shares 98.5 -> 98, 0.98 -> 1 (ceil below one), 0.49 -> 1
    assert limited == {("t", 0): 98, ("t", 1): 1, ("t", 2): 50, ("t", 3): 1}
    assert StreamReader._rate_limit(begin, begin, 100) == begin  # nothing new: unchanged


def test_offsets_round_trip_through_the_connectors_json_shape() -> None:
    offsets = {("a", 0): 5, ("a", 10): 7, ("b", 1): 0}
    assert to_json(offsets) == {"a": {"0": 5, "10": 7}, "b": {"1": 0}}
    assert from_json(to_json(offsets)) == offsets


def test_min_partitions_rounds_half_up_as_the_connector() -> None:
    # 4 partitions of 1,000 and minPartitions 10: 2.5 pieces each round to 3 (Scala's math.round), 12 tasks.
    pieces = plan([OffsetRange("t", p, 0, 1000) for p in range(4)], 10)
    assert len(pieces) == 12
    assert sum(p.size for p in pieces) == 4000


def test_small_ranges_stay_whole_and_the_rest_share_what_they_leave() -> None:
    # Shares 9.6 and 0.4 of 10: the small range stays whole and the big one takes 9 (10 - 1 unsplit).
    pieces = plan([OffsetRange("a", 0, 0, 960), OffsetRange("b", 0, 0, 40)], 10)
    assert [p for p in pieces if p.topic == "b"] == [OffsetRange("b", 0, 0, 40)]
    assert len([p for p in pieces if p.topic == "a"]) == 9


def test_max_records_cuts_before_min_partitions_counts() -> None:
    # 100 records cut by 30 give 4 pieces; minPartitions 3 is already met.
    assert len(plan([OffsetRange("t", 0, 0, 100)], 3, 30)) == 4
    # minPartitions 8 over those 4 pieces: each piece of 25 is cut in 2.
    assert len(plan([OffsetRange("t", 0, 0, 100)], 8, 30)) == 8
