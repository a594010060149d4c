"""The records of `__transaction_state`, in Kafka's formats (TransactionLogKey/Value).

Key: int16 version (0), then `TransactionalId` (int16-length string).
Value, version-prefixed: v0 (what Kafka writes for Transaction V1 clients) and v1 (flexible,
with tagged PreviousProducerId(0), NextProducerId(1), ClientTransactionVersion(2)):
ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32, TransactionStatus int8,
TransactionPartitions nullable [] {Topic string, PartitionIds []int32},
TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64.
A null value is a tombstone (the transactional id expired). Partitions are null when the
state is Empty, as Kafka writes them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">qhib")
_TAIL = struct.Struct(">qq")
KEY_VERSION = 0
VALUE_VERSION = 0


class TxnRecordError(ValueError):
    pass


@dataclass(slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: dict[str, list[int]] | None
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    unknown_tags: dict[int, bytes] = field(default_factory=dict)


def _string(text: str) -> bytes:
    raw = text.encode()
    return _I16.pack(len(raw)) + raw


def key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def parse_key(data: bytes) -> str:
    if len(data) < 4:
        raise TxnRecordError("transaction log key too short")
    version = _I16.unpack_from(data, 0)[0]
    if version != KEY_VERSION:
        raise TxnRecordError(f"unknown transaction log key version {version}")
    n = _I16.unpack_from(data, 2)[0]
    if n < 0 or 4 + n != len(data):
        raise TxnRecordError("bad transactional id in transaction log key")
    return data[4 : 4 + n].decode()


def value(v: TxnLogValue) -> bytes:
    """Version 0 (Kafka's choice for Transaction V1 clients)."""
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _HEAD.pack(v.producer_id, v.producer_epoch, v.timeout_ms, v.status)
    if v.partitions is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(v.partitions))
        for topic, parts in v.partitions.items():
            out += _string(topic)
            out += _I32.pack(len(parts))
            for p in parts:
                out += _I32.pack(p)
    out += _TAIL.pack(v.last_update_ms, v.start_ms)
    return bytes(out)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, s: struct.Struct) -> tuple:
        if self.pos + s.size > len(self.data):
            raise TxnRecordError("transaction log value truncated")
        out = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return out

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.data) or shift > 35:
                raise TxnRecordError("bad varint in transaction log value")
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TxnRecordError("transaction log value truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out


def parse_value(data: bytes) -> TxnLogValue:
    r = _Reader(data)
    (version,) = r.take(_I16)
    if version not in (0, 1):
        raise TxnRecordError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    pid, epoch, timeout, status = r.take(_HEAD)
    partitions: dict[str, list[int]] | None
    count = r.uvarint() - 1 if flexible else r.take(_I32)[0]
    if count < 0:
        partitions = None
    else:
        partitions = {}
        for _ in range(count):
            n = r.uvarint() - 1 if flexible else r.take(_I16)[0]
            topic = r.raw(n).decode()
            m = r.uvarint() - 1 if flexible else r.take(_I32)[0]
            partitions[topic] = [r.take(_I32)[0] for _ in range(max(m, 0))]
            if flexible:
                _skip_tags(r)
    last_update, start = r.take(_TAIL)
    out = TxnLogValue(pid, epoch, timeout, status, partitions, last_update, start)
    if flexible:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            body = r.raw(r.uvarint())
            if tag == 0 and len(body) == 8:
                out.previous_producer_id = _I64.unpack(body)[0]
            elif tag == 1 and len(body) == 8:
                out.next_producer_id = _I64.unpack(body)[0]
            elif tag == 2 and len(body) == 2:
                out.client_transaction_version = _I16.unpack(body)[0]
            else:
                out.unknown_tags[tag] = body
    return out


def _skip_tags(r: _Reader) -> None:
    for _ in range(r.uvarint()):
        r.uvarint()
        r.raw(r.uvarint())
