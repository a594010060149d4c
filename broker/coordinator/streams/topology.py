"""A streams group's topology (Kafka's StreamsTopology): the sub-topologies its members sent when
they joined, kept as the StreamsGroupTopologyValue record holds them, the source topic -> sub-
topology map, and the topics the group needs (sources, repartition sources, changelogs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from storage import streams_records as srec


@dataclass(frozen=True)
class StreamsTopology:
    epoch: int
    subtopologies: dict[str, srec.Subtopology]
    source_topic_map: dict[str, srec.Subtopology] = field(compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        if not self.source_topic_map:
            mapping: dict[str, srec.Subtopology] = {}
            for s in self.subtopologies.values():
                for topic in s.source_topics:
                    mapping[topic] = s
                for info in s.repartition_source_topics:
                    mapping[info.name] = s
            object.__setattr__(self, "source_topic_map", mapping)

    def required_topics(self) -> set[str]:
        out: set[str] = set()
        for s in self.subtopologies.values():
            out.update(s.source_topics)
            out.update(t.name for t in s.repartition_source_topics)
            out.update(t.name for t in s.state_changelog_topics)
        return out

    @classmethod
    def from_record(cls, value: srec.TopologyValue) -> StreamsTopology:
        return cls(value.epoch, {s.subtopology_id: s for s in value.subtopologies})

    def record(self, order: list[str] | None = None) -> srec.TopologyValue:
        ids = order if order is not None else list(self.subtopologies)
        return srec.TopologyValue(self.epoch, tuple(self.subtopologies[i] for i in ids))


def record_from_request(topology: Any) -> srec.TopologyValue:
    """StreamsCoordinatorRecordHelpers.convertToStreamsGroupTopologyRecord: the request's topology
    as the record stores it, lists in the order the member sent them."""

    def info(t: Any) -> srec.TopicInfo:
        configs = tuple((c.key, c.value) for c in t.topic_configs or ())
        return srec.TopicInfo(t.name, t.partitions, t.replication_factor, configs)

    subtopologies = []
    for s in topology.subtopologies:
        subtopologies.append(
            srec.Subtopology(
                s.subtopology_id,
                tuple(s.source_topics),
                tuple(s.source_topic_regex),
                tuple(info(t) for t in s.state_changelog_topics),
                tuple(s.repartition_sink_topics),
                tuple(info(t) for t in s.repartition_source_topics),
                tuple(
                    srec.CopartitionGroup(tuple(g.source_topics), tuple(g.source_topic_regex), tuple(g.repartition_source_topics))
                    for g in s.copartition_groups
                ),
            )
        )
    return srec.TopologyValue(topology.epoch, tuple(subtopologies))


class DuplicateSubtopologyError(ValueError):
    """A sub-topology id sent twice: Kafka's Collectors.toMap throws IllegalStateException, which the
    heartbeat answers as UNKNOWN_SERVER_ERROR."""


def from_request(topology: Any) -> tuple[StreamsTopology, srec.TopologyValue]:
    """StreamsTopology.fromHeartbeatRequest, and the record it is written as."""
    value = record_from_request(topology)
    subtopologies: dict[str, srec.Subtopology] = {}
    for s in value.subtopologies:
        if s.subtopology_id in subtopologies:
            raise DuplicateSubtopologyError(f"Duplicate key {s.subtopology_id}")
        subtopologies[s.subtopology_id] = s
    return StreamsTopology(value.epoch, subtopologies), value


def describe_topic_info(t: srec.TopicInfo) -> tuple[str, int, int, list[tuple[str, str]]]:
    return t.name, t.partitions, t.replication_factor, list(t.topic_configs)
