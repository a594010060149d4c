"""Bug 3 of issue 11: requests over 8 MiB hung their connection (back-pressure counted the
incomplete frame, and only a complete frame resumed reading). Large requests are answered, or
refused with Kafka's error when over a limit, never left hanging."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker import Broker
from protocol import records as r
from protocol.errors import ErrorCode
from tests.support import data as d
from tests.support import groups as g
from tests.support.raw_client import RawClient

MIB = 1024 * 1024


def big_batch(size: int) -> bytes:
    return bytes(r.build_batch([(b"k", bytes(size))]))


async def test_20_mb_produce_batch_over_max_message_bytes_is_refused_message_too_large(broker: Broker, raw: Callable[..., Any]) -> None:
    # Kafka: a batch over the topic's max.message.bytes is a RecordTooLargeException, MESSAGE_TOO_LARGE (10).
    broker.topics.create("big", 1)
    client: RawClient = await raw()
    res = d.produce_result(await client.request(d.produce("big", 0, big_batch(20 * MIB)), timeout=30))
    assert res.error_code == ErrorCode.MESSAGE_TOO_LARGE
    # The connection goes on serving.
    assert d.produce_result(await client.request(d.produce("big", 0, d.batch(2)))).base_offset == 0


async def test_20_mb_produce_batch_within_the_topic_limit_is_appended(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("big", 1, {"max.message.bytes": str(30 * MIB)})
    client: RawClient = await raw()
    batch = big_batch(20 * MIB)
    res = d.produce_result(await client.request(d.produce("big", 0, batch), timeout=30))
    assert res.error_code == 0 and res.base_offset == 0
    log = broker.logs.get("big", 0)
    assert log is not None and log.log_end_offset == 1 and log.size_bytes == len(batch)
    fetched = await client.request(d.fetch([("big", 0, 0)], partition_max_bytes=1024), timeout=30)
    assert d.fetched_offsets(fetched.responses[0].partitions[0]) == [0]


async def test_50_mb_join_group_is_answered(broker: Broker, raw: Callable[..., Any]) -> None:
    # 50 MB of protocol metadata cannot fit the group's metadata record in __consumer_offsets
    # (max.message.bytes): answered UNKNOWN_SERVER_ERROR, as Kafka maps a too-large record (GE-3).
    client: RawClient = await raw()
    metadata = g.subscription(["t"], user_data=bytes(50 * MIB))
    res = await client.request(g.join_request("big-group", "", version=3, protocols=[("range", metadata)]), timeout=60)
    assert res.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    # The group is untouched and the connection still serves a normal join.
    ok = await g.join(client, "big-group", "", version=3)
    assert ok.error_code == 0 and ok.leader == ok.member_id
