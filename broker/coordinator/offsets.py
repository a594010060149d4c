"""Committed offsets of one shard: group -> topic -> partition -> raw OffsetCommitValue bytes.

Values stay as the bytes of their record (about 30 bytes each) and are decoded when read;
that keeps both the replay of millions of commits and the memory per offset small.
"""

from __future__ import annotations

from collections.abc import Iterator

from storage.offsets_records import OffsetValue, parse_offset_commit_value

GroupOffsets = dict[str, dict[int, bytes]]


class OffsetStore:
    __slots__ = ("by_group", "count")

    def __init__(self) -> None:
        self.by_group: dict[str, GroupOffsets] = {}
        self.count = 0

    def put(self, group: str, topic: str, partition: int, value: bytes) -> None:
        topics = self.by_group.get(group)
        if topics is None:
            topics = self.by_group[group] = {}
        partitions = topics.get(topic)
        if partitions is None:
            partitions = topics[topic] = {}
        if partition not in partitions:
            self.count += 1
        partitions[partition] = value

    def put_many(self, group: str, applied: list[tuple[str, int, bytes]]) -> None:
        """put() of each (topic, partition, value) of one group's commit, in order (the commit hot path)."""
        topics = self.by_group.get(group)
        if topics is None:
            topics = self.by_group[group] = {}
        last: str | None = None
        partitions: dict[int, bytes] = {}
        added = 0
        for topic, partition, value in applied:
            if topic != last or last is None:
                partitions = topics.get(topic)  # type: ignore[assignment]
                if partitions is None:
                    partitions = topics[topic] = {}
                last = topic
            if partition not in partitions:
                added += 1
            partitions[partition] = value
        self.count += added

    def partitions_of(self, group: str, topic: str) -> dict[int, bytes]:
        """The (created if missing) partition -> value dict of a group's topic, for bulk loading;
        call recount() afterwards."""
        topics = self.by_group.get(group)
        if topics is None:
            topics = self.by_group[group] = {}
        partitions = topics.get(topic)
        if partitions is None:
            partitions = topics[topic] = {}
        return partitions

    def recount(self) -> None:
        """Recompute `count` (and drop empty dicts left by bulk loading)."""
        count = 0
        for group in list(self.by_group):
            topics = self.by_group[group]
            for topic in list(topics):
                if not topics[topic]:
                    del topics[topic]
                count += len(topics.get(topic, ()))
            if not topics:
                del self.by_group[group]
        self.count = count

    def remove(self, group: str, topic: str, partition: int) -> bool:
        topics = self.by_group.get(group)
        if topics is None:
            return False
        partitions = topics.get(topic)
        if partitions is None or partitions.pop(partition, None) is None:
            return False
        self.count -= 1
        if not partitions:
            del topics[topic]
            if not topics:
                del self.by_group[group]
        return True

    def get(self, group: str, topic: str, partition: int) -> OffsetValue | None:
        raw = self.by_group.get(group, {}).get(topic, {}).get(partition)
        return parse_offset_commit_value(raw) if raw is not None else None

    def has(self, group: str, topic: str, partition: int) -> bool:
        return partition in self.by_group.get(group, {}).get(topic, {})

    def of_group(self, group: str) -> GroupOffsets | None:
        return self.by_group.get(group)

    def iter_group(self, group: str) -> Iterator[tuple[str, int, OffsetValue]]:
        for topic, partitions in list(self.by_group.get(group, {}).items()):
            for partition, raw in list(partitions.items()):
                yield topic, partition, parse_offset_commit_value(raw)

    def count_of(self, group: str) -> int:
        return sum(len(p) for p in self.by_group.get(group, {}).values())
