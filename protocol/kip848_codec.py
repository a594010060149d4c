"""Hand-written ConsumerGroupHeartbeat codec (v0-v1, flexible) for the heartbeat hot path.

Every consumer of a KIP-848 group sends one of these per heartbeat interval, so the schema
codec's object-per-struct cost matters. This reads the request into tuples and writes the
response with `struct`, byte for byte what the schema codec reads and writes
(tests/unit/test_kip848_codec.py checks both directions against it with generated messages).
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

from protocol.commit_codec import CodecError, _Reader

_I = struct.Struct(">i")
_HEAD = struct.Struct(">ih")  # throttle time, error code


class TopicPartitions(NamedTuple):
    topic_id: uuid.UUID | None  # the all-zero id decodes to None, as in kafka-python
    partitions: list[int]


class HeartbeatRequest(NamedTuple):
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    topic_partitions: list[TopicPartitions] | None
    version: int = 0


_ZERO = bytes(16)


def decode_request(body: bytes | memoryview, version: int) -> HeartbeatRequest:
    r = _Reader(body, True)
    try:
        group_id = r.string()
        member_id = r.string()
        if group_id is None or member_id is None:
            raise CodecError("null GroupId or MemberId")
        epoch = r.int32()
        instance_id = r.string()
        rack_id = r.string()
        rebalance_timeout = r.int32()
        n = r.uvarint() - 1
        names: list[str] | None = None
        if n >= 0:
            names = []
            for _ in range(n):
                name = r.string()
                if name is None:
                    raise CodecError("null topic name")
                names.append(name)
        regex = r.string() if version >= 1 else None
        assignor = r.string()
        n = r.uvarint() - 1
        owned: list[TopicPartitions] | None = None
        if n >= 0:
            owned = []
            buf = r.buf
            for _ in range(n):
                raw = buf[r.pos : r.pos + 16]
                if len(raw) != 16:
                    raise CodecError("truncated topic id")
                r.pos += 16
                count = r.array_length()
                end = r.pos + 4 * count
                if end > len(buf):
                    raise CodecError("partitions overrun the request")
                parts = list(struct.unpack_from(f">{count}i", buf, r.pos))
                r.pos = end
                r.skip_tags()
                owned.append(TopicPartitions(None if raw == _ZERO else uuid.UUID(bytes=raw), parts))
        r.skip_tags()
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise CodecError(f"bad ConsumerGroupHeartbeatRequest: {exc}") from exc
    if r.pos != len(r.buf):
        raise CodecError("trailing bytes after ConsumerGroupHeartbeatRequest")
    return HeartbeatRequest(group_id, member_id, epoch, instance_id, rack_id, rebalance_timeout, names, regex, assignor, owned, version)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _cstring(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return _uvarint(len(raw) + 1) + raw


def encode_response(
    error_code: int,
    error_message: str | None,
    member_id: str | None,
    member_epoch: int,
    heartbeat_interval_ms: int,
    assignment: list[tuple[uuid.UUID, list[int]]] | None,
) -> bytes:
    """The response body (any version: v0 and v1 are the same)."""
    out = [_HEAD.pack(0, error_code), _cstring(error_message), _cstring(member_id), _I.pack(member_epoch), _I.pack(heartbeat_interval_ms)]
    if assignment is None:
        out.append(b"\xff")  # a null struct: int8 -1
    else:
        out.append(b"\x01")
        out.append(_uvarint(len(assignment) + 1))
        for topic_id, parts in assignment:
            out.append(topic_id.bytes)
            out.append(_uvarint(len(parts) + 1))
            out.append(struct.pack(f">{len(parts)}i", *parts))
            out.append(b"\x00")
        out.append(b"\x00")  # the Assignment struct's tagged fields
    out.append(b"\x00")
    return b"".join(out)
