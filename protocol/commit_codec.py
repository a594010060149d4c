"""Hand-written OffsetCommit codec for the commit hot path.

kafka-python's schema codec builds an object per struct and spends ~35 us per one-partition
OffsetCommit round trip; this reads the request into tuples and writes the response with
`struct`, producing exactly the bytes the schema codec would (tests/unit/test_commit_codec.py
checks both directions against it for every version).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from protocol.compiled import speedups

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_IH = struct.Struct(">ih")

FIRST_FLEXIBLE = 8


class CommitPartition(NamedTuple):
    partition: int
    offset: int
    leader_epoch: int
    commit_timestamp: int
    metadata: str | None


class CommitRequest(NamedTuple):
    group_id: str | None
    generation: int
    member_id: str
    instance_id: str | None
    retention_ms: int
    topics: list[tuple[str, list[CommitPartition]]]
    version: int = 0


class CodecError(ValueError):
    pass


class _Reader:
    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: bytes | memoryview, flexible: bool) -> None:
        self.buf = bytes(buf)
        self.pos = 0
        self.flexible = flexible

    def int16(self) -> int:
        v = _H.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def int32(self) -> int:
        v = _I.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def int64(self) -> int:
        v = _Q.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def uvarint(self) -> int:
        buf, pos = self.buf, self.pos
        b = buf[pos]
        pos += 1
        if b < 0x80:
            self.pos = pos
            return b
        result, shift = b & 0x7F, 7
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return result
            shift += 7
            if shift > 35:
                raise CodecError("varint too long")

    def string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            return None
        if n > 32767:  # Kafka's readers refuse it (Short.MAX_VALUE): the request is not served
            raise CodecError(f"string field had invalid length {n}")
        end = self.pos + n
        if end > len(self.buf):
            raise CodecError("string overruns the request")
        value = self.buf[self.pos : end].decode()
        self.pos = end
        return value

    def array_length(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise CodecError("null array")
        return n

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 35:
            raise CodecError("varint too long")


def _compact_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = _varint(buf, pos)
    if n == 0:
        return None, pos
    end = pos + n - 1
    if end > len(buf):
        raise CodecError("string overruns the request")
    return buf[pos:end].decode(), end


def _skip_tags(buf: bytes, pos: int) -> int:
    count = buf[pos]
    if count == 0:
        return pos + 1
    count, pos = _varint(buf, pos)
    for _ in range(count):
        _tag, pos = _varint(buf, pos)
        size, pos = _varint(buf, pos)
        pos += size
    return pos


_QIQ = struct.Struct(">iqi")  # partition, committed offset, leader epoch


def _decode_flexible(buf: bytes, version: int) -> CommitRequest:
    """v8-v9, the versions current clients send: straight-line code, no reader object."""
    group_id, pos = _compact_string(buf, 0)
    (generation,) = _I.unpack_from(buf, pos)
    member_id, pos = _compact_string(buf, pos + 4)
    instance_id, pos = _compact_string(buf, pos)
    count = buf[pos] - 1 if buf[pos] < 0x80 else _varint(buf, pos)[0] - 1
    pos = pos + 1 if buf[pos] < 0x80 else _varint(buf, pos)[1]
    if count < 0:
        raise CodecError("null array")
    if group_id is None or member_id is None:
        raise CodecError("non-nullable field group_id or member_id was serialized as null")
    topics = []
    for _ in range(count):
        name, pos = _compact_string(buf, pos)
        if name is None:
            raise CodecError("null topic name")
        n = buf[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = _varint(buf, pos)
        if n == 0:
            raise CodecError("null array")
        parts = []
        for _ in range(n - 1):
            partition, offset, epoch = _QIQ.unpack_from(buf, pos)
            metadata, pos = _compact_string(buf, pos + 16)
            pos = _skip_tags(buf, pos)
            parts.append(CommitPartition(partition, offset, epoch, -1, metadata))
        pos = _skip_tags(buf, pos)
        topics.append((name, parts))
    pos = _skip_tags(buf, pos)
    if pos > len(buf):
        raise CodecError("OffsetCommit request overruns its frame")
    return CommitRequest(group_id, generation, member_id, instance_id, -1, topics, version)


# The compiled twins of _decode_flexible and encode_response_py (protocol/_speedups.c), when built.
_fast = speedups


def decode_request(body: bytes | memoryview, version: int) -> CommitRequest:
    """An OffsetCommit request body of `version` (0-9); raises CodecError on malformed input.
    Where the extension is built, this name is its decode_commit (v8+ in C, older versions here)."""
    if version >= FIRST_FLEXIBLE:
        buf = bytes(body)
        try:
            return _decode_flexible(buf, version)
        except (struct.error, IndexError, UnicodeDecodeError) as exc:
            raise CodecError(f"OffsetCommit v{version} does not decode: {exc}") from None
    flexible = version >= FIRST_FLEXIBLE
    r = _Reader(body, flexible)
    try:
        group_id = r.string()
        generation = r.int32() if version >= 1 else -1
        member_id = r.string() if version >= 1 else ""
        instance_id = r.string() if version >= 7 else None
        if group_id is None or member_id is None:
            raise CodecError("non-nullable field group_id or member_id was serialized as null")
        retention = r.int64() if 2 <= version <= 4 else -1
        topics = []
        for _ in range(r.array_length()):
            name = r.string()
            if name is None:
                raise CodecError("null topic name")
            parts = []
            for _ in range(r.array_length()):
                partition = r.int32()
                offset = r.int64()
                epoch = r.int32() if version >= 6 else -1
                ts = r.int64() if version == 1 else -1
                metadata = r.string()
                if flexible:
                    r.skip_tags()
                parts.append(CommitPartition(partition, offset, epoch, ts, metadata))
            if flexible:
                r.skip_tags()
            topics.append((name, parts))
        if flexible:
            r.skip_tags()
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise CodecError(f"OffsetCommit v{version} does not decode: {exc}") from None
    if r.pos > len(r.buf):
        raise CodecError("OffsetCommit request overruns its frame")
    return CommitRequest(group_id, generation, member_id, instance_id, retention, topics, version)


decode_request_py = decode_request
if _fast is not None:
    _fast.configure(CommitRequest, CommitPartition, CodecError, decode_request_py)
    decode_request = _fast.decode_commit


_NAME_CACHE: dict[tuple[str, bool], bytes] = {}


def _name(name: str, flexible: bool) -> bytes:
    key = (name, flexible)
    out = _NAME_CACHE.get(key)
    if out is None:
        raw = name.encode()
        out = (bytes((len(raw) + 1,)) if len(raw) < 127 else _uvarint(len(raw) + 1)) + raw if flexible else _H.pack(len(raw)) + raw
        if len(_NAME_CACHE) < 10_000:
            _NAME_CACHE[key] = out
    return out


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_response(version: int, topics: list[tuple[str, list[tuple[int, int]]]]) -> bytes:
    """OffsetCommitResponse body: throttle (v3+), topics [(name, [(partition, error)])]."""
    if _fast is not None:
        return _fast.encode_commit_response(version, topics)  # type: ignore[no-any-return]
    return encode_response_py(version, topics)


def encode_response_py(version: int, topics: list[tuple[str, list[tuple[int, int]]]]) -> bytes:
    """The pure-Python twin of the compiled encode_commit_response."""
    flexible = version >= FIRST_FLEXIBLE
    out = [b"\x00\x00\x00\x00"] if version >= 3 else []
    if flexible:
        out.append(_uvarint(len(topics) + 1))
        for name, parts in topics:
            out.append(_name(name, True))
            out.append(_uvarint(len(parts) + 1))
            out.extend(_IH.pack(p, e) + b"\x00" for p, e in parts)
            out.append(b"\x00")
        out.append(b"\x00")
    else:
        out.append(_I.pack(len(topics)))
        for name, parts in topics:
            out.append(_name(name, False))
            out.append(_I.pack(len(parts)))
            out.extend(_IH.pack(p, e) for p, e in parts)
    return b"".join(out)


def encode_answer(
    version: int, topics: list[tuple[str, list[CommitPartition]]], limits: list[int], codes: list[int] | int, unknown: int
) -> bytes:
    """The response to a decoded request's `topics`: a partition outside 0..limit of its topic
    (the partition count the handler saw) gets `unknown` (OC-2), each other one the next of
    `codes` in order, or `codes` itself when it is one code for all."""
    if _fast is not None:
        return _fast.encode_commit_answer(version, topics, limits, codes, unknown)  # type: ignore[no-any-return]
    return encode_answer_py(version, topics, limits, codes, unknown)


def encode_answer_py(
    version: int, topics: list[tuple[str, list[CommitPartition]]], limits: list[int], codes: list[int] | int, unknown: int
) -> bytes:
    """The pure-Python twin of the compiled encode_commit_answer."""
    if len(limits) != len(topics):
        raise ValueError("one limit per topic")
    rows: list[tuple[str, list[tuple[int, int]]]] = []
    if isinstance(codes, list):
        it = iter(codes)
        for (name, parts), limit in zip(topics, limits, strict=True):
            rows.append((name, [(p[0], next(it) if 0 <= p[0] < limit else unknown) for p in parts]))
        if next(it, None) is not None:
            raise ValueError("more codes than known partitions")
    else:
        for (name, parts), limit in zip(topics, limits, strict=True):
            rows.append((name, [(p[0], codes if 0 <= p[0] < limit else unknown) for p in parts]))
    return encode_response_py(version, rows)


if _fast is not None:
    encode_answer = _fast.encode_commit_answer  # the compiled twin, called without a wrapper
