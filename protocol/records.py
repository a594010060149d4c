"""Record batches (magic v2): header parsing, validation, base-offset patching, building, iterating.

Batches are kept as the bytes clients sent; this module reads and patches them in place
and builds the uncompressed batches the coordinator writes to `__consumer_offsets`.

Layout of a v2 batch header (61 bytes):
    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
    producerId int64 | producerEpoch int16 | baseSequence int32 | recordCount int32
The CRC-32C covers everything from `attributes` to the end of the batch.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from protocol.compiled import speedups as _fast

try:  # the extension itself: the package's __init__ may be skipped (broker/node/lean_imports.py)
    from crc32c._crc32c import crc32c
except ImportError:  # pragma: no cover - a future crc32c layout
    from crc32c import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted by batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
CRC_START = ATTRIBUTES_OFFSET

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies in a log."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


class InvalidBatch(ValueError):
    """A batch failed validation; `reason` says how."""

    def __init__(self, reason: str, kind: str = "corrupt") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind  # corrupt | magic | size | record | codec | unknown


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def batch_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> BatchHeader:
    """Check one batch at `pos`: framing, magic, CRC and record-count sanity. Raises InvalidBatch."""
    end = len(buf) if end is None else end
    if end - pos < LOG_OVERHEAD + 5:
        raise InvalidBatch("truncated batch header")
    magic = buf[pos + MAGIC_OFFSET]
    if magic != 2:
        raise InvalidBatch(f"magic {magic} is not supported (only v2 record batches)", "magic")
    if end - pos < HEADER_SIZE:
        raise InvalidBatch("truncated batch header")
    header = read_header(buf, pos)
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise InvalidBatch(f"batch length {header.batch_length} is smaller than a batch header")
    if pos + header.size > end:
        raise InvalidBatch(f"batch of {header.size} bytes overruns the {end - pos} bytes available")
    if header.record_count < 0 or header.last_offset_delta < 0:
        raise InvalidBatch("negative record count or last offset delta")
    if header.crc != batch_crc(buf, pos, header.size):
        raise InvalidBatch("CRC-32C mismatch")
    return header


def iter_batches(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each whole batch, without CRC checks; stops at a partial tail."""
    end = len(buf) if end is None else end
    unpack = HEADER.unpack_from
    while end - pos >= HEADER_SIZE:
        header = BatchHeader._make(unpack(buf, pos))
        size = header.batch_length + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > end:
            return
        yield pos, header
        pos += size


def patch_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """baseOffset is outside the CRC, so assigning offsets is an 8-byte write."""
    _I64.pack_into(buf, pos, base_offset)


def set_max_timestamp(buf: bytearray, pos: int, max_timestamp: int, log_append_time: bool = False) -> None:
    """Kafka's DefaultRecordBatch.setMaxTimestamp: the timestamp-type bit (LogAppendTime or
    CreateTime) and maxTimestamp, then a fresh CRC."""
    header = read_header(buf, pos)
    attributes = header.attributes | TIMESTAMP_TYPE_BIT if log_append_time else header.attributes & ~TIMESTAMP_TYPE_BIT
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    _U32.pack_into(buf, pos + CRC_OFFSET, batch_crc(buf, pos, header.size))


def set_log_append_time(buf: bytearray, pos: int, now_ms: int) -> None:
    """Stamp LogAppendTime: the timestamp-type bit and maxTimestamp, then a fresh CRC."""
    set_max_timestamp(buf, pos, now_ms, log_append_time=True)


# -- reading every record, as Kafka's log validation does ------------------------------


def _zigzag_at(buf: bytes | bytearray | memoryview, p: int, end: int, max_bytes: int) -> tuple[int, int]:
    """A zigzag varint of at most `max_bytes` bytes (5: Kafka's readVarint, an int32; 10:
    readVarlong) at `p`, below `end`; ValueError when it runs past either."""
    raw = 0
    for i in range(max_bytes):
        if p >= end:
            raise ValueError("Found invalid record structure")
        b = buf[p]
        p += 1
        raw |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            if max_bytes == 5:
                raw &= 0xFFFFFFFF  # Java's int arithmetic keeps the low 32 bits
                value = (raw >> 1) ^ -(raw & 1)
                return (value + (1 << 31)) % (1 << 32) - (1 << 31), p
            raw &= 0xFFFFFFFFFFFFFFFF
            return (raw >> 1) ^ -(raw & 1), p
    raise ValueError("Found invalid record structure")


def records_max_timestamp_py(buf: bytes | bytearray | memoryview, start: int, end: int, count: int, base_ts: int) -> int:
    """The pure-Python twin of the compiled records_max_timestamp: the largest record timestamp
    (base_ts + timestampDelta, at least -1) of `count` records that fill buf[start:end] exactly,
    every field read as Kafka's DefaultRecord.readFrom reads it; ValueError(why) when they do not."""
    if start < 0 or end < start or end > len(buf):
        raise ValueError("record range outside the buffer")
    zz = _zigzag_at
    p = start
    max_ts = -1
    for _ in range(count):
        try:
            length, p = zz(buf, p, end, 5)
        except ValueError:
            raise ValueError("Invalid record size") from None
        if length < 0 or length > end - p:
            raise ValueError("Invalid record size")
        rec_end = p + length
        if p >= rec_end:
            raise ValueError("Found invalid record structure")
        p += 1  # attributes
        ts_delta, p = zz(buf, p, rec_end, 10)
        _offset_delta, p = zz(buf, p, rec_end, 5)
        key_len, p = zz(buf, p, rec_end, 5)
        if key_len > 0:
            if key_len > rec_end - p:
                raise ValueError("Found invalid record structure")
            p += key_len
        value_len, p = zz(buf, p, rec_end, 5)
        if value_len > 0:
            if value_len > rec_end - p:
                raise ValueError("Found invalid record structure")
            p += value_len
        headers, p = zz(buf, p, rec_end, 5)
        if headers < 0:
            raise ValueError("Found invalid number of record headers")
        for _h in range(headers):
            key_len, p = zz(buf, p, rec_end, 5)
            if key_len < 0 or key_len > rec_end - p:
                raise ValueError("Found invalid record structure")
            p += key_len
            value_len, p = zz(buf, p, rec_end, 5)
            if value_len > 0:
                if value_len > rec_end - p:
                    raise ValueError("Found invalid record structure")
                p += value_len
        if p != rec_end:
            raise ValueError("Invalid record size: the record's fields do not fill it")
        ts = (base_ts + ts_delta + (1 << 63)) % (1 << 64) - (1 << 63)  # wraps as Java's long does
        if ts > max_ts:
            max_ts = ts
    if p != end:
        raise ValueError("Incorrect declared batch size, records still remaining in file")
    return max_ts


def records_max_timestamp(buf: bytes | bytearray | memoryview, start: int, end: int, count: int, base_ts: int) -> int:
    """The largest record timestamp of `count` records filling buf[start:end] (compiled where
    built); InvalidBatch(kind="record") when the records do not fill it exactly."""
    try:
        if _fast is not None:
            return _fast.records_max_timestamp(buf, start, end, count, base_ts)  # type: ignore[no-any-return]
        return records_max_timestamp_py(buf, start, end, count, base_ts)
    except ValueError as exc:
        raise InvalidBatch(str(exc), "record") from None


def batch_max_timestamp(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> int:
    """The largest record timestamp of the batch at `pos` as Kafka's log validation reads it
    (-1 when no record says more), decompressing a compressed batch; InvalidBatch with kind
    "record" (records malformed), "corrupt" (data that does not decompress), "unknown" (no such
    codec) or "codec" (a known codec whose library is not installed here)."""
    if header.compression:
        body = decompress_records(buf, pos, header)
        return records_max_timestamp(body, 0, len(body), header.record_count, header.base_timestamp)
    return records_max_timestamp(buf, pos + HEADER_SIZE, pos + header.size, header.record_count, header.base_timestamp)


# -- varints (zigzag, as records use them) ---------------------------------------------


def encode_varint(value: int, out: bytearray) -> None:
    value = (value << 1) ^ (value >> 63)
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


_SMALL_ZIGZAG = [bytes((n << 1,)) if n < 64 else bytes(((n << 1) & 0x7F | 0x80, n >> 6)) for n in range(8192)]


def _zigzag(value: int) -> bytes:
    """The zigzag varint of a non-negative int (record field lengths and deltas)."""
    if value < 8192:
        return _SMALL_ZIGZAG[value]
    out = bytearray()
    encode_varint(value, out)
    return bytes(out)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    b = buf[pos]
    pos += 1
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos
    result = b & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise InvalidBatch("varint too long")


# -- building ---------------------------------------------------------------------------

Header = tuple[str, bytes | None]


def encode_record(
    out: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None, headers: Sequence[Header] = ()
) -> None:
    body = bytearray(b"\x00")  # attributes
    encode_varint(timestamp_delta, body)
    encode_varint(offset_delta, body)
    if key is None:
        body.append(1)  # zigzag(-1)
    else:
        encode_varint(len(key), body)
        body += key
    if value is None:
        body.append(1)
    else:
        encode_varint(len(value), body)
        body += value
    encode_varint(len(headers), body)
    for hkey, hvalue in headers:
        raw = hkey.encode()
        encode_varint(len(raw), body)
        body += raw
        if hvalue is None:
            body.append(1)
        else:
            encode_varint(len(hvalue), body)
            body += hvalue
    encode_varint(len(body), out)
    out += body


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp_ms: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
    partition_leader_epoch: int = 0,
) -> bytearray:
    """An uncompressed v2 batch of (key, value) records sharing one timestamp."""
    if not records:
        raise ValueError("a batch needs at least one record")
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    if (
        _fast is not None
        and base_offset == 0
        and producer_id == NO_PRODUCER_ID
        and attributes == 0
        and partition_leader_epoch == 0
        and base_sequence == NO_SEQUENCE
        and producer_epoch == NO_PRODUCER_EPOCH
    ):
        try:
            return _fast.build_batch(records, ts)  # type: ignore[no-any-return]
        except TypeError:
            pass  # keys or values that are not bytes: built below
    return build_batch_py(records, ts, base_offset, producer_id, producer_epoch, base_sequence, attributes, partition_leader_epoch)


def build_batch_py(
    records: Sequence[tuple[bytes | None, bytes | None]],
    ts: int,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
    partition_leader_epoch: int = 0,
) -> bytearray:
    """The pure-Python twin of the compiled build_batch (and the builder of every other kind)."""
    # Records share the batch timestamp (delta 0) and carry no headers; lengths come from a
    # table of zigzag varints, so a record costs a join rather than a varint loop per field.
    zz = _zigzag
    chunks = []
    for i, (key, value) in enumerate(records):
        parts = [b"\x00\x00", zz(i)]  # attributes 0, timestamp delta 0, offset delta
        if key is None:
            parts.append(b"\x01")
        else:
            parts += (zz(len(key)), key)
        if value is None:
            parts.append(b"\x01")
        else:
            parts += (zz(len(value)), value)
        parts.append(b"\x00")  # no headers
        record = b"".join(parts)
        chunks.append(zz(len(record)))
        chunks.append(record)
    body = bytearray(b"".join(chunks))
    return _assemble(
        body,
        len(records),
        len(records) - 1,
        ts,
        ts,
        base_offset,
        producer_id,
        producer_epoch,
        base_sequence,
        attributes,
        partition_leader_epoch,
    )


def batch_size(records: Sequence[tuple[bytes | None, bytes | None]]) -> int:
    """The exact size of build_batch(records), without building it."""
    if _fast is not None:
        try:
            return _fast.batch_size(records)  # type: ignore[no-any-return]
        except TypeError:
            pass
    return batch_size_py(records)


def batch_size_py(records: Sequence[tuple[bytes | None, bytes | None]]) -> int:
    """The pure-Python twin of the compiled batch_size."""
    zz = _zigzag
    size = HEADER_SIZE
    for i, (key, value) in enumerate(records):
        body = 3 + len(zz(i))  # attributes, timestamp delta, offset delta, header count
        body += 1 if key is None else len(zz(len(key))) + len(key)
        body += 1 if value is None else len(zz(len(value))) + len(value)
        size += len(zz(body)) + body
    return size


def build_control_batch(
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    *,
    base_offset: int = 0,
    timestamp_ms: int | None = None,
) -> bytearray:
    """A transaction marker: key = (version 0, type 0 abort / 1 commit), value = (version 0, coordinator epoch)."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    body = bytearray()
    encode_record(body, 0, 0, key, value)
    return _assemble(body, 1, 0, ts, ts, base_offset, producer_id, producer_epoch, NO_SEQUENCE, TRANSACTIONAL_BIT | CONTROL_BIT, 0)


def _assemble(
    body: bytearray,
    count: int,
    last_delta: int,
    first_ts: int,
    max_ts: int,
    base_offset: int,
    pid: int,
    epoch: int,
    seq: int,
    attributes: int,
    leader_epoch: int,
) -> bytearray:
    size = HEADER_SIZE + len(body)
    out = bytearray(size)
    HEADER.pack_into(
        out, 0, base_offset, size - LOG_OVERHEAD, leader_epoch, 2, 0, attributes, last_delta, first_ts, max_ts, pid, epoch, seq, count
    )
    out[HEADER_SIZE:] = body
    _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[CRC_START:]))
    return out


# -- reading records -------------------------------------------------------------------


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


def iter_records(batch: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[Record]:
    """Records of one uncompressed batch at `pos` (compressed batches: decompress first)."""
    header = read_header(batch, pos)
    if header.compression:
        raise InvalidBatch("batch is compressed; decompress it before iterating records")
    yield from _iter_record_bodies(batch, pos + HEADER_SIZE, pos + header.size, header)


def _iter_record_bodies(buf: bytes | bytearray | memoryview, p: int, end: int, header: BatchHeader) -> Iterator[Record]:
    dv = decode_varint
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    for _ in range(header.record_count):
        length, p = dv(buf, p)
        rec_end = p + length
        p += 1  # attributes
        ts_delta, p = dv(buf, p)
        off_delta, p = dv(buf, p)
        klen, p = dv(buf, p)
        if klen < 0:
            key = None
        else:
            key = bytes(buf[p : p + klen])
            p += klen
        vlen, p = dv(buf, p)
        if vlen < 0:
            value = None
        else:
            value = bytes(buf[p : p + vlen])
            p += vlen
        hcount, p = dv(buf, p)
        headers: tuple[Header, ...] = ()
        if hcount:
            hs = []
            for _h in range(hcount):
                hklen, p = dv(buf, p)
                hkey = bytes(buf[p : p + hklen]).decode()
                p += hklen
                hvlen, p = dv(buf, p)
                if hvlen < 0:
                    hvalue = None
                else:
                    hvalue = bytes(buf[p : p + hvlen])
                    p += hvlen
                hs.append((hkey, hvalue))
            headers = tuple(hs)
        if p != rec_end:
            raise InvalidBatch("record length does not match its fields")
        if p > end:
            raise InvalidBatch("record overruns its batch")
        yield Record(base_offset + off_delta, base_ts + ts_delta, key, value, headers)


def iter_key_values(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of an uncompressed batch: the coordinator's replay fast path."""
    p = pos + HEADER_SIZE
    base_offset = header.base_offset
    for _ in range(header.record_count):
        # length
        b = buf[p]
        if b < 0x80:
            p += 1
        else:
            _, p = decode_varint(buf, p)
        p += 1  # attributes
        # timestamp delta (skipped)
        while buf[p] >= 0x80:
            p += 1
        p += 1
        b = buf[p]
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            off_delta, p = decode_varint(buf, p)
        b = buf[p]
        if b < 0x80:
            klen = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            klen, p = decode_varint(buf, p)
        if klen < 0:
            key = None
        else:
            key = bytes(buf[p : p + klen])
            p += klen
        b = buf[p]
        if b < 0x80:
            vlen = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            vlen, p = decode_varint(buf, p)
        if vlen < 0:
            value = None
        else:
            value = bytes(buf[p : p + vlen])
            p += vlen
        hcount, p = decode_varint(buf, p)
        for _h in range(hcount):
            hklen, p = decode_varint(buf, p)
            p += hklen
            hvlen, p = decode_varint(buf, p)
            if hvlen > 0:
                p += hvlen
        yield base_offset + off_delta, key, value


def control_record_type(key: bytes | None) -> int | None:
    """0 = ABORT, 1 = COMMIT for a control record key; None if not a marker."""
    if key is None or len(key) < 4:
        return None
    return struct.unpack_from(">h", key, 2)[0]


# -- compressed batches and rewriting (compaction, timestamp lookups) -------------------

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def decompress_records(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bytes:
    """The record section of a batch, decompressed (kafka-python's codecs; Kafka's framings)."""
    from kafka import codec

    data = bytes(memoryview(buf)[pos + HEADER_SIZE : pos + header.size])
    kind = header.compression
    if kind == 0:
        return data
    try:
        if kind == 1:
            return codec.gzip_decode(data)
        if kind == 2 and codec.has_snappy():
            return codec.snappy_decode(data)
        if kind == 3 and codec.has_lz4():
            return codec.lz4_decode(data)
        if kind == 4 and codec.has_zstd():
            return codec.zstd_decode(data)
    except Exception as exc:  # each codec raises its own kinds on bad input
        raise InvalidBatch(f"{COMPRESSION_NAMES.get(kind, kind)} data does not decompress: {exc}") from exc
    if kind not in COMPRESSION_NAMES:
        raise InvalidBatch(f"Unknown compression type id: {kind}", "unknown")
    raise InvalidBatch(f"no codec for compression type {COMPRESSION_NAMES.get(kind, kind)}", "codec")


def iter_all_records(buf: bytes | bytearray | memoryview, pos: int = 0, header: BatchHeader | None = None) -> Iterator[Record]:
    """Records of any batch, decompressing if needed. With LogAppendTime every record carries
    the batch's maxTimestamp, as Kafka's consumers read it."""
    header = read_header(buf, pos) if header is None else header
    if header.compression:
        body = decompress_records(buf, pos, header)
        records = _iter_record_bodies(body, 0, len(body), header)
    else:
        records = _iter_record_bodies(buf, pos + HEADER_SIZE, pos + header.size, header)
    if header.attributes & TIMESTAMP_TYPE_BIT:
        ts = header.max_timestamp
        for rec in records:
            yield rec._replace(timestamp=ts)
    else:
        yield from records


def rebuild_batch(header: BatchHeader, records: Sequence[Record], delete_horizon_ms: int | None = None) -> bytearray:
    """An uncompressed batch holding `records` (a subset of the batch `header` describes), with
    the same base offset, last offset delta, producer fields and flags, as Kafka's cleaner
    writes it. With a delete horizon, baseTimestamp carries it and the DELETE_HORIZON bit is set
    (record timestamps stay exact: their deltas are taken from it)."""
    base_offset = header.base_offset
    attributes = header.attributes & ~COMPRESSION_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_BIT
        base_ts = delete_horizon_ms
    elif header.attributes & DELETE_HORIZON_BIT:
        base_ts = header.base_timestamp
    else:
        base_ts = records[0].timestamp if records else header.max_timestamp
    body = bytearray()
    max_ts = -1
    for rec in records:
        encode_record(body, rec.offset - base_offset, rec.timestamp - base_ts, rec.key, rec.value, rec.headers)
        max_ts = max(max_ts, rec.timestamp)
    if header.attributes & TIMESTAMP_TYPE_BIT or not records:
        max_ts = header.max_timestamp
    return _assemble(
        body,
        len(records),
        header.last_offset_delta,
        base_ts,
        max_ts,
        base_offset,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        attributes,
        header.partition_leader_epoch,
    )


def delete_horizon(header: BatchHeader) -> int | None:
    return header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None


def key_values(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record of an uncompressed batch, as a list: the replay fast
    path over `PartitionLog.iter_batches` (whose chunks are bytes, so keys and values are
    sliced out once, not copied twice)."""
    if type(buf) is not bytes:
        buf = bytes(memoryview(buf)[pos : pos + header[1] + LOG_OVERHEAD])
        pos = 0
    p = pos + HEADER_SIZE
    base_offset = header[0]
    out: list[tuple[int, bytes | None, bytes | None]] = []
    dv = decode_varint
    for _ in range(header[12]):
        b = buf[p]
        if b < 0x80:
            p += 1
        else:
            _, p = dv(buf, p)
        p += 1  # attributes
        while buf[p] >= 0x80:  # timestamp delta, skipped
            p += 1
        b = buf[p + 1]
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            p += 2
        else:
            off_delta, p = dv(buf, p + 1)
        b = buf[p]
        if b < 0x80:
            klen = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            klen, p = dv(buf, p)
        if klen < 0:
            key = None
        else:
            key = buf[p : p + klen]
            p += klen
        b = buf[p]
        if b < 0x80:
            vlen = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            vlen, p = dv(buf, p)
        if vlen < 0:
            value = None
        else:
            value = buf[p : p + vlen]
            p += vlen
        if buf[p] == 0:
            p += 1
        else:
            hcount, p = dv(buf, p)
            for _h in range(hcount):
                hklen, p = dv(buf, p)
                p += hklen
                hvlen, p = dv(buf, p)
                if hvlen > 0:
                    p += hvlen
        out.append((base_offset + off_delta, key, value))
    return out
