"""Byte formats of `__consumer_offsets` records, exactly as Kafka writes them (RF-1..RF-4).

A key is `int16 type` + the key struct; a value is `int16 version` + the value struct; a null
value is a tombstone. Type 0/1 = OffsetCommitKey, 2 = GroupMetadataKey, 3-8 and 16 = consumer-group
(KIP-848) records. Offset values are kept as their raw bytes by the coordinator and decoded
only when read, which keeps replay of millions of records cheap.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

OFFSET_COMMIT_KEY_V0 = 0
OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2
CONSUMER_GROUP_RECORD_TYPES = frozenset(range(3, 9))

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_QI = struct.Struct(">qi")


class RecordFormatError(ValueError):
    """A `__consumer_offsets` key or value does not decode."""


class _Reader:
    """Classic (int16/int32 lengths) or flexible (compact varint lengths, tagged fields) fields."""

    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: bytes, pos: int, flexible: bool) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise RecordFormatError("truncated record")
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def int16(self) -> int:
        return _H.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _Q.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError("string is not UTF-8") from exc

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise RecordFormatError("null where a string is required")
        return value

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise RecordFormatError("null where bytes are required")
        return bytes(self._take(n))

    def array_length(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise RecordFormatError("null array")
        return n

    def tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _H.pack(len(raw)) + raw


def _nullable_string(value: str | None) -> bytes:
    return b"\xff\xff" if value is None else _string(value)


def _bytes(value: bytes) -> bytes:
    return _I.pack(len(value)) + value


# -- keys -------------------------------------------------------------------------------


_KEY_PREFIXES: dict[tuple[str, str], bytes] = {}


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """Always type 1 (RF-3, RC-2). The (group, topic) prefix is cached: commits repeat them."""
    prefix = _KEY_PREFIXES.get((group, topic))
    if prefix is None:
        prefix = _H.pack(OFFSET_COMMIT_KEY) + _string(group) + _string(topic)
        if len(_KEY_PREFIXES) >= 100_000:
            _KEY_PREFIXES.clear()
        _KEY_PREFIXES[(group, topic)] = prefix
    return prefix + _I.pack(partition)


def group_metadata_key(group: str) -> bytes:
    return _H.pack(GROUP_METADATA_KEY) + _string(group)


def key_type(key: bytes) -> int:
    if len(key) < 2:
        raise RecordFormatError("key shorter than its type")
    return _H.unpack_from(key, 0)[0]


def parse_offset_commit_key(key: bytes) -> tuple[str, str, int]:
    """(group, topic, partition) of a type 0/1 key: the replay hot path, so hand-unrolled."""
    try:
        gend = 4 + ((key[2] << 8) | key[3])
        tend = gend + 2 + ((key[gend] << 8) | key[gend + 1])
        if tend + 4 != len(key):
            raise RecordFormatError("OffsetCommitKey length mismatch")
        return key[4:gend].decode(), key[gend + 2 : tend].decode(), _I.unpack_from(key, tend)[0]
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise RecordFormatError(f"bad OffsetCommitKey: {exc}") from exc


def parse_group_metadata_key(key: bytes) -> str:
    return _Reader(key, 2, False).string()


# -- OffsetCommitValue ------------------------------------------------------------------


class OffsetValue(NamedTuple):
    offset: int
    leader_epoch: int  # -1 = absent
    metadata: str
    commit_timestamp: int
    expire_timestamp: int  # -1 = absent


_V3_NO_METADATA = struct.Struct(">hqihq")  # version 3, offset, leader epoch, "" , commit timestamp


def offset_commit_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int, expire_timestamp: int = -1) -> bytes:
    """v3, or v1 when an expire timestamp is present (RF-3, OC-7)."""
    if not metadata and expire_timestamp == -1:
        return _V3_NO_METADATA.pack(3, offset, leader_epoch, 0, commit_timestamp)
    meta = _string(metadata)
    if expire_timestamp != -1:
        return _H.pack(1) + _Q.pack(offset) + meta + _Q.pack(commit_timestamp) + _Q.pack(expire_timestamp)
    return _H.pack(3) + _QI.pack(offset, leader_epoch) + meta + _Q.pack(commit_timestamp)


def check_offset_commit_value(value: bytes) -> None:
    """Raise RecordFormatError unless `value` is a well-formed OffsetCommitValue (RL-2: a record
    that does not deserialize fails the load). Version 3, what Kafka and kaflet write, is checked
    by its lengths alone; other versions are parsed."""
    if len(value) >= 16 and value[0] == 0 and value[1] == 3:
        if len(value) == 24 + ((value[14] << 8) | value[15]) and value[14] < 0x80:
            return
        raise RecordFormatError("bad OffsetCommitValue v3 length")
    parse_offset_commit_value(value)


def committed_offset(value: bytes) -> int:
    """The offset of an OffsetCommitValue without parsing the rest: every version (0-4) puts
    it right after the version (what the metrics read for thousands of offsets per scrape)."""
    return int(_Q.unpack_from(value, 2)[0])


def parse_offset_commit_value(value: bytes) -> OffsetValue:
    try:
        version = _H.unpack_from(value, 0)[0]
        if not 0 <= version <= 4:
            raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
        r = _Reader(value, 2, version >= 4)
        offset = r.int64()
        leader_epoch = r.int32() if version >= 3 else -1
        metadata = r.string()
        commit_ts = r.int64()
        expire_ts = r.int64() if version == 1 else -1
        r.tagged_fields()
        return OffsetValue(offset, leader_epoch, metadata, commit_ts, expire_ts)
    except (IndexError, struct.error) as exc:
        raise RecordFormatError(f"bad OffsetCommitValue: {exc}") from exc


# -- GroupMetadataValue -----------------------------------------------------------------


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = field(default_factory=list)


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    """Version 3, as Kafka writes it (RF-4)."""
    out = [
        _H.pack(3),
        _string(value.protocol_type),
        _I.pack(value.generation),
        _nullable_string(value.protocol),
        _nullable_string(value.leader),
        _Q.pack(value.current_state_timestamp),
        _I.pack(len(value.members)),
    ]
    for m in value.members:
        out += [
            _string(m.member_id),
            _nullable_string(m.group_instance_id),
            _string(m.client_id),
            _string(m.client_host),
            _I.pack(m.rebalance_timeout),
            _I.pack(m.session_timeout),
            _bytes(m.subscription),
            _bytes(m.assignment),
        ]
    return b"".join(out)


def parse_group_metadata_value(value: bytes) -> GroupMetadataValue:
    """Any version 0-4."""
    try:
        version = _H.unpack_from(value, 0)[0]
        if not 0 <= version <= 4:
            raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
        r = _Reader(value, 2, version >= 4)
        protocol_type = r.string()
        generation = r.int32()
        protocol = r.nullable_string()
        leader = r.nullable_string()
        current_state_timestamp = r.int64() if version >= 2 else -1
        members = []
        for _ in range(r.array_length()):
            member_id = r.string()
            instance_id = r.nullable_string() if version >= 3 else None
            client_id = r.string()
            client_host = r.string()
            rebalance_timeout = r.int32() if version >= 1 else -1
            session_timeout = r.int32()
            subscription = r.bytes_()
            assignment = r.bytes_()
            r.tagged_fields()
            members.append(
                MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout, subscription, assignment)
            )
        r.tagged_fields()
        return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp, members)
    except (IndexError, struct.error) as exc:
        raise RecordFormatError(f"bad GroupMetadataValue: {exc}") from exc


# -- consumer-group (KIP-848) records, types 3-8 (RF-2) ----------------------------------
#
# Keys are non-flexible (int16 type + int16-length strings); values are version 0, flexible
# (compact lengths, a tagged-field section after every struct).

CONSUMER_GROUP_METADATA_KEY = 3
CONSUMER_GROUP_PARTITION_METADATA_KEY = 4
CONSUMER_GROUP_MEMBER_METADATA_KEY = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = 8
# Kafka 4.x: a group's resolved regular expression (key: group id, regex; not in CONSUMER_GROUP_RECORD_TYPES,
# which lists the types 3-8 every reader of the topic knows).
CONSUMER_GROUP_REGULAR_EXPRESSION_KEY = 16
_MEMBER_KEYS = frozenset(
    {CONSUMER_GROUP_MEMBER_METADATA_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY}
)

# topic id -> partitions, in the record's order (TopicPartitions[] {TopicId, Partitions[]})
TopicPartitions = list[tuple[uuid.UUID, list[int]]]


def consumer_group_key(kind: int, group: str, member: str | None = None) -> bytes:
    """Key of a type 3-8 or 16 record; `member` for types 5, 7 and 8 (the regular expression for 16)."""
    if kind == CONSUMER_GROUP_REGULAR_EXPRESSION_KEY:
        if member is None:
            raise ValueError("record type 16 needs its regular expression")
        return _H.pack(kind) + _string(group) + _string(member)
    if (member is not None) != (kind in _MEMBER_KEYS):
        raise ValueError(f"record type {kind} {'needs' if kind in _MEMBER_KEYS else 'takes no'} member id")
    return _H.pack(kind) + _string(group) + (_string(member) if member is not None else b"")


def parse_consumer_group_key(key: bytes) -> tuple[int, str, str | None]:
    """(type, group id, member id or None) of a type 3-8 key; (16, group id, regular expression) of a type 16 key."""
    try:
        kind = key_type(key)
        r = _Reader(key, 2, False)
        group = r.string()
        member = r.string() if kind in _MEMBER_KEYS or kind == CONSUMER_GROUP_REGULAR_EXPRESSION_KEY else None
    except (IndexError, struct.error) as exc:
        raise RecordFormatError(f"bad consumer group key: {exc}") from exc
    if r.pos != len(key):
        raise RecordFormatError("consumer group key has trailing bytes")
    return kind, group, member


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _cstring(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode("utf-8")
    return _uvarint(len(raw) + 1) + raw


def _carray_len(n: int) -> bytes:
    return _uvarint(n + 1)


def _int32s(values: list[int]) -> bytes:
    return _carray_len(len(values)) + b"".join(_I.pack(v) for v in values)


_NO_TAGS = b"\x00"


def _topic_partitions(items: TopicPartitions) -> bytes:
    out = [_carray_len(len(items))]
    for topic_id, partitions in items:
        out += [topic_id.bytes, _int32s(partitions), _NO_TAGS]
    return b"".join(out)


def _read_uuid(r: _Reader) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(r._take(16)))


def _read_int32s(r: _Reader) -> list[int]:
    return [r.int32() for _ in range(r.array_length())]


def _read_topic_partitions(r: _Reader) -> TopicPartitions:
    items: TopicPartitions = []
    for _ in range(r.array_length()):
        topic_id = _read_uuid(r)
        partitions = _read_int32s(r)
        r.tagged_fields()
        items.append((topic_id, partitions))
    return items


def _value_reader(value: bytes, name: str) -> _Reader:
    if len(value) < 2:
        raise RecordFormatError(f"{name} shorter than its version")
    version = _H.unpack_from(value, 0)[0]
    if version != 0:
        raise RecordFormatError(f"unknown {name} version {version}")
    return _Reader(value, 2, True)


def _done(r: _Reader, name: str) -> None:
    r.tagged_fields()
    if r.pos != len(r.buf):
        raise RecordFormatError(f"{name} has trailing bytes")


def _parsing(name: str):  # type: ignore[no-untyped-def]
    """Turn low-level decoding failures of `name` into RecordFormatError."""

    def wrap(fn):  # type: ignore[no-untyped-def]
        def parse(value: bytes):  # type: ignore[no-untyped-def]
            try:
                return fn(value)
            except (IndexError, struct.error, ValueError) as exc:
                if isinstance(exc, RecordFormatError):
                    raise
                raise RecordFormatError(f"bad {name}: {exc}") from exc

        parse.__doc__ = fn.__doc__
        return parse

    return wrap


# type 3 / 6: an epoch


def consumer_group_epoch_value(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue (type 3) or ConsumerGroupTargetAssignmentMetadataValue (type 6)."""
    return _H.pack(0) + _I.pack(epoch) + _NO_TAGS


@_parsing("ConsumerGroup epoch value")
def parse_consumer_group_epoch_value(value: bytes) -> int:
    r = _value_reader(value, "ConsumerGroup epoch value")
    epoch = r.int32()
    _done(r, "ConsumerGroup epoch value")
    return epoch


def _int64_tag(tag: int, value: int) -> bytes:
    return _uvarint(tag) + _uvarint(8) + _Q.pack(value)


def consumer_group_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    """ConsumerGroupMetadataValue (type 3): the group epoch and, as Kafka 4.1+ writes it, the hash of the
    subscribed topics' metadata in tagged field 0 (omitted when 0, its default)."""
    if metadata_hash == 0:
        return consumer_group_epoch_value(epoch)
    return _H.pack(0) + _I.pack(epoch) + _uvarint(1) + _int64_tag(0, metadata_hash)


def target_assignment_metadata_value(epoch: int, timestamp_ms: int) -> bytes:
    """ConsumerGroupTargetAssignmentMetadataValue (type 6): the assignment epoch and, as Kafka 4.4 writes
    it, when the assignment was computed in tagged field 0 (omitted when 0, its default)."""
    if timestamp_ms == 0:
        return consumer_group_epoch_value(epoch)
    return _H.pack(0) + _I.pack(epoch) + _uvarint(1) + _int64_tag(0, timestamp_ms)


@_parsing("ConsumerGroup epoch value")
def parse_epoch_and_tag0(value: bytes) -> tuple[int, int]:
    """(epoch, int64 tagged field 0 or 0) of a type 3 (metadata hash) or type 6 (assignment timestamp) value."""
    r = _value_reader(value, "ConsumerGroup epoch value")
    epoch = r.int32()
    tag0 = 0
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        data = r._take(r.uvarint())
        if tag == 0:
            if len(data) != 8:
                raise RecordFormatError("tagged field 0 is not an int64")
            tag0 = _Q.unpack(data)[0]
    if r.pos != len(value):
        raise RecordFormatError("ConsumerGroup epoch value has trailing bytes")
    return epoch, tag0


# type 16: a resolved regular expression


class ResolvedRegex(NamedTuple):
    topics: frozenset[str]
    version: int  # the topic metadata version it was resolved against
    timestamp: int  # when it was resolved (ms)


def consumer_group_regex_value(resolved: ResolvedRegex) -> bytes:
    """ConsumerGroupRegularExpressionValue: Topics (compact strings, sorted), Version, Timestamp."""
    names = sorted(resolved.topics)
    return b"".join(
        [
            _H.pack(0),
            _carray_len(len(names)),
            *(_cstring(n) for n in names),
            _Q.pack(resolved.version),
            _Q.pack(resolved.timestamp),
            _NO_TAGS,
        ]
    )


@_parsing("ConsumerGroupRegularExpressionValue")
def parse_consumer_group_regex_value(value: bytes) -> ResolvedRegex:
    r = _value_reader(value, "ConsumerGroupRegularExpressionValue")
    topics = frozenset(r.string() for _ in range(r.array_length()))
    version = r.int64()
    timestamp = r.int64()
    _done(r, "ConsumerGroupRegularExpressionValue")
    return ResolvedRegex(topics, version, timestamp)


# type 4: subscription metadata


class TopicMetadata(NamedTuple):
    topic_id: uuid.UUID
    name: str
    partitions: int


def consumer_group_partition_metadata_value(topics: list[TopicMetadata]) -> bytes:
    """ConsumerGroupPartitionMetadataValue; kaflet has no racks, so PartitionMetadata is empty."""
    out = [_H.pack(0), _carray_len(len(topics))]
    for t in topics:
        out += [t.topic_id.bytes, _cstring(t.name), _I.pack(t.partitions), _carray_len(0), _NO_TAGS]
    out.append(_NO_TAGS)
    return b"".join(out)


@_parsing("ConsumerGroupPartitionMetadataValue")
def parse_consumer_group_partition_metadata_value(value: bytes) -> list[TopicMetadata]:
    r = _value_reader(value, "ConsumerGroupPartitionMetadataValue")
    topics = []
    for _ in range(r.array_length()):
        topic_id = _read_uuid(r)
        name = r.string()
        partitions = r.int32()
        for _ in range(r.array_length()):  # PartitionMetadata {Partition, Racks[]}
            r.int32()
            for _ in range(r.array_length()):
                r.string()
            r.tagged_fields()
        r.tagged_fields()
        topics.append(TopicMetadata(topic_id, name, partitions))
    _done(r, "ConsumerGroupPartitionMetadataValue")
    return topics


# type 5: member metadata


@dataclass
class ClassicMemberMetadata:
    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]


@dataclass
class ConsumerMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None  # tagged field 0: a classic-protocol member (KM-3)


def consumer_member_metadata_value(v: ConsumerMemberMetadataValue) -> bytes:
    out = [
        _H.pack(0),
        _cstring(v.instance_id),
        _cstring(v.rack_id),
        _cstring(v.client_id),
        _cstring(v.client_host),
        _carray_len(len(v.subscribed_topic_names)),
        *(_cstring(name) for name in v.subscribed_topic_names),
        _cstring(v.subscribed_topic_regex),
        _I.pack(v.rebalance_timeout_ms),
        _cstring(v.server_assignor),
    ]
    if v.classic is None:
        out.append(_NO_TAGS)
    else:
        inner = [_I.pack(v.classic.session_timeout_ms), _carray_len(len(v.classic.protocols))]
        for name, metadata in v.classic.protocols:
            inner += [_cstring(name), _uvarint(len(metadata) + 1), metadata, _NO_TAGS]
        inner.append(_NO_TAGS)
        data = b"".join(inner)
        out += [_uvarint(1), _uvarint(0), _uvarint(len(data)), data]
    return b"".join(out)


@_parsing("ConsumerGroupMemberMetadataValue")
def parse_consumer_member_metadata_value(value: bytes) -> ConsumerMemberMetadataValue:
    r = _value_reader(value, "ConsumerGroupMemberMetadataValue")
    v = ConsumerMemberMetadataValue(
        instance_id=r.nullable_string(),
        rack_id=r.nullable_string(),
        client_id=r.string(),
        client_host=r.string(),
        subscribed_topic_names=[r.string() for _ in range(r.array_length())],
        subscribed_topic_regex=r.nullable_string(),
        rebalance_timeout_ms=r.int32(),
        server_assignor=r.nullable_string(),
    )
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        data = r._take(r.uvarint())
        if tag == 0:
            t = _Reader(data, 0, True)
            session_timeout = t.int32()
            protocols = []
            for _ in range(t.array_length()):
                name = t.string()
                metadata = t.bytes_()
                t.tagged_fields()
                protocols.append((name, metadata))
            t.tagged_fields()
            v.classic = ClassicMemberMetadata(session_timeout, protocols)
    if r.pos != len(value):
        raise RecordFormatError("ConsumerGroupMemberMetadataValue has trailing bytes")
    return v


# type 7: target assignment of a member


def consumer_target_assignment_value(partitions: TopicPartitions) -> bytes:
    return _H.pack(0) + _topic_partitions(partitions) + _NO_TAGS


@_parsing("ConsumerGroupTargetAssignmentMemberValue")
def parse_consumer_target_assignment_value(value: bytes) -> TopicPartitions:
    r = _value_reader(value, "ConsumerGroupTargetAssignmentMemberValue")
    items = _read_topic_partitions(r)
    _done(r, "ConsumerGroupTargetAssignmentMemberValue")
    return items


# type 8: current assignment of a member


@dataclass
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState: 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS, 127 UNKNOWN
    assigned: TopicPartitions
    pending_revocation: TopicPartitions


def consumer_current_assignment_value(v: CurrentAssignmentValue) -> bytes:
    return b"".join(
        [
            _H.pack(0),
            _I.pack(v.member_epoch),
            _I.pack(v.previous_member_epoch),
            struct.pack(">b", v.state),
            _topic_partitions(v.assigned),
            _topic_partitions(v.pending_revocation),
            _NO_TAGS,
        ]
    )


@_parsing("ConsumerGroupCurrentMemberAssignmentValue")
def parse_consumer_current_assignment_value(value: bytes) -> CurrentAssignmentValue:
    r = _value_reader(value, "ConsumerGroupCurrentMemberAssignmentValue")
    member_epoch = r.int32()
    previous = r.int32()
    state = struct.unpack(">b", r._take(1))[0]
    assigned = _read_topic_partitions(r)
    pending = _read_topic_partitions(r)
    _done(r, "ConsumerGroupCurrentMemberAssignmentValue")
    return CurrentAssignmentValue(member_epoch, previous, state, assigned, pending)
