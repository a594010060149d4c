"""`__consumer_offsets` records as Kafka defines them (spec 7.1), decoded and built independently.

The conformance tests read the broker's offsets log in-process (`broker.logs.get(topic,
partition).iter_batches()`, until Fetch serves `__consumer_offsets`) and decode every record with
the codecs below, written from the record schemas (REC:OffsetCommitKey/Value,
GroupMetadataKey/Value), not from kaflet's storage code. They also build records and batches
(transactional and control ones included) that tests append to the log before a restart.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.util import calc_crc32c

from tests.support.coordinator import OFFSETS_TOPIC

# -- reading -------------------------------------------------------------------------------------


class Reader:
    """Classic (non-flexible) encodings: int16-length strings, int32-length bytes and arrays."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("buffer underflow")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ValueError("null in a non-nullable string")
        return self._take(n).decode()

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._take(n).decode()

    def bytes_(self) -> bytes:
        n = self.int32()
        if n < 0:
            raise ValueError("null in non-nullable bytes")
        return self._take(n)

    def done(self) -> bool:
        return self.pos == len(self.data)


@dataclass
class OffsetKey:
    record_type: int
    group: str
    topic: str
    partition: int


@dataclass
class GroupKey:
    record_type: int
    group: str


@dataclass
class OffsetValue:
    version: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int


@dataclass
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupValue:
    version: int
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberValue]


def decode_key(key: bytes) -> OffsetKey | GroupKey | int:
    """RF-1/RF-2: the record type prefix, then the key struct (an int for other types)."""
    r = Reader(key)
    record_type = r.int16()
    if record_type in (0, 1):
        out: OffsetKey | GroupKey = OffsetKey(record_type, r.string(), r.string(), r.int32())
    elif record_type == 2:
        out = GroupKey(record_type, r.string())
    else:
        return record_type
    assert r.done(), f"trailing bytes after a type {record_type} key"
    return out


def decode_offset_value(value: bytes) -> OffsetValue:
    """RF-3, value versions 0-3 (classic encoding)."""
    r = Reader(value)
    version = r.int16()
    assert 0 <= version <= 3, f"OffsetCommitValue version {version}"
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    assert r.done(), "trailing bytes after OffsetCommitValue"
    return OffsetValue(version, offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_value(value: bytes) -> GroupValue:
    """RF-4, value versions 0-3 (classic encoding)."""
    r = Reader(value)
    version = r.int16()
    assert 0 <= version <= 3, f"GroupMetadataValue version {version}"
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.int32()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        members.append(
            MemberValue(member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout, subscription, assignment)
        )
    assert r.done(), "trailing bytes after GroupMetadataValue"
    return GroupValue(version, protocol_type, generation, protocol, leader, current_state_timestamp, members)


@dataclass
class LogRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int
    is_control: bool
    is_transactional: bool
    timestamp: int

    @property
    def decoded_key(self) -> Any:
        assert self.key is not None
        return decode_key(self.key)


def read_log(broker: Any, partition: int) -> list[LogRecord]:
    """Every record of `__consumer_offsets` partition `partition`, in log order."""
    log = broker.logs.get(OFFSETS_TOPIC, partition)
    out: list[LogRecord] = []
    if log is None:
        return out
    for buf, pos, _header in log.iter_batches():
        size = struct.unpack_from(">i", buf, pos + 8)[0] + 12
        batch = DefaultRecordBatch(bytes(buf[pos : pos + size]))
        assert batch.validate_crc(), f"bad CRC in {OFFSETS_TOPIC}-{partition}"
        for record in batch:
            out.append(
                LogRecord(
                    partition,
                    record.offset,
                    record.key,
                    record.value,
                    batch.producer_id,
                    batch.is_control_batch,
                    batch.is_transactional,
                    record.timestamp,
                )
            )
    return out


def read_all_logs(broker: Any) -> list[LogRecord]:
    return [r for p in range(broker.config.offsets_partitions) for r in read_log(broker, p)]


def offset_records(records: list[LogRecord], group: str) -> list[tuple[OffsetKey, OffsetValue | None]]:
    """(key, value or None for a tombstone) of the group's offset records, in log order."""
    out = []
    for r in records:
        if r.is_control or r.key is None:
            continue
        key = decode_key(r.key)
        if isinstance(key, OffsetKey) and key.group == group:
            out.append((key, None if r.value is None else decode_offset_value(r.value)))
    return out


def group_records(records: list[LogRecord], group: str) -> list[GroupValue | None]:
    """The group's GroupMetadata values (None for a tombstone), in log order."""
    out = []
    for r in records:
        if r.is_control or r.key is None:
            continue
        key = decode_key(r.key)
        if isinstance(key, GroupKey) and key.group == group:
            out.append(None if r.value is None else decode_group_value(r.value))
    return out


# -- building ------------------------------------------------------------------------------------


def _str(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _bytes(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def offset_key(group: str, topic: str, partition: int, record_type: int = 1) -> bytes:
    return struct.pack(">h", record_type) + _str(group) + _str(topic) + struct.pack(">i", partition)


def offset_value(
    offset: int, metadata: str = "", commit_timestamp: int = 0, *, version: int = 3, leader_epoch: int = -1, expire_timestamp: int = -1
) -> bytes:
    out = struct.pack(">hq", version, offset)
    if version >= 3:
        out += struct.pack(">i", leader_epoch)
    out += _str(metadata) + struct.pack(">q", commit_timestamp)
    if version == 1:
        out += struct.pack(">q", expire_timestamp)
    return out


def group_key(group: str) -> bytes:
    return struct.pack(">h", 2) + _str(group)


def group_value(
    *,
    version: int = 3,
    protocol_type: str = "consumer",
    generation: int = 1,
    protocol: str | None = "range",
    leader: str | None = None,
    current_state_timestamp: int = -1,
    members: list[MemberValue] | None = None,
) -> bytes:
    out = struct.pack(">h", version) + _str(protocol_type) + struct.pack(">i", generation) + _str(protocol) + _str(leader)
    if version >= 2:
        out += struct.pack(">q", current_state_timestamp)
    members = members or []
    out += struct.pack(">i", len(members))
    for m in members:
        out += _str(m.member_id)
        if version >= 3:
            out += _str(m.group_instance_id)
        out += _str(m.client_id) + _str(m.client_host)
        if version >= 1:
            out += struct.pack(">i", m.rebalance_timeout)
        out += struct.pack(">i", m.session_timeout) + _bytes(m.subscription) + _bytes(m.assignment)
    return out


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _record(delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = b"\x00" + _varint(0) + _varint(delta)
    body += _varint(-1) if key is None else _varint(len(key)) + key
    body += _varint(-1) if value is None else _varint(len(value)) + value
    body += _varint(0)  # no headers
    return _varint(len(body)) + body


def build_batch(
    records: list[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    transactional: bool = False,
    control: bool = False,
    base_sequence: int | None = None,
) -> bytearray:
    """A v2 record batch (uncompressed) as Kafka frames it, CRC-32C included."""
    if base_sequence is None:
        base_sequence = 0 if producer_id != -1 and not control else -1
    attributes = (0x10 if transactional else 0) | (0x20 if control else 0)
    body = struct.pack(
        ">hiqqqhii",
        attributes,
        len(records) - 1,
        timestamp,
        timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    ) + b"".join(_record(i, k, v) for i, (k, v) in enumerate(records))
    crc = calc_crc32c(body)
    header = struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(body), -1, 2, crc)
    return bytearray(header + body)


def control_batch(commit: bool, producer_id: int, producer_epoch: int = 0) -> bytearray:
    """A COMMIT (type 1) or ABORT (type 0) transaction marker."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)  # version 0, coordinator epoch 0
    return build_batch([(key, value)], producer_id=producer_id, producer_epoch=producer_epoch, transactional=True, control=True)


def append_to_log(broker: Any, partition: int, batch: bytearray) -> None:
    """Append a batch to `__consumer_offsets` behind the coordinator's back (picked up at next load)."""
    log = broker.logs.get(OFFSETS_TOPIC, partition)
    assert log is not None, f"no log for {OFFSETS_TOPIC}-{partition}"
    log.append(batch)


BALLAST_BATCHES = 96  # of ~1 MB each
BALLAST_RECORDS = 32  # per batch, each with 32000 bytes of metadata (an int16-length string caps it)


def write_ballast(broker: Any, partition: int) -> None:
    """~96 MB of offset records (one key) in `partition`: its shard takes a while to load.

    Shards load in partition order and the loader yields to the event loop every few MB, so after
    a restart a shard of a later partition stays LOADING for many loop turns: requests sent right
    after connecting reach it while it loads (about 32 MB sufficed on the storage branch).
    """
    record = (offset_key("ballast", "t", 1), offset_value(1, "x" * 32_000))
    batch = build_batch([record] * BALLAST_RECORDS)
    for _ in range(BALLAST_BATCHES):
        append_to_log(broker, partition, bytearray(batch))
