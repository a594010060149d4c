"""Fetch over the wire: long polls, byte limits, offsets reported, errors, sessionless answers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from broker import Broker
from broker.apis.fetch import parked_fetches
from protocol import records as r
from protocol.errors import ErrorCode
from tests.support import data as d
from tests.support.raw_client import RawClient
from tests.support.waiting import async_wait_until


async def parked(broker: Broker, count: int = 1) -> None:
    """Until the broker holds `count` Fetch requests parked (not a guess that a sleep was long enough)."""
    await async_wait_until(lambda: parked_fetches(broker) == count, timeout=10, message=f"{count} parked fetch(es)")


async def fill(client: RawClient, topic: str, partition: int, batches: int, records: int = 1, value: bytes = b"v") -> None:
    for _ in range(batches):
        res = d.produce_result(await client.request(d.produce(topic, partition, d.batch(records, value=value))))
        assert res.error_code == 0


@pytest.mark.parametrize("version", range(4, 17))
async def test_every_version_returns_stored_batches_and_offsets(broker: Broker, raw: Callable[..., Any], version: int) -> None:
    topic = broker.topics.create("t", 1)
    client: RawClient = await raw()
    await fill(client, "t", 0, 3, records=2)
    key = topic.topic_id if version >= 13 else "t"
    resp = await client.request(d.fetch([(key, 0, 2)], version=version), version=version)
    if version >= 7:
        assert resp.error_code == 0 and resp.session_id == 0  # sessionless
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 6
    assert part.last_stable_offset == 6
    if version >= 5:
        assert part.log_start_offset == 0
    assert part.aborted_transactions is None
    assert d.fetched_offsets(part) == [2, 3, 4, 5]
    log = broker.logs.get("t", 0)
    assert log is not None
    assert bytes(part.records) == bytes(log.read(2, 1 << 20) or b"")  # the stored bytes, as stored


async def test_long_poll_returns_at_once_when_a_produce_arrives(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("poll", 1)
    consumer: RawClient = await raw()
    producer: RawClient = await raw()
    started = time.monotonic()
    pending = consumer.send(d.fetch([("poll", 0, 0)], max_wait_ms=5000, min_bytes=1))
    await parked(broker)  # nothing to return yet
    assert not pending.done()
    produced_at = time.monotonic()
    await fill(producer, "poll", 0, 1)
    resp = await asyncio.wait_for(pending, 5)
    returned_at = time.monotonic()
    assert produced_at <= returned_at and returned_at - started < 2.0  # well before max_wait_ms
    assert d.fetched_offsets(resp.responses[0].partitions[0]) == [0]


async def test_min_bytes_waits_for_enough_data(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("mb", 2)
    consumer: RawClient = await raw()
    producer: RawClient = await raw()
    pending = consumer.send(d.fetch([("mb", 0, 0), ("mb", 1, 0)], max_wait_ms=10_000, min_bytes=500))
    await parked(broker)
    await fill(producer, "mb", 0, 1)  # ~70 bytes: not enough
    # The append was seen by the parked fetch (it counts bytes per append) and it stays parked.
    assert parked_fetches(broker) == 1 and not pending.done()
    await fill(producer, "mb", 1, 1, value=b"x" * 600)
    resp = await asyncio.wait_for(pending, 5)
    assert [d.fetched_offsets(p) for p in resp.responses[0].partitions] == [[0], [0]]


async def test_max_wait_answers_with_what_there_is(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("mw", 1)
    client: RawClient = await raw()
    await fill(client, "mw", 0, 1)
    resp = await client.request(d.fetch([("mw", 0, 0)], max_wait_ms=100, min_bytes=1 << 20))
    assert d.fetched_offsets(resp.responses[0].partitions[0]) == [0]
    empty = await client.request(d.fetch([("mw", 0, 1)], max_wait_ms=100))
    part = empty.responses[0].partitions[0]
    assert part.error_code == 0 and part.records in (b"", None) and part.high_watermark == 1


async def test_byte_limits_keep_whole_batches_and_the_first_batch_always_comes(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("lim", 3)
    client: RawClient = await raw()
    for p in range(3):
        await fill(client, "lim", p, 4, value=b"x" * 1000)
    size = len((await client.request(d.fetch([("lim", 0, 0)], partition_max_bytes=1))).responses[0].partitions[0].records)
    assert 1000 < size < 1200
    # partition_max_bytes smaller than one batch: the first partition still gets its first batch,
    # the others get nothing once data was returned (Kafka's minOneMessage rule).
    resp = await client.request(d.fetch([("lim", 0, 0), ("lim", 1, 0), ("lim", 2, 0)], partition_max_bytes=10))
    assert [d.fetched_offsets(p) for p in resp.responses[0].partitions] == [[0], [], []]
    # max_bytes spans partitions: whole batches until it is used up.
    resp = await client.request(d.fetch([("lim", 0, 0), ("lim", 1, 0), ("lim", 2, 0)], max_bytes=5 * size))
    assert [d.fetched_offsets(p) for p in resp.responses[0].partitions] == [[0, 1, 2, 3], [0], []]
    resp = await client.request(d.fetch([("lim", 0, 1)], partition_max_bytes=2 * size + 10))
    assert d.fetched_offsets(resp.responses[0].partitions[0]) == [1, 2]


async def test_offset_out_of_range(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("oor", 1)
    client: RawClient = await raw()
    await fill(client, "oor", 0, 3)
    for offset in (4, -1):
        part = (await client.request(d.fetch([("oor", 0, offset)]))).responses[0].partitions[0]
        assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert (part.high_watermark, part.last_stable_offset, part.log_start_offset) == (-1, -1, -1)
    log = broker.logs.get("oor", 0)
    assert log is not None
    log.delete_records(2)
    part = (await client.request(d.fetch([("oor", 0, 1)], max_wait_ms=5000))).responses[0].partitions[0]
    assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE  # answered at once, not parked


async def test_unknown_topics_and_partitions(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("known", 1)
    client: RawClient = await raw()
    resp = await client.request(d.fetch([("nope", 0, 0), ("known", 5, 0)], max_wait_ms=5000))
    assert [p.error_code for t in resp.responses for p in t.partitions] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2
    ghost = uuid.uuid4()
    resp = await client.request(d.fetch([(ghost, 0, 0)], version=13), version=13)
    assert resp.responses[0].topic_id == ghost
    assert resp.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


async def test_incremental_fetch_sessions_are_not_found(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("s", 1)
    client: RawClient = await raw()
    full = await client.request(d.fetch([("s", 0, 0)], session_id=0, session_epoch=0))
    assert full.error_code == 0 and full.session_id == 0
    inc = await client.request(d.fetch([("s", 0, 0)], session_id=77, session_epoch=1))
    assert inc.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and inc.responses == []


async def test_read_committed_reports_no_aborted_transactions(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("rc", 1)
    client: RawClient = await raw()
    await fill(client, "rc", 0, 1)
    part = (await client.request(d.fetch([("rc", 0, 0)], isolation_level=1))).responses[0].partitions[0]
    assert part.aborted_transactions == [] and d.fetched_offsets(part) == [0]


async def test_parked_fetch_wakes_when_its_topic_is_deleted(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("gone", 1)
    client: RawClient = await raw()
    pending = client.send(d.fetch([("gone", 0, 0)], max_wait_ms=10_000))
    await parked(broker)
    broker.topics.delete("gone")
    resp = await asyncio.wait_for(pending, 5)
    assert resp.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_fenced_and_unknown_leader_epochs(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("ep", 1)
    client: RawClient = await raw()
    req = d.fetch([("ep", 0, 0)], version=12)
    req.topics[0].partitions[0].current_leader_epoch = 3
    assert (await client.request(req, version=12)).responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    req.topics[0].partitions[0].current_leader_epoch = 0
    assert (await client.request(req, version=12)).responses[0].partitions[0].error_code == 0


def test_fetch_response_encoding_matches_the_schema_codec() -> None:
    from kafka.protocol.consumer import FetchResponse

    from broker.apis.fetch import _Partition, _Topic, encode_response

    batch = bytes(r.build_batch([(b"k", b"v")]))
    tid = uuid.uuid4()
    for version in range(4, 17):
        topics = [_Topic("t", tid, [_Partition(0, 0, 0, -1, None, 0, 5, 5, 1, batch), _Partition(1, 0, 0, -1, None, 3)])]
        body = b"".join(bytes(x) for x in encode_response(version, 0, topics, False))
        ours = FetchResponse.decode(body, version=version)
        t = ours.responses[0]
        assert (t.topic_id if version >= 13 else t.topic) == (tid if version >= 13 else "t")
        p0, p1 = t.partitions
        assert (p0.partition_index, p0.high_watermark, bytes(p0.records)) == (0, 5, batch)
        assert (p1.partition_index, p1.error_code, p1.high_watermark) == (1, 3, -1)


async def test_a_zero_topic_id_is_answered_unknown_topic_id(broker: Broker, raw: Callable[..., Any]) -> None:
    """Found by the fuzzer (issue 11): the all-zero id decodes to None and its answer echoes the zero id."""
    client = await raw()
    resp = await client.request(d.fetch([(uuid.UUID(int=0), 0, 0)], version=13))
    [topic] = resp.responses
    assert topic.topic_id is None  # the zero UUID, as kafka-python decodes it
    assert [p.error_code for p in topic.partitions] == [ErrorCode.UNKNOWN_TOPIC_ID]
