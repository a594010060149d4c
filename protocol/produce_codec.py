"""Produce request decoding for the produce hot path: the records stay views of the frame.

kafka-python's schema codec copies every partition's records into a new bytes object (a 1 MiB
memcpy per produced batch) and builds an object per struct. `decode_request` reads v3-v11 (the
versions served) into NamedTuples whose `records` are memoryview slices of the request body.
What it does not expect (a null where the schema forbids one, tagged fields, bytes left over,
a name that is not UTF-8, a body that ends early) it leaves to the schema codec by returning
None, so that odd input is judged in one place; tests/unit/test_produce_codec.py compares the
two on every version.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

FIRST_FLEXIBLE = 9

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_HI = struct.Struct(">hi")


class ProducePartition(NamedTuple):
    index: int
    records: memoryview | None


class ProduceTopic(NamedTuple):
    name: str
    partition_data: list[ProducePartition]


class ProduceRequest(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[ProduceTopic]
    API_VERSION: int  # named as on kafka-python's message objects, which handlers also get


class _Odd(Exception):
    """Not the common shape: the schema codec decides."""


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise _Odd


def decode_request(body: memoryview, version: int) -> ProduceRequest | None:
    """The request, or None when the schema codec must decide (see the module docstring)."""
    try:
        if version >= FIRST_FLEXIBLE:
            return _decode_flexible(body, version)
        return _decode_classic(body, version)
    except (_Odd, IndexError, struct.error, UnicodeDecodeError):
        return None


def _decode_classic(buf: memoryview, version: int) -> ProduceRequest:
    n = _H.unpack_from(buf, 0)[0]
    pos = 2
    txn_id = None
    if n >= 0:
        txn_id = str(buf[pos : pos + n], "utf-8")
        pos += n
    acks, timeout = _HI.unpack_from(buf, pos)
    count = _I.unpack_from(buf, pos + 6)[0]
    pos += 10
    if count < 0:
        raise _Odd
    topics = []
    end = len(buf)
    for _ in range(count):
        n = _H.unpack_from(buf, pos)[0]
        if n < 0 or pos + 2 + n > end:
            raise _Odd
        name = str(buf[pos + 2 : pos + 2 + n], "utf-8")
        pcount = _I.unpack_from(buf, pos + 2 + n)[0]
        pos += 6 + n
        if pcount < 0:
            raise _Odd
        parts = []
        for _ in range(pcount):
            index, size = struct.unpack_from(">ii", buf, pos)
            pos += 8
            records = None
            if size >= 0:
                if pos + size > end:
                    raise _Odd
                records = buf[pos : pos + size]
                pos += size
            parts.append(ProducePartition(index, records))
        topics.append(ProduceTopic(name, parts))
    if pos != end:
        raise _Odd
    return ProduceRequest(txn_id, acks, timeout, topics, version)


def _decode_flexible(buf: memoryview, version: int) -> ProduceRequest:
    n, pos = _uvarint(buf, 0)
    txn_id = None
    if n:
        txn_id = str(buf[pos : pos + n - 1], "utf-8")
        pos += n - 1
    acks, timeout = _HI.unpack_from(buf, pos)
    count, pos = _uvarint(buf, pos + 6)
    if count == 0:
        raise _Odd  # a null TopicData
    topics = []
    end = len(buf)
    for _ in range(count - 1):
        n, pos = _uvarint(buf, pos)
        if n == 0 or pos + n - 1 > end:
            raise _Odd
        name = str(buf[pos : pos + n - 1], "utf-8")
        pcount, pos = _uvarint(buf, pos + n - 1)
        if pcount == 0:
            raise _Odd
        parts = []
        for _ in range(pcount - 1):
            index = _I.unpack_from(buf, pos)[0]
            size, pos = _uvarint(buf, pos + 4)
            records = None
            if size:
                if pos + size - 1 > end:
                    raise _Odd
                records = buf[pos : pos + size - 1]
                pos += size - 1
            if buf[pos]:
                raise _Odd  # tagged fields
            pos += 1
            parts.append(ProducePartition(index, records))
        if buf[pos]:
            raise _Odd
        pos += 1
        topics.append(ProduceTopic(name, parts))
    if buf[pos] or pos + 1 != end:
        raise _Odd
    return ProduceRequest(txn_id, acks, timeout, topics, version)
