"""Byte formats of the streams-group (KIP-1071) records of `__consumer_offsets`, exactly as Kafka
4.4 writes them: record types 17 and 19-23 (type 18, StreamsGroupPartitionMetadata, was dropped
before Kafka shipped streams groups).

Keys are non-flexible (int16 type + int16-length strings); values are version 0, flexible
(compact lengths, a tagged-field section after every struct). Kafka's tagged fields are written
only when they differ from their default, as Kafka's generated code does, so that a record
kaflet writes is byte for byte the record Kafka writes for the same state
(tests/unit/test_streams_records.py; tests/differential/streams/ parses and re-encodes the
records a real Kafka 4.4 wrote). Unknown tagged fields are skipped when read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from storage.coordinator_records import group_key, parse_group_key
from storage.offsets_records import (
    _H,
    _I,
    _NO_TAGS,
    _Q,
    RecordFormatError,
    _carray_len,
    _cstring,
    _int32s,
    _parsing,
    _read_int32s,
    _Reader,
    _uvarint,
    _value_reader,
)

STREAMS_GROUP_METADATA_KEY = 17
STREAMS_GROUP_MEMBER_METADATA_KEY = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = 22
STREAMS_GROUP_TOPOLOGY_KEY = 23
STREAMS_GROUP_RECORD_TYPES = frozenset({17, 19, 20, 21, 22, 23})
_MEMBER_KEYS = frozenset(
    {STREAMS_GROUP_MEMBER_METADATA_KEY, STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY}
)

KeyValue = tuple[str, str]


# -- keys ---------------------------------------------------------------------------------


def streams_group_key(kind: int, group: str, member: str | None = None) -> bytes:
    """Key of a type 17, 19-23 record; `member` for types 19, 21 and 22."""
    if kind not in STREAMS_GROUP_RECORD_TYPES:
        raise ValueError(f"record type {kind} is not a streams group record")
    return group_key(kind, group, member, _MEMBER_KEYS)


def parse_streams_group_key(key: bytes) -> tuple[int, str, str | None]:
    """(type, group id, member id or None)."""
    return parse_group_key(key, _MEMBER_KEYS, "streams group")


# -- shared pieces --------------------------------------------------------------------------


def _key_values(items: list[KeyValue] | tuple[KeyValue, ...]) -> bytes:
    out = [_carray_len(len(items))]
    for k, v in items:
        out += [_cstring(k), _cstring(v), _NO_TAGS]
    return b"".join(out)


def _read_key_values(r: _Reader) -> list[KeyValue]:
    items = []
    for _ in range(r.array_length()):
        k = r.string()
        v = r.string()
        r.tagged_fields()
        items.append((k, v))
    return items


def _strings(items: list[str] | tuple[str, ...]) -> bytes:
    return _carray_len(len(items)) + b"".join(_cstring(s) for s in items)


def _read_strings(r: _Reader) -> list[str]:
    return [r.string() for _ in range(r.array_length())]


def _int16s(values: tuple[int, ...]) -> bytes:
    return _carray_len(len(values)) + b"".join(_H.pack(v) for v in values)


def _read_int16s(r: _Reader) -> tuple[int, ...]:
    return tuple(r.int16() for _ in range(r.array_length()))


def _tagged(fields: list[tuple[int, bytes]]) -> bytes:
    out = [_uvarint(len(fields))]
    for tag, data in fields:
        out += [_uvarint(tag), _uvarint(len(data)), data]
    return b"".join(out)


def _read_tags(r: _Reader) -> dict[int, bytes]:
    tags = {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        tags[tag] = bytes(r._take(r.uvarint()))
    return tags


def _end(r: _Reader, name: str) -> None:
    if r.pos != len(r.buf):
        raise RecordFormatError(f"{name} has trailing bytes")


# -- type 17: StreamsGroupMetadataValue -------------------------------------------------------


@dataclass
class GroupMetadataValue:
    epoch: int
    metadata_hash: int
    validated_topology_epoch: int = -1
    last_assignment_configs: list[KeyValue] | None = field(default_factory=list)
    stored_description_topology_epoch: int = -1
    failed_description_topology_epoch: int = -1


def group_metadata_value(v: GroupMetadataValue) -> bytes:
    tags: list[tuple[int, bytes]] = []
    if v.validated_topology_epoch != -1:
        tags.append((0, _I.pack(v.validated_topology_epoch)))
    if v.last_assignment_configs is None:
        tags.append((1, b"\x00"))
    elif v.last_assignment_configs:
        tags.append((1, _key_values(v.last_assignment_configs)))
    if v.stored_description_topology_epoch != -1:
        tags.append((2, _I.pack(v.stored_description_topology_epoch)))
    if v.failed_description_topology_epoch != -1:
        tags.append((3, _I.pack(v.failed_description_topology_epoch)))
    return _H.pack(0) + _I.pack(v.epoch) + _Q.pack(v.metadata_hash) + _tagged(tags)


@_parsing("StreamsGroupMetadataValue")
def parse_group_metadata_value(value: bytes) -> GroupMetadataValue:
    r = _value_reader(value, "StreamsGroupMetadataValue")
    v = GroupMetadataValue(r.int32(), r.int64())
    tags = _read_tags(r)
    _end(r, "StreamsGroupMetadataValue")
    if 0 in tags:
        v.validated_topology_epoch = _I.unpack(tags[0])[0]
    if 1 in tags:
        t = _Reader(tags[1], 0, True)
        n = t.uvarint() - 1
        v.last_assignment_configs = None if n < 0 else [_read_kv_after_length(t) for _ in range(n)]
    if 2 in tags:
        v.stored_description_topology_epoch = _I.unpack(tags[2])[0]
    if 3 in tags:
        v.failed_description_topology_epoch = _I.unpack(tags[3])[0]
    return v


def _read_kv_after_length(r: _Reader) -> KeyValue:
    k = r.string()
    v = r.string()
    r.tagged_fields()
    return k, v


# -- type 19: StreamsGroupMemberMetadataValue --------------------------------------------------


@dataclass
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str
    user_endpoint: tuple[str, int] | None
    client_tags: list[KeyValue]


def member_metadata_value(v: MemberMetadataValue) -> bytes:
    out = [
        _H.pack(0),
        _cstring(v.instance_id),
        _cstring(v.rack_id),
        _cstring(v.client_id),
        _cstring(v.client_host),
        _I.pack(v.rebalance_timeout_ms),
        _I.pack(v.topology_epoch),
        _cstring(v.process_id),
    ]
    if v.user_endpoint is None:
        out.append(b"\xff")
    else:
        host, port = v.user_endpoint
        out += [b"\x01", _cstring(host), struct.pack(">H", port), _NO_TAGS]
    out += [_key_values(v.client_tags), _NO_TAGS]
    return b"".join(out)


@_parsing("StreamsGroupMemberMetadataValue")
def parse_member_metadata_value(value: bytes) -> MemberMetadataValue:
    r = _value_reader(value, "StreamsGroupMemberMetadataValue")
    instance_id = r.nullable_string()
    rack_id = r.nullable_string()
    client_id = r.string()
    client_host = r.string()
    rebalance_timeout = r.int32()
    topology_epoch = r.int32()
    process_id = r.string()
    endpoint = None
    if struct.unpack(">b", r._take(1))[0] >= 0:
        host = r.string()
        port = struct.unpack(">H", r._take(2))[0]
        r.tagged_fields()
        endpoint = (host, port)
    tags = _read_key_values(r)
    r.tagged_fields()
    _end(r, "StreamsGroupMemberMetadataValue")
    return MemberMetadataValue(instance_id, rack_id, client_id, client_host, rebalance_timeout, topology_epoch, process_id, endpoint, tags)


# -- type 20: StreamsGroupTargetAssignmentMetadataValue ------------------------------------------


def target_assignment_metadata_value(epoch: int, timestamp: int = 0) -> bytes:
    tags = [(0, _Q.pack(timestamp))] if timestamp != 0 else []
    return _H.pack(0) + _I.pack(epoch) + _tagged(tags)


@_parsing("StreamsGroupTargetAssignmentMetadataValue")
def parse_target_assignment_metadata_value(value: bytes) -> tuple[int, int]:
    """(assignment epoch, assignment timestamp)."""
    r = _value_reader(value, "StreamsGroupTargetAssignmentMetadataValue")
    epoch = r.int32()
    tags = _read_tags(r)
    _end(r, "StreamsGroupTargetAssignmentMetadataValue")
    return epoch, _Q.unpack(tags[0])[0] if 0 in tags else 0


# -- types 21 and 22: task ids ----------------------------------------------------------------

# (subtopology id, partitions), sorted as Kafka sorts them (by subtopology id, partitions ascending)
TaskIds = list[tuple[str, list[int]]]
# active tasks of a current assignment: (subtopology id, partitions, assignment epochs or None)
TaskIdsWithEpochs = list[tuple[str, list[int], list[int] | None]]


def _task_ids(items: TaskIds) -> bytes:
    out = [_carray_len(len(items))]
    for subtopology, partitions in items:
        out += [_cstring(subtopology), _int32s(partitions), _NO_TAGS]
    return b"".join(out)


def _read_task_ids(r: _Reader) -> TaskIdsWithEpochs:
    items: TaskIdsWithEpochs = []
    for _ in range(r.array_length()):
        subtopology = r.string()
        partitions = _read_int32s(r)
        epochs: list[int] | None = []
        tags = _read_tags(r)
        if 0 in tags:
            t = _Reader(tags[0], 0, True)
            n = t.uvarint() - 1
            epochs = None if n < 0 else [t.int32() for _ in range(n)]
        items.append((subtopology, partitions, epochs))
    return items


def _task_ids_with_epochs(items: TaskIdsWithEpochs) -> bytes:
    out = [_carray_len(len(items))]
    for subtopology, partitions, epochs in items:
        out += [_cstring(subtopology), _int32s(partitions)]
        if epochs is None:
            out.append(_tagged([(0, b"\x00")]))
        elif epochs:
            out.append(_tagged([(0, _int32s(epochs))]))
        else:
            out.append(_NO_TAGS)
    return b"".join(out)


@dataclass
class TargetAssignmentValue:
    active: TaskIds
    standby: TaskIds
    warmup: TaskIds


def target_assignment_value(v: TargetAssignmentValue) -> bytes:
    return _H.pack(0) + _task_ids(v.active) + _task_ids(v.standby) + _task_ids(v.warmup) + _NO_TAGS


@_parsing("StreamsGroupTargetAssignmentMemberValue")
def parse_target_assignment_value(value: bytes) -> TargetAssignmentValue:
    r = _value_reader(value, "StreamsGroupTargetAssignmentMemberValue")
    lists = [[(s, p) for s, p, _e in _read_task_ids(r)] for _ in range(3)]
    r.tagged_fields()
    _end(r, "StreamsGroupTargetAssignmentMemberValue")
    return TargetAssignmentValue(*lists)


@dataclass
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState: 1 STABLE, 2 UNREVOKED_TASKS, 3 UNRELEASED_TASKS, 127 UNKNOWN
    active: TaskIdsWithEpochs
    standby: TaskIds
    warmup: TaskIds
    active_pending: TaskIdsWithEpochs
    standby_pending: TaskIds
    warmup_pending: TaskIds


def current_assignment_value(v: CurrentAssignmentValue) -> bytes:
    return b"".join(
        [
            _H.pack(0),
            _I.pack(v.member_epoch),
            _I.pack(v.previous_member_epoch),
            struct.pack(">b", v.state),
            _task_ids_with_epochs(v.active),
            _task_ids(v.standby),
            _task_ids(v.warmup),
            _task_ids_with_epochs(v.active_pending),
            _task_ids(v.standby_pending),
            _task_ids(v.warmup_pending),
            _NO_TAGS,
        ]
    )


@_parsing("StreamsGroupCurrentMemberAssignmentValue")
def parse_current_assignment_value(value: bytes) -> CurrentAssignmentValue:
    r = _value_reader(value, "StreamsGroupCurrentMemberAssignmentValue")
    member_epoch = r.int32()
    previous = r.int32()
    state = struct.unpack(">b", r._take(1))[0]
    active = _read_task_ids(r)
    standby = [(s, p) for s, p, _e in _read_task_ids(r)]
    warmup = [(s, p) for s, p, _e in _read_task_ids(r)]
    active_pending = _read_task_ids(r)
    standby_pending = [(s, p) for s, p, _e in _read_task_ids(r)]
    warmup_pending = [(s, p) for s, p, _e in _read_task_ids(r)]
    r.tagged_fields()
    _end(r, "StreamsGroupCurrentMemberAssignmentValue")
    return CurrentAssignmentValue(member_epoch, previous, state, active, standby, warmup, active_pending, standby_pending, warmup_pending)


# -- type 23: StreamsGroupTopologyValue ---------------------------------------------------------


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int = 0
    replication_factor: int = 0
    topic_configs: tuple[KeyValue, ...] = ()


@dataclass(frozen=True)
class CopartitionGroup:
    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True)
class Subtopology:
    """A sub-topology as StreamsGroupTopologyValue holds it (and Kafka's StreamsTopology keeps it)."""

    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()


@dataclass(frozen=True)
class TopologyValue:
    epoch: int
    subtopologies: tuple[Subtopology, ...]


def _topic_infos(items: tuple[TopicInfo, ...]) -> bytes:
    out = [_carray_len(len(items))]
    for t in items:
        out += [_cstring(t.name), _I.pack(t.partitions), _H.pack(t.replication_factor), _key_values(t.topic_configs), _NO_TAGS]
    return b"".join(out)


def _read_topic_infos(r: _Reader) -> tuple[TopicInfo, ...]:
    items = []
    for _ in range(r.array_length()):
        name = r.string()
        partitions = r.int32()
        rf = r.int16()
        configs = tuple(_read_key_values(r))
        r.tagged_fields()
        items.append(TopicInfo(name, partitions, rf, configs))
    return tuple(items)


def topology_value(v: TopologyValue) -> bytes:
    out = [_H.pack(0), _I.pack(v.epoch), _carray_len(len(v.subtopologies))]
    for s in v.subtopologies:
        out += [
            _cstring(s.subtopology_id),
            _strings(s.source_topics),
            _strings(s.source_topic_regex),
            _topic_infos(s.state_changelog_topics),
            _strings(s.repartition_sink_topics),
            _topic_infos(s.repartition_source_topics),
            _carray_len(len(s.copartition_groups)),
        ]
        for g in s.copartition_groups:
            out += [_int16s(g.source_topics), _int16s(g.source_topic_regex), _int16s(g.repartition_source_topics), _NO_TAGS]
        out.append(_NO_TAGS)
    out.append(_NO_TAGS)
    return b"".join(out)


@_parsing("StreamsGroupTopologyValue")
def parse_topology_value(value: bytes) -> TopologyValue:
    r = _value_reader(value, "StreamsGroupTopologyValue")
    epoch = r.int32()
    subtopologies = []
    for _ in range(r.array_length()):
        sid = r.string()
        sources = tuple(_read_strings(r))
        regex = tuple(_read_strings(r))
        changelogs = _read_topic_infos(r)
        sinks = tuple(_read_strings(r))
        repartitions = _read_topic_infos(r)
        groups = []
        for _ in range(r.array_length()):
            groups.append(CopartitionGroup(_read_int16s(r), _read_int16s(r), _read_int16s(r)))
            r.tagged_fields()
        r.tagged_fields()
        subtopologies.append(Subtopology(sid, sources, regex, changelogs, sinks, repartitions, tuple(groups)))
    r.tagged_fields()
    _end(r, "StreamsGroupTopologyValue")
    return TopologyValue(epoch, tuple(subtopologies))
