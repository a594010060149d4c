"""Record batches: build, validate, patch, iterate; cross-checked against kafka-python's codec."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol import records as r

keys = st.one_of(st.none(), st.binary(max_size=300))


@given(st.lists(st.tuples(keys, keys), min_size=1, max_size=40), st.integers(0, 2**40))
def test_built_batch_is_read_back_by_kafka_python(items: list[tuple[bytes | None, bytes | None]], base: int) -> None:
    batch = r.build_batch(items, base_offset=base, timestamp_ms=1_700_000_000_000)
    header = r.validate_batch(batch)
    assert header.record_count == len(items) and header.last_offset == base + len(items) - 1
    theirs = DefaultRecordBatch(bytes(batch))
    assert theirs.validate_crc()
    assert [(rec.offset, rec.key, rec.value) for rec in theirs] == [(base + i, k, v) for i, (k, v) in enumerate(items)]
    assert [(rec.offset, rec.key, rec.value) for rec in r.iter_records(batch)] == [(base + i, k, v) for i, (k, v) in enumerate(items)]
    assert list(r.iter_key_values(batch, 0, header)) == [(base + i, k, v) for i, (k, v) in enumerate(items)]
    assert r.key_values(batch, 0, header) == [(base + i, k, v) for i, (k, v) in enumerate(items)]
    assert r.key_values(b"pad" + bytes(batch), 3, header) == [(base + i, k, v) for i, (k, v) in enumerate(items)]


def test_kafka_python_batches_with_headers_iterate() -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=0, producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20
    )
    builder.append(0, timestamp=1000, key=b"k", value=b"v", headers=[("h1", b"x"), ("h2", None)])
    builder.append(1, timestamp=1005, key=None, value=b"v2", headers=[])
    batch = bytearray(builder.build())
    header = r.validate_batch(batch)
    recs = list(r.iter_records(batch))
    assert [(x.offset, x.timestamp, x.key, x.value, x.headers) for x in recs] == [
        (0, 1000, b"k", b"v", (("h1", b"x"), ("h2", None))),
        (1, 1005, None, b"v2", ()),
    ]
    assert list(r.iter_key_values(batch, 0, header)) == [(0, b"k", b"v"), (1, None, b"v2")]
    assert r.key_values(batch, 0, header) == [(0, b"k", b"v"), (1, None, b"v2")]


def test_patch_base_offset_keeps_crc_valid() -> None:
    batch = r.build_batch([(b"a", b"b")])
    r.patch_base_offset(batch, 0, 12345)
    assert r.validate_batch(batch).base_offset == 12345


def test_corrupt_crc_and_bad_magic_are_rejected() -> None:
    batch = r.build_batch([(b"a", b"b")])
    batch[-1] ^= 0xFF
    with pytest.raises(r.InvalidBatch, match="CRC"):
        r.validate_batch(batch)
    batch = r.build_batch([(b"a", b"b")])
    batch[r.MAGIC_OFFSET] = 1
    with pytest.raises(r.InvalidBatch) as info:
        r.validate_batch(batch)
    assert info.value.kind == "magic"


def test_log_append_time_sets_bit_timestamp_and_crc() -> None:
    batch = r.build_batch([(b"a", b"b")], timestamp_ms=5)
    r.set_log_append_time(batch, 0, 99)
    header = r.validate_batch(batch)
    assert header.attributes & r.TIMESTAMP_TYPE_BIT and header.max_timestamp == 99


def test_set_max_timestamp_clears_the_log_append_time_bit_and_sets_the_crc() -> None:
    batch = r.build_batch([(b"a", b"b")], timestamp_ms=5, attributes=r.TIMESTAMP_TYPE_BIT)
    r.set_max_timestamp(batch, 0, 77)
    header = r.validate_batch(batch)
    assert not header.attributes & r.TIMESTAMP_TYPE_BIT and header.max_timestamp == 77


def _records(*fields: tuple[int, bytes | None, bytes | None]) -> bytes:
    out = bytearray()
    for i, (delta, key, value) in enumerate(fields):
        r.encode_record(out, i, delta, key, value, [("h", b"x")] if i == 0 else [])
    return bytes(out)


def test_records_max_timestamp_reads_every_record() -> None:
    body = _records((0, b"k", b"v"), (-7, None, None), (30, b"k", bytes(500)), (2, b"", b""))
    assert r.records_max_timestamp_py(body, 0, len(body), 4, 1000) == 1030
    # -1 at least, as Kafka's LogValidator starts from -1; timestamps wrap as Java's long does.
    early = _records((-10, b"k", b"v"))
    assert r.records_max_timestamp_py(early, 0, len(early), 1, 3) == -1
    assert r.records_max_timestamp_py(early, 0, len(early), 1, -(2**63) + 5) == 2**63 - 5


@pytest.mark.parametrize(
    ("body", "count", "why"),
    [
        (_records((0, b"k", b"v")) + b"\x00", 1, "records still remaining"),
        (_records((0, b"k", b"v")), 2, "Invalid record size"),
        (_records((0, b"k", b"v"))[:-1], 1, "Invalid record size"),
        (b"\x0c\x00\x00\x00\x0akv", 1, "Found invalid record structure"),  # a 5-byte key in a 6-byte record
        (b"\x10\x00\x00\x00\x02k\x02v\x01", 1, "invalid number of record headers"),  # -1 headers
        (b"\x12\x00\x00\x00\x02k\x02v\x00\x00", 1, "do not fill it"),  # a byte left inside the record
    ],
    ids=["trailing", "count-too-high", "cut", "key-overruns", "negative-headers", "record-not-filled"],
)
def test_records_max_timestamp_refuses_records_that_do_not_fill_the_batch(body: bytes, count: int, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        r.records_max_timestamp_py(body, 0, len(body), count, 0)
    with pytest.raises(r.InvalidBatch, match=why) as info:
        r.records_max_timestamp(body, 0, len(body), count, 0)
    assert info.value.kind == "record"


def test_iter_batches_stops_at_partial_tail() -> None:
    a, b = r.build_batch([(b"a", b"1")]), r.build_batch([(b"b", b"2")], base_offset=1)
    buf = bytes(a + b)
    assert [h.base_offset for _, h in r.iter_batches(buf)] == [0, 1]
    assert [h.base_offset for _, h in r.iter_batches(buf[:-3])] == [0]


def test_control_batch_marker() -> None:
    batch = r.build_control_batch(True, producer_id=7, producer_epoch=1)
    header = r.validate_batch(batch)
    assert header.is_control and header.is_transactional and header.producer_id == 7
    (rec,) = r.iter_records(batch)
    assert r.control_record_type(rec.key) == 1
