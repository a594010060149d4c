"""Byte formats of `__share_group_state` records (KIP-932's share coordinator), as Kafka 4.4 writes
them: type 0 ShareSnapshot (the whole state of a share partition) and type 1 ShareUpdate (a delta
on the last snapshot), both keyed by (group id, topic id, partition).

A key is `int16 type` + GroupId (int16-length string) + TopicId (16 bytes) + Partition (int32);
a value is `int16 version` (0) + the flexible value struct; a null value is a tombstone (written
when a share group's state is deleted).
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

from storage.coordinator_records import one_tag, read_one_tag
from storage.offsets_records import _H, _I, _NO_TAGS, _Q, RecordFormatError, _carray_len, _parsing, _Reader, _string, _value_reader

SHARE_SNAPSHOT_KEY = 0
SHARE_UPDATE_KEY = 1

_BATCH = struct.Struct(">qqbh")  # FirstOffset, LastOffset, DeliveryState, DeliveryCount


class StateBatch(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class ShareSnapshot(NamedTuple):
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int  # -1: unknown (KIP-1226's tagged field absent)
    create_timestamp: int
    write_timestamp: int
    batches: list[StateBatch]


class ShareUpdate(NamedTuple):
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: list[StateBatch]


def share_key(kind: int, group: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return _H.pack(kind) + _string(group) + topic_id.bytes + _I.pack(partition)


def parse_share_key(key: bytes) -> tuple[int, str, uuid.UUID, int]:
    """(type, group id, topic id, partition)."""
    try:
        kind = _H.unpack_from(key, 0)[0]
        r = _Reader(key, 2, False)
        group = r.string()
        topic_id = uuid.UUID(bytes=bytes(r._take(16)))
        partition = r.int32()
    except (IndexError, struct.error) as exc:
        raise RecordFormatError(f"bad share state key: {exc}") from exc
    if kind not in (SHARE_SNAPSHOT_KEY, SHARE_UPDATE_KEY):
        raise RecordFormatError(f"unknown share state record type {kind}")
    if r.pos != len(key):
        raise RecordFormatError("share state key has trailing bytes")
    return kind, group, topic_id, partition


def _batches(items: list[StateBatch]) -> bytes:
    return _carray_len(len(items)) + b"".join(_BATCH.pack(*b) + _NO_TAGS for b in items)


def _tags(delivery_complete_count: int) -> bytes:
    # DeliveryCompleteCount is tag 0, written only when it is not its default (-1).
    return one_tag(0, _I, delivery_complete_count, -1)


def share_snapshot_value(v: ShareSnapshot) -> bytes:
    return b"".join(
        [
            _H.pack(0),
            _I.pack(v.snapshot_epoch),
            _I.pack(v.state_epoch),
            _I.pack(v.leader_epoch),
            _Q.pack(v.start_offset),
            _Q.pack(v.create_timestamp),
            _Q.pack(v.write_timestamp),
            _batches(v.batches),
            _tags(v.delivery_complete_count),
        ]
    )


def share_update_value(v: ShareUpdate) -> bytes:
    return b"".join(
        [
            _H.pack(0),
            _I.pack(v.snapshot_epoch),
            _I.pack(v.leader_epoch),
            _Q.pack(v.start_offset),
            _batches(v.batches),
            _tags(v.delivery_complete_count),
        ]
    )


def _read_batches(r: _Reader) -> list[StateBatch]:
    out = []
    for _ in range(r.array_length()):
        first, last, state, count = _BATCH.unpack(r._take(_BATCH.size))
        r.tagged_fields()
        out.append(StateBatch(first, last, state, count))
    return out


def _read_tags(r: _Reader, name: str) -> int:
    return read_one_tag(r, name, 0, _I, -1)


@_parsing("ShareSnapshotValue")
def parse_share_snapshot_value(value: bytes) -> ShareSnapshot:
    r = _value_reader(value, "ShareSnapshotValue")
    snapshot_epoch = r.int32()
    state_epoch = r.int32()
    leader_epoch = r.int32()
    start_offset = r.int64()
    create_ts = r.int64()
    write_ts = r.int64()
    batches = _read_batches(r)
    count = _read_tags(r, "ShareSnapshotValue")
    return ShareSnapshot(snapshot_epoch, state_epoch, leader_epoch, start_offset, count, create_ts, write_ts, batches)


@_parsing("ShareUpdateValue")
def parse_share_update_value(value: bytes) -> ShareUpdate:
    r = _value_reader(value, "ShareUpdateValue")
    snapshot_epoch = r.int32()
    leader_epoch = r.int32()
    start_offset = r.int64()
    batches = _read_batches(r)
    count = _read_tags(r, "ShareUpdateValue")
    return ShareUpdate(snapshot_epoch, leader_epoch, start_offset, count, batches)
