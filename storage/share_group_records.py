"""Byte formats of the share-group records Kafka's group coordinator writes to `__consumer_offsets`
(KIP-932): types 10-15, as Kafka 4.4 writes them.

Keys are non-flexible (int16 type + int16-length strings); values are version 0, flexible
(compact lengths, a tagged-field section after every struct), like the consumer-group records of
storage/offsets_records.py, whose low-level helpers these share.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from storage.coordinator_records import group_key, one_tag, parse_group_key, read_one_tag
from storage.offsets_records import (
    _H,
    _I,
    _NO_TAGS,
    _Q,
    TopicPartitions,
    _carray_len,
    _cstring,
    _done,
    _parsing,
    _read_int32s,
    _read_topic_partitions,
    _read_uuid,
    _Reader,
    _topic_partitions,
    _value_reader,
)
from storage.offsets_records import key_type as key_type  # callers sort records by it

SHARE_GROUP_MEMBER_METADATA_KEY = 10
SHARE_GROUP_METADATA_KEY = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = 14
SHARE_GROUP_STATE_PARTITION_METADATA_KEY = 15
SHARE_GROUP_RECORD_TYPES = frozenset(range(10, 16))
_MEMBER_KEYS = frozenset(
    {SHARE_GROUP_MEMBER_METADATA_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY}
)


def share_group_key(kind: int, group: str, member: str | None = None) -> bytes:
    """Key of a type 10-15 record; `member` for types 10, 13 and 14."""
    return group_key(kind, group, member, _MEMBER_KEYS)


def parse_share_group_key(key: bytes) -> tuple[int, str, str | None]:
    """(type, group id, member id or None) of a type 10-15 key."""
    return parse_group_key(key, _MEMBER_KEYS, "share group")


# type 11: ShareGroupMetadataValue {Epoch int32, MetadataHash int64}


def share_group_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    return _H.pack(0) + _I.pack(epoch) + _Q.pack(metadata_hash) + _NO_TAGS


@_parsing("ShareGroupMetadataValue")
def parse_share_group_metadata_value(value: bytes) -> tuple[int, int]:
    """(epoch, metadata hash)."""
    r = _value_reader(value, "ShareGroupMetadataValue")
    epoch = r.int32()
    metadata_hash = r.int64()
    _done(r, "ShareGroupMetadataValue")
    return epoch, metadata_hash


# type 10: ShareGroupMemberMetadataValue {RackId string?, ClientId, ClientHost, SubscribedTopicNames []string}


class ShareMemberMetadata(NamedTuple):
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]


def share_member_metadata_value(v: ShareMemberMetadata) -> bytes:
    names = sorted(v.subscribed_topic_names)  # GroupCoordinatorRecordHelpers sorts them
    return b"".join(
        [
            _H.pack(0),
            _cstring(v.rack_id),
            _cstring(v.client_id),
            _cstring(v.client_host),
            _carray_len(len(names)),
            *(_cstring(n) for n in names),
            _NO_TAGS,
        ]
    )


@_parsing("ShareGroupMemberMetadataValue")
def parse_share_member_metadata_value(value: bytes) -> ShareMemberMetadata:
    r = _value_reader(value, "ShareGroupMemberMetadataValue")
    rack = r.nullable_string()
    client_id = r.string()
    client_host = r.string()
    names = [r.string() for _ in range(r.array_length())]
    _done(r, "ShareGroupMemberMetadataValue")
    return ShareMemberMetadata(rack, client_id, client_host, names)


# type 12: ShareGroupTargetAssignmentMetadataValue {AssignmentEpoch int32, tagged 0: AssignmentTimestamp int64 (default 0)}


def share_target_assignment_metadata_value(epoch: int, timestamp: int = 0) -> bytes:
    return _H.pack(0) + _I.pack(epoch) + one_tag(0, _Q, timestamp, 0)


@_parsing("ShareGroupTargetAssignmentMetadataValue")
def parse_share_target_assignment_metadata_value(value: bytes) -> tuple[int, int]:
    """(assignment epoch, assignment timestamp)."""
    r = _value_reader(value, "ShareGroupTargetAssignmentMetadataValue")
    epoch = r.int32()
    return epoch, read_one_tag(r, "ShareGroupTargetAssignmentMetadataValue", 0, _Q, 0)


# type 13: ShareGroupTargetAssignmentMemberValue {TopicPartitions []{TopicId, Partitions []int32}}


def share_target_assignment_value(partitions: TopicPartitions) -> bytes:
    return _H.pack(0) + _topic_partitions(partitions) + _NO_TAGS


@_parsing("ShareGroupTargetAssignmentMemberValue")
def parse_share_target_assignment_value(value: bytes) -> TopicPartitions:
    r = _value_reader(value, "ShareGroupTargetAssignmentMemberValue")
    items = _read_topic_partitions(r)
    _done(r, "ShareGroupTargetAssignmentMemberValue")
    return items


# type 14: ShareGroupCurrentMemberAssignmentValue {MemberEpoch, PreviousMemberEpoch, State int8, AssignedPartitions []}


class ShareCurrentAssignment(NamedTuple):
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: TopicPartitions


def share_current_assignment_value(v: ShareCurrentAssignment) -> bytes:
    return (
        _H.pack(0)
        + _I.pack(v.member_epoch)
        + _I.pack(v.previous_member_epoch)
        + bytes([v.state & 0xFF])
        + _topic_partitions(v.assigned)
        + _NO_TAGS
    )


@_parsing("ShareGroupCurrentMemberAssignmentValue")
def parse_share_current_assignment_value(value: bytes) -> ShareCurrentAssignment:
    r = _value_reader(value, "ShareGroupCurrentMemberAssignmentValue")
    epoch = r.int32()
    previous = r.int32()
    state = r._take(1)[0]
    assigned = _read_topic_partitions(r)
    _done(r, "ShareGroupCurrentMemberAssignmentValue")
    return ShareCurrentAssignment(epoch, previous, state, assigned)


# type 15: ShareGroupStatePartitionMetadataValue
#   {InitializingTopics []{TopicId, TopicName, Partitions []}, InitializedTopics (same), DeletingTopics []{TopicId, TopicName}}


class TopicPartitionsInfo(NamedTuple):
    topic_id: uuid.UUID
    topic_name: str
    partitions: list[int]


class StatePartitionMetadata(NamedTuple):
    initializing: list[TopicPartitionsInfo]
    initialized: list[TopicPartitionsInfo]
    deleting: list[tuple[uuid.UUID, str]]


def _infos(items: list[TopicPartitionsInfo]) -> bytes:
    out = [_carray_len(len(items))]
    for topic_id, name, partitions in items:
        out += [topic_id.bytes, _cstring(name), _carray_len(len(partitions)), *(_I.pack(p) for p in partitions), _NO_TAGS]
    return b"".join(out)


def share_state_partition_metadata_value(v: StatePartitionMetadata) -> bytes:
    deleting = [_carray_len(len(v.deleting))]
    for topic_id, name in v.deleting:
        deleting += [topic_id.bytes, _cstring(name), _NO_TAGS]
    return _H.pack(0) + _infos(v.initializing) + _infos(v.initialized) + b"".join(deleting) + _NO_TAGS


def _read_infos(r: _Reader) -> list[TopicPartitionsInfo]:
    items = []
    for _ in range(r.array_length()):
        topic_id = _read_uuid(r)
        name = r.string()
        partitions = _read_int32s(r)
        r.tagged_fields()
        items.append(TopicPartitionsInfo(topic_id, name, partitions))
    return items


@_parsing("ShareGroupStatePartitionMetadataValue")
def parse_share_state_partition_metadata_value(value: bytes) -> StatePartitionMetadata:
    r = _value_reader(value, "ShareGroupStatePartitionMetadataValue")
    initializing = _read_infos(r)
    initialized = _read_infos(r)
    deleting = []
    for _ in range(r.array_length()):
        topic_id = _read_uuid(r)
        name = r.string()
        r.tagged_fields()
        deleting.append((topic_id, name))
    _done(r, "ShareGroupStatePartitionMetadataValue")
    return StatePartitionMetadata(initializing, initialized, deleting)


__all__ = [
    "SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY",
    "SHARE_GROUP_MEMBER_METADATA_KEY",
    "SHARE_GROUP_METADATA_KEY",
    "SHARE_GROUP_RECORD_TYPES",
    "SHARE_GROUP_STATE_PARTITION_METADATA_KEY",
    "SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY",
    "SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY",
    "ShareCurrentAssignment",
    "ShareMemberMetadata",
    "StatePartitionMetadata",
    "TopicPartitionsInfo",
]
