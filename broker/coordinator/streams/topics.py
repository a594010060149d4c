"""A streams group's topology checked against the topics that exist (Kafka 4.4's
InternalTopicManager, RepartitionTopics, CopartitionedTopicsEnforcer, ChangelogTopics).

`configure_topics` decides every internal topic's partition count: repartition topics from the
sub-topologies that write them (or their fixed count), co-partitioned topics equal, changelogs
as the largest input of their sub-topology. The outcome is a ConfiguredTopology: ready (every
task count known, every internal topic there with the right partition count), or not ready with
the status the members are told: MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS, or
MISSING_INTERNAL_TOPICS together with the topics to create. A topology that cannot work at all
(a repartition topic nobody writes, a loop, a sub-topology without sources) raises
StreamsInvalidTopology: the heartbeat fails with STREAMS_INVALID_TOPOLOGY. Messages are Kafka's,
and where Kafka's wording depends on a HashMap's order, so does this one (javaorder.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

import structlog

from broker.coordinator.streams.javaorder import hashmap_order
from broker.coordinator.streams.topology import StreamsTopology
from storage import streams_records as srec

log = structlog.get_logger("kaflet.coordinator")


class Status(IntEnum):
    """StreamsGroupHeartbeatResponse.Status."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    MISSING_CLIENT_TAGS = 6


class TopicConfigurationError(Exception):
    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class StreamsInvalidTopology(Exception):
    """STREAMS_INVALID_TOPOLOGY, with this message."""


class InternalStateError(Exception):
    """What Kafka hits as an IllegalStateException or IllegalArgumentException: the heartbeat
    answers UNKNOWN_SERVER_ERROR without a message, and the broker logs it."""


@dataclass(frozen=True)
class InternalTopic:
    """Kafka's ConfiguredInternalTopic."""

    name: str
    partitions: int
    replication_factor: int | None
    configs: dict[str, str]


@dataclass(frozen=True)
class ConfiguredSubtopology:
    number_of_tasks: int
    source_topics: frozenset[str]
    repartition_source_topics: dict[str, InternalTopic]
    repartition_sink_topics: frozenset[str]
    state_changelog_topics: dict[str, InternalTopic]


@dataclass
class ConfiguredTopology:
    topology_epoch: int
    metadata_hash: int
    subtopologies: dict[str, ConfiguredSubtopology] | None  # sorted by id; None when it could not be configured
    to_create: dict[str, InternalTopic] = field(default_factory=dict)
    error: TopicConfigurationError | None = None

    @property
    def is_ready(self) -> bool:
        return self.error is None


PartitionCount = Callable[[str], int | None]  # a topic's partition count, None if it does not exist


def summarize(topics: list[str]) -> str:
    """InternalTopicManager.summarizeTopics."""
    if not topics:
        return "<none>"
    shown = ", ".join(topics[:3])
    return shown + (f" and {len(topics) - 3} additional topics" if len(topics) > 3 else "")


def configure_topics(
    group_id: str, member_id: str, metadata_hash: int, topology: StreamsTopology, partitions_of: PartitionCount
) -> ConfiguredTopology:
    subtopologies = list(topology.subtopologies.values())
    # Resolved before anything else, as Kafka does (a bad index fails the heartbeat whatever else is wrong).
    copartition_groups = {sid: _copartition_groups(topology.subtopologies[sid]) for sid in hashmap_order(topology.subtopologies)}
    try:
        _throw_on_missing_sources(subtopologies, partitions_of)
        decided = _decide_partition_counts(copartition_groups, subtopologies, partitions_of)
        configured = {
            s.subtopology_id: _configure(s, partitions_of, decided) for s in sorted(subtopologies, key=lambda s: s.subtopology_id)
        }
        to_create = _missing_internal_topics(configured, topology, partitions_of)
        error = None
        if to_create:
            names = hashmap_order(to_create)
            error = TopicConfigurationError(Status.MISSING_INTERNAL_TOPICS, "Internal topics are missing: " + summarize(names))
            log.info(
                "internal topics are missing",
                group=group_id,
                member=member_id,
                topology_epoch=topology.epoch,
                topics=summarize(names),
            )
        else:
            log.info("topology configured", group=group_id, member=member_id, topology_epoch=topology.epoch)
        return ConfiguredTopology(topology.epoch, metadata_hash, configured, to_create, error)
    except TopicConfigurationError as exc:
        log.warning("topic configuration failed", group=group_id, member=member_id, topology_epoch=topology.epoch, error=exc.message)
        return ConfiguredTopology(topology.epoch, metadata_hash, None, {}, exc)


def _throw_on_missing_sources(subtopologies: list[srec.Subtopology], partitions_of: PartitionCount) -> None:
    missing = sorted({t for s in subtopologies for t in s.source_topics if partitions_of(t) is None})
    if missing:
        raise TopicConfigurationError(Status.MISSING_SOURCE_TOPICS, f"Source topics {summarize(missing)} are missing.")


def _decide_partition_counts(
    copartition_groups: dict[str, list[list[str]]], subtopologies: list[srec.Subtopology], partitions_of: PartitionCount
) -> dict[str, int]:
    decided: dict[str, int] = {}

    def count(topic: str) -> int | None:
        n = partitions_of(topic)
        return n if n is not None else decided.get(topic)

    decided.update(_repartition_counts(subtopologies, count))
    # Copartitioning, sub-topology by sub-topology (a HashMap by id in Kafka).
    fixed = [t.name for s in subtopologies for t in s.repartition_source_topics if t.partitions != 0]
    flexible = {t.name for s in subtopologies for t in s.repartition_source_topics if t.partitions == 0}
    fixed_order = hashmap_order(fixed)
    for groups in copartition_groups.values():
        for group in groups:
            decided.update(_enforce_copartitioning(group, fixed_order, flexible, count))
    decided.update(_changelog_counts(subtopologies, count))
    return decided


def _copartition_groups(s: srec.Subtopology) -> list[list[str]]:
    """The sub-topology's copartition groups as topic names (indexes resolved)."""
    out = []
    for g in s.copartition_groups:
        names = []
        for indexes, topics in (
            (g.source_topics, s.source_topics),
            (g.repartition_source_topics, [t.name for t in s.repartition_source_topics]),
        ):
            for i in indexes:
                if not 0 <= i < len(topics):
                    raise InternalStateError(f"Index {i} out of bounds for length {len(topics)}")
                names.append(topics[i])
        out.append(list(dict.fromkeys(names)))
    return out


def _repartition_counts(subtopologies: list[srec.Subtopology], count: Callable[[str], int | None]) -> dict[str, int]:
    """RepartitionTopics.setup."""
    repartition_names = {t.name for s in subtopologies for t in s.repartition_source_topics}
    missing = {t for s in subtopologies for t in s.source_topics if t not in repartition_names and count(t) is None}
    if missing:
        raise InternalStateError("Missing source topics: " + ", ".join(sorted(missing)))
    counts: dict[str, int] = {}
    for s in subtopologies:
        for t in s.repartition_source_topics:
            if t.partitions != 0:
                counts[t.name] = t.partitions
    while True:
        needed = False
        progress = False
        for s in subtopologies:
            for sink in s.repartition_sink_topics:
                if sink in counts:
                    continue
                n = _partition_count(counts, s, count)
                if n is None:
                    needed = True
                    continue
                counts[sink] = n
                progress = True
        if not needed:
            break
        if not progress:
            raise StreamsInvalidTopology(
                "Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved."
            )
    for s in subtopologies:
        if any(t.name not in counts for t in s.repartition_source_topics):
            raise StreamsInvalidTopology(
                "Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic."
            )
    return counts


def _partition_count(counts: dict[str, int], s: srec.Subtopology, count: Callable[[str], int | None]) -> int | None:
    best: int | None = None
    for t in s.repartition_source_topics:
        n = counts.get(t.name)
        if n is not None and (best is None or n > best):
            best = n
    for topic in s.source_topics:
        n = count(topic)
        if n is not None and (best is None or n > best):
            best = n
    return best


def _enforce_copartitioning(topics: list[str], fixed: list[str], flexible: set[str], count: Callable[[str], int | None]) -> dict[str, int]:
    """CopartitionedTopicsEnforcer.enforce."""
    if not topics:
        return {}
    fixed_set = set(fixed)

    def partitions(topic: str) -> int:
        n = count(topic)
        if n is None:
            raise InternalStateError(f"Number of partitions is not set for topic: {topic}")
        return n

    members = hashmap_order(topics)
    repartition = {t: partitions(t) for t in members if t in fixed_set or t in flexible}
    others = {t: partitions(t) for t in members if t not in repartition}
    if set(topics) == set(repartition):
        if fixed:
            first = partitions(fixed[0])
            for t in fixed:
                if partitions(t) != first:
                    raise TopicConfigurationError(
                        Status.INCORRECTLY_PARTITIONED_TOPICS,
                        f"Following topics do not have the same number of partitions: [{_tree_map(repartition)}]",
                    )
            target = first
        else:
            target = max(repartition.values(), default=0)
            if target == 0:
                raise StreamsInvalidTopology(
                    f"All topics in the copartition group had undefined partition number: [{', '.join(repartition)}]"
                )
    else:
        target = next(iter(others.values()))
        if any(n != target for n in others.values()):
            raise TopicConfigurationError(
                Status.INCORRECTLY_PARTITIONED_TOPICS, f"Following topics do not have the same number of partitions: [{_tree_map(others)}]"
            )
    out = {}
    for t, n in repartition.items():
        out[t] = target
        if t in fixed_set and n != target:
            raise TopicConfigurationError(
                Status.INCORRECTLY_PARTITIONED_TOPICS,
                f"Number of partitions [{n}] of repartition topic [{t}] doesn't match number of partitions [{target}] of the source topic.",
            )
    return out


def _tree_map(counts: dict[str, int]) -> str:
    """Java's TreeMap.toString without its braces: {a=1, b=2}."""
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) + "}"


def _changelog_counts(subtopologies: list[srec.Subtopology], count: Callable[[str], int | None]) -> dict[str, int]:
    """ChangelogTopics.setup."""
    out: dict[str, int] = {}
    for s in subtopologies:
        inputs = list(s.source_topics) + [t.name for t in s.repartition_source_topics]
        counts = []
        for topic in inputs:
            n = count(topic)
            if n is None:
                raise InternalStateError(f"No partition count for source topic {topic}")
            counts.append(n)
        if not counts:
            raise StreamsInvalidTopology(f"No source topics found for subtopology {s.subtopology_id}")
        for t in s.state_changelog_topics:
            out[t.name] = max(counts)
    return out


def _configure(s: srec.Subtopology, partitions_of: PartitionCount, decided: dict[str, int]) -> ConfiguredSubtopology:
    def count(topic: str) -> int:
        n = partitions_of(topic)
        if n is None:
            n = decided.get(topic)
        if n is None:
            raise InternalStateError(f"Number of partitions must be set for topic {topic}")
        return n

    inputs = list(s.source_topics) + [t.name for t in s.repartition_source_topics]
    if not inputs:
        raise InternalStateError("Subtopology does not contain any source topics")
    tasks = max(count(t) for t in inputs)
    if tasks <= 0:
        raise InternalStateError("Number of tasks must be positive")
    return ConfiguredSubtopology(
        tasks,
        frozenset(s.source_topics),
        {t.name: _internal_topic(t, decided) for t in s.repartition_source_topics},
        frozenset(s.repartition_sink_topics),
        {t.name: _internal_topic(t, decided) for t in s.state_changelog_topics},
    )


def _internal_topic(t: srec.TopicInfo, decided: dict[str, int]) -> InternalTopic:
    if t.partitions == 0 and t.name not in decided:
        raise InternalStateError(f"Number of partitions must be set for topic {t.name}")
    partitions = decided[t.name] if t.partitions == 0 else t.partitions
    if partitions < 1:
        raise InternalStateError("Number of partitions must be at least 1.")
    configs: dict[str, str] = {}
    for k, v in t.topic_configs:
        if k in configs:
            raise InternalStateError(f"Duplicate key {k}")
        configs[k] = v
    return InternalTopic(t.name, partitions, t.replication_factor or None, configs)


def _missing_internal_topics(
    configured: dict[str, ConfiguredSubtopology], topology: StreamsTopology, partitions_of: PartitionCount
) -> dict[str, InternalTopic]:
    to_create: dict[str, InternalTopic] = {}
    for s in configured.values():
        to_create.update(s.repartition_source_topics)
        to_create.update(s.state_changelog_topics)
    required = []
    for sid in hashmap_order(topology.subtopologies):
        s = topology.subtopologies[sid]
        required += list(s.source_topics) + [t.name for t in s.repartition_source_topics] + [t.name for t in s.state_changelog_topics]
    for topic in hashmap_order(required):
        n = partitions_of(topic)
        if n is None:
            continue
        expected = to_create.pop(topic, None)
        if expected is not None and n != expected.partitions:
            raise TopicConfigurationError(
                Status.INCORRECTLY_PARTITIONED_TOPICS,
                f"Existing topic {topic} has different number of partitions: expected {expected.partitions}, found {n}",
            )
    return to_create


def describe_configured(configured: ConfiguredSubtopology) -> dict[str, object]:
    """ConfiguredSubtopology.asStreamsGroupDescribeSubtopology (lists sorted; configs in HashMap order)."""

    def info(t: InternalTopic) -> tuple[str, int, int, list[tuple[str, str]]]:
        return t.name, t.partitions, t.replication_factor or 0, [(k, t.configs[k]) for k in hashmap_order(t.configs)]

    return {
        "source_topics": sorted(configured.source_topics),
        "repartition_sink_topics": sorted(configured.repartition_sink_topics),
        "state_changelog_topics": sorted((info(t) for t in configured.state_changelog_topics.values()), key=lambda i: i[0]),
        "repartition_source_topics": sorted((info(t) for t in configured.repartition_source_topics.values()), key=lambda i: i[0]),
    }
