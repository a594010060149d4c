"""Offset ranges and how they become Spark tasks (the connector's KafkaOffsetRangeCalculator).

Without `minPartitions`, one task per Kafka partition. With it, and fewer non-empty partitions than
asked, each partition's range is cut into pieces in proportion to its share of all records (at
least one piece each), so a big partition is read by several tasks at once. `maxRecordsPerPartition`
then cuts any piece still larger than that. Empty ranges are dropped: they would be empty tasks.
"""

from __future__ import annotations

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


def plan(ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None = None) -> list[OffsetRange]:
    nonempty = [r for r in ranges if r.size > 0]
    if min_partitions is not None and len(nonempty) < min_partitions:
        total = sum(r.size for r in nonempty)
        split: list[OffsetRange] = []
        for r in nonempty:
            split.extend(_cut(r, max(round(r.size / total * min_partitions), 1)))
        nonempty = split
    if max_records is not None:
        capped: list[OffsetRange] = []
        for r in nonempty:
            capped.extend(_cut(r, -(-r.size // max_records)) if r.size > max_records else [r])
        nonempty = capped
    return nonempty
