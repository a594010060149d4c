"""Offset ranges and how they become Spark tasks (the connector's KafkaOffsetRangeCalculator).

Without `minPartitions`, one task per Kafka partition. `maxRecordsPerPartition` cuts any range
larger than that; then, with fewer pieces than `minPartitions`, each piece is cut in proportion to
its share of all records (at least one piece each, shares rounded half up as Scala's math.round),
so a big partition is read by several tasks at once. Empty ranges are dropped: they would be
empty tasks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One task's work: offsets [start, until) of one Kafka partition."""

    topic: str
    partition: int
    start: int
    until: int

    @property
    def size(self) -> int:
        return self.until - self.start


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    out: list[OffsetRange] = []
    remaining, start = r.size, r.start
    for part in range(parts):
        this = remaining // (parts - part)  # the last piece takes the rounding
        remaining -= this
        end = min(start + this, r.until)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return [p for p in out if p.size > 0]


def _part_count(size: int, total: int, min_parts: int) -> int:
    # Scala's math.round: half up (Python's round() would take 2.5 to 2).
    return max(math.floor(size / total * min_parts + 0.5), 1)


def plan(ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None = None) -> list[OffsetRange]:
    """The connector's KafkaOffsetRangeCalculator.getRanges: maxRecordsPerPartition cuts first; then,
    with fewer pieces than minPartitions, the pieces whose share rounds to more than one are split
    in proportion among what the unsplit ones leave."""
    nonempty = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(nonempty) >= min_partitions) and max_records is None:
        return nonempty
    if max_records is not None:
        nonempty = [p for r in nonempty for p in _cut(r, -(-r.size // max_records))]
    if min_partitions is None or min_partitions <= len(nonempty):
        return nonempty
    total = sum(r.size for r in nonempty)
    unsplit = [r for r in nonempty if _part_count(r.size, total, min_partitions) == 1]
    unsplit_tps = {(r.topic, r.partition) for r in unsplit}
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for r in nonempty:
        parts = 1 if (r.topic, r.partition) in unsplit_tps else _part_count(r.size, split_total, split_min)
        out.extend(_cut(r, parts))
    return out
