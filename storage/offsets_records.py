"""Byte formats of `__consumer_offsets` records, exactly as Kafka writes them (RF-1..RF-4).

A key is `int16 type` + the key struct; a value is `int16 version` + the value struct; a null
value is a tombstone. Type 0/1 = OffsetCommitKey, 2 = GroupMetadataKey, 3-8 = consumer-group
(KIP-848) records. Offset values are kept as their raw bytes by the coordinator and decoded
only when read, which keeps replay of millions of records cheap.
"""

from __future__ import annotations

import struct
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
