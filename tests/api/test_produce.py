"""Produce over the wire: offsets, validation before any append, idempotence, acks, LogAppendTime."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from broker import Broker, Config
from protocol import records as r
from protocol.errors import ErrorCode
from tests.support import data as d
from tests.support.raw_client import RawClient


def log_end(broker: Broker, topic: str, partition: int = 0) -> int:
    log = broker.logs.get(topic, partition)
    assert log is not None
    return log.log_end_offset


async def test_offsets_are_assigned_consecutively(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 2)
    client: RawClient = await raw()
    for version in (3, 5, 8, 9, 11):
        res = d.produce_result(await client.request(d.produce("t", 1, d.batch(3), version=version)))
        assert res.error_code == 0 and res.log_append_time_ms == -1
        if version >= 5:
            assert res.log_start_offset == 0
    assert log_end(broker, "t", 1) == 15 and log_end(broker, "t", 0) == 0
    fetched = await client.request(d.fetch([("t", 1, 0)]))
    assert d.fetched_offsets(fetched.responses[0].partitions[0]) == list(range(15))


async def test_resent_batch_is_not_appended_twice(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("idem", 1)
    client: RawClient = await raw()
    init = await client.request(d.init_producer_id())
    pid, epoch = init.producer_id, init.producer_epoch
    first = d.batch(2, producer_id=pid, producer_epoch=epoch, base_sequence=0)
    second = d.batch(3, producer_id=pid, producer_epoch=epoch, base_sequence=2)
    a = d.produce_result(await client.request(d.produce("idem", 0, first)))
    b = d.produce_result(await client.request(d.produce("idem", 0, second)))
    again = d.produce_result(await client.request(d.produce("idem", 0, first)))
    assert (a.base_offset, b.base_offset) == (0, 2)
    assert again.error_code == 0 and again.base_offset == 0
    assert log_end(broker, "idem") == 5
    gap = d.produce_result(await client.request(d.produce("idem", 0, d.batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=7))))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and gap.base_offset == -1 and gap.log_start_offset == 0
    bumped = d.batch(1, producer_id=pid, producer_epoch=epoch + 1, base_sequence=0)
    assert d.produce_result(await client.request(d.produce("idem", 0, bumped))).base_offset == 5
    old = d.produce_result(await client.request(d.produce("idem", 0, d.batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=5))))
    assert old.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log_end(broker, "idem") == 6


def corrupt(batch: bytes) -> bytes:
    data = bytearray(batch)
    data[-1] ^= 0x55
    return bytes(data)


def bad_count(batch: bytes) -> bytes:
    data = bytearray(r.build_batch([(b"a", b"1"), (b"b", b"2")]))
    data[23:27] = (5).to_bytes(4, "big")  # lastOffsetDelta 5 with 2 records
    data[17:21] = r.batch_crc(data, 0, len(data)).to_bytes(4, "big")
    return bytes(data)


def magic1(batch: bytes) -> bytes:
    data = bytearray(batch)
    data[r.MAGIC_OFFSET] = 1
    return bytes(data)


def control(batch: bytes) -> bytes:
    return bytes(r.build_control_batch(True, 5, 0))


@pytest.mark.parametrize(
    ("mangle", "error"),
    [
        (corrupt, ErrorCode.CORRUPT_MESSAGE),
        (bad_count, ErrorCode.INVALID_RECORD),
        (magic1, ErrorCode.INVALID_RECORD),
        (lambda b: b + b, ErrorCode.INVALID_RECORD),  # two batches
        (lambda b: b[:40], ErrorCode.INVALID_RECORD),  # no whole batch
        (lambda b: b"", ErrorCode.INVALID_RECORD),
        (control, ErrorCode.INVALID_RECORD),
        (lambda b: (7).to_bytes(8, "big") + b[8:], ErrorCode.INVALID_RECORD),  # baseOffset must be 0
    ],
    ids=["crc", "offset-delta-vs-count", "magic-1", "two-batches", "partial", "empty", "control", "base-offset"],
)
async def test_invalid_batch_is_rejected_and_nothing_appended(
    broker: Broker, raw: Callable[..., Any], mangle: Callable[[bytes], bytes], error: ErrorCode
) -> None:
    broker.topics.create("v", 1)
    client: RawClient = await raw()
    d.produce_result(await client.request(d.produce("v", 0, d.batch(2))))
    # (a transactional id, so that control batches reach the log's own check)
    res = d.produce_result(await client.request(d.produce("v", 0, mangle(d.batch(2)), transactional_id="tx")))
    assert res.error_code == error and res.base_offset == -1
    assert log_end(broker, "v") == 2
    assert d.produce_result(await client.request(d.produce("v", 0, d.batch(1)))).base_offset == 2


async def test_oversized_batch_gets_message_too_large(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("big", 1, {"max.message.bytes": "2000"})
    client: RawClient = await raw()
    res = d.produce_result(await client.request(d.produce("big", 0, d.batch(1, value=b"x" * 3000))))
    assert res.error_code == ErrorCode.MESSAGE_TOO_LARGE and res.log_start_offset == -1
    assert log_end(broker, "big") == 0
    assert d.produce_result(await client.request(d.produce("big", 0, d.batch(1, value=b"x" * 1000)))).error_code == 0


async def test_zstd_needs_produce_v7(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("z", 1)
    client: RawClient = await raw()
    zstd_attrs = d.batch(1, attributes=4)  # only the attribute is read before the version check
    res = d.produce_result(await client.request(d.produce("z", 0, zstd_attrs, version=6)))
    assert res.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert log_end(broker, "z") == 0


async def test_compacted_topic_rejects_null_keys_per_record(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("compacted", 1, {"cleanup.policy": "compact"})
    client: RawClient = await raw()
    batch = bytes(r.build_batch([(b"k", b"1"), (None, b"2")]))
    res = d.produce_result(await client.request(d.produce("compacted", 0, batch, version=9)))
    assert res.error_code == ErrorCode.INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in res.record_errors] == [
        (1, "Compacted topic cannot accept message without key in topic partition compacted-0")
    ]
    assert res.error_message.startswith("One or more records have been rejected due to 1 record errors")
    assert log_end(broker, "compacted") == 0


async def test_internal_topic_is_written_only_by_the_admin_client(broker: Broker, raw: Callable[..., Any]) -> None:
    client: RawClient = await raw()
    res = d.produce_result(await client.request(d.produce("__consumer_offsets", 0, d.batch(1))))
    assert res.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    admin: RawClient = await raw("__admin_client")
    assert d.produce_result(await admin.request(d.produce("__consumer_offsets", 0, d.batch(1)))).error_code == 0


async def test_invalid_acks_and_unknown_partition(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("a", 1)
    client: RawClient = await raw()
    assert d.produce_result(await client.request(d.produce("a", 0, d.batch(1), acks=2))).error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert d.produce_result(await client.request(d.produce("a", 3, d.batch(1)))).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert log_end(broker, "a") == 0


async def test_acks_0_gets_no_answer_and_an_error_closes_the_connection(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("quiet", 1)
    client: RawClient = await raw()
    await client.send_raw(_framed(d.produce("quiet", 0, d.batch(1), acks=0)))
    # The next request's answer is the first to come back: acks=0 has none.
    md = await client.request(d.list_offsets("quiet", 0, -1))
    assert md.topics[0].partitions[0].offset == 1
    other: RawClient = await raw()
    await other.send_raw(_framed(d.produce("quiet", 0, corrupt(d.batch(1)), acks=0)))
    assert await other.wait_closed_by_peer()
    assert log_end(broker, "quiet") == 1


def _framed(request: Any) -> bytes:
    request.with_header(correlation_id=1000, client_id="raw")
    return bytes(request.encode(header=True, framed=True))


async def test_log_append_time_topic_is_stamped(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("lat", 1, {"message.timestamp.type": "LogAppendTime"})
    client: RawClient = await raw()
    res = d.produce_result(await client.request(d.produce("lat", 0, d.batch(2, timestamp_ms=1000))))
    assert res.log_append_time_ms > 1_600_000_000_000
    stored = (await client.request(d.fetch([("lat", 0, 0)]))).responses[0].partitions[0].records
    header = r.validate_batch(stored)
    assert header.attributes & r.TIMESTAMP_TYPE_BIT and header.max_timestamp == res.log_append_time_ms


async def test_unknown_topic_is_auto_created_or_refused(make_config: Callable[..., Config]) -> None:
    async with Broker(make_config(default_partitions=2)) as on:
        client = await RawClient.connect(on.bootstrap)
        res = d.produce_result(await client.request(d.produce("fresh", 1, d.batch(1))))
        assert res.error_code == 0 and on.topics.get("fresh") is not None
        await client.close()
    async with Broker(make_config(auto_create_topics=False)) as off:
        client = await RawClient.connect(off.bootstrap)
        res = d.produce_result(await client.request(d.produce("absent", 0, d.batch(1))))
        assert res.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and off.topics.get("absent") is None
        await client.close()


async def test_transactional_records_need_a_transactional_id(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("tx", 1)
    client: RawClient = await raw()
    txn = d.batch(1, producer_id=1, producer_epoch=0, base_sequence=0, attributes=r.TRANSACTIONAL_BIT)
    res = d.produce_result(await client.request(d.produce("tx", 0, txn)))
    assert res.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert log_end(broker, "tx") == 0


async def test_fsync_always_answers_after_the_group_commit(make_config: Callable[..., Config]) -> None:
    async with Broker(make_config(fsync="always")) as b:
        b.topics.create("durable", 3)
        client = await RawClient.connect(b.bootstrap)
        futures = [client.send(d.produce("durable", p % 3, d.batch(2))) for p in range(9)]
        results = [d.produce_result(await f) for f in futures]
        assert all(res.error_code == 0 for res in results)
        for p in range(3):
            log = b.logs.get("durable", p)
            assert log is not None and log.recovery_point == log.log_end_offset == 6
        await client.close()


async def test_timestamps_out_of_range_are_rejected_per_record(broker: Broker, raw: Callable[..., Any]) -> None:
    import time

    broker.topics.create("ts", 1, {"message.timestamp.before.max.ms": "60000"})
    client: RawClient = await raw()
    now = int(time.time() * 1000)
    body = bytearray()
    for i, ts in enumerate([now, now - 120_000, now + 7_200_000]):  # fine, too old, too far ahead (default 1 h)
        r.encode_record(body, i, ts - now, b"k", b"v")
    batch = bytes(r._assemble(body, 3, 2, now, now + 7_200_000, 0, -1, -1, -1, 0, -1))
    res = d.produce_result(await client.request(d.produce("ts", 0, batch)))
    assert res.error_code == ErrorCode.INVALID_TIMESTAMP
    assert res.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in res.record_errors] == [1, 2]
    assert "is out of range. The timestamp should be within" in res.record_errors[0].batch_index_error_message
    assert log_end(broker, "ts") == 0
    broker.topics.create("lat2", 1, {"message.timestamp.type": "LogAppendTime"})
    claims = d.batch(2, attributes=r.TIMESTAMP_TYPE_BIT)
    res = d.produce_result(await client.request(d.produce("lat2", 0, claims)))
    assert res.error_code == ErrorCode.INVALID_TIMESTAMP and [e.batch_index for e in res.record_errors] == [0, 1]


async def test_large_batches_are_stored_byte_for_byte_whole_frame_or_pipelined(broker: Broker, raw: Callable[..., Any]) -> None:
    """A Produce frame of 64 KiB or more that fills the read buffer is handed over, not copied,
    and its batch written as the patched head plus the rest; pipelined frames take the copying
    path. Both store exactly the client's bytes apart from the base offset."""
    broker.topics.create("big", 1)
    client: RawClient = await raw()
    sent = [r.build_batch([(b"k%d" % i, bytes([n]) * 1024) for i in range(100 + n)], timestamp_ms=1_700_000_000_000) for n in range(3)]
    assert all(len(b) > 100 * 1024 for b in sent)
    first = d.produce_result(await client.request(d.produce("big", 0, bytes(sent[0]))))
    assert (first.error_code, first.base_offset) == (0, 0)
    # Two at once: the second frame's bytes arrive behind the first's in the same buffer.
    both = await asyncio.gather(*(client.request(d.produce("big", 0, bytes(b))) for b in sent[1:]))
    assert [d.produce_result(x).base_offset for x in both] == [100, 201]
    log = broker.logs.get("big", 0)
    assert log is not None
    stored = bytes(log.read(0, 10 * 1024 * 1024) or b"")
    expected = b""
    for base, batch in zip((0, 100, 201), sent, strict=True):
        batch = bytearray(batch)
        batch[0:8] = base.to_bytes(8, "big")
        expected += bytes(batch)
    assert stored == expected
    assert [h.base_offset for _p, h in r.iter_batches(memoryview(stored))] == [0, 100, 201]
