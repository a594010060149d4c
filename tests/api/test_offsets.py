"""ListOffsets, OffsetForLeaderEpoch, DeleteRecords and InitProducerId over the wire."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from broker import Broker, Config
from protocol import records as r
from protocol.errors import ErrorCode
from tests.support import data as d
from tests.support.raw_client import RawClient

T0 = 1_700_000_000_000


async def offsets_of(client: RawClient, topic: str, ts: int, version: int = 8, isolation_level: int = 0) -> Any:
    resp = await client.request(d.list_offsets(topic, 0, ts, version=version, isolation_level=isolation_level), version=version)
    return resp.topics[0].partitions[0]


async def test_list_offsets_earliest_latest_max_and_by_timestamp(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("lo", 1)
    client: RawClient = await raw()
    empty = await offsets_of(client, "lo", -1)
    assert (empty.error_code, empty.offset, empty.timestamp, empty.leader_epoch) == (0, 0, -1, 0)
    for i, ts in enumerate([T0, T0 + 100, T0 + 50, T0 + 300]):
        batch = r.build_batch([(b"k", b"%d" % i), (b"k", b"%d" % i)], timestamp_ms=ts)
        assert d.produce_result(await client.request(d.produce("lo", 0, bytes(batch)))).error_code == 0
    latest = await offsets_of(client, "lo", -1)
    assert (latest.offset, latest.timestamp) == (8, -1)
    assert (await offsets_of(client, "lo", -1, isolation_level=1)).offset == 8
    earliest = await offsets_of(client, "lo", -2)
    assert (earliest.offset, earliest.timestamp, earliest.leader_epoch) == (0, -1, 0)
    assert (await offsets_of(client, "lo", -4)).offset == 0
    biggest = await offsets_of(client, "lo", -3)
    assert (biggest.offset, biggest.timestamp) == (6, T0 + 300)
    found = await offsets_of(client, "lo", T0 + 60)
    assert (found.offset, found.timestamp) == (2, T0 + 100)
    assert (await offsets_of(client, "lo", T0)).offset == 0
    missing = await offsets_of(client, "lo", T0 + 301)
    assert (missing.error_code, missing.offset, missing.timestamp) == (0, -1, -1)
    old = await offsets_of(client, "lo", -1, version=1)
    assert old.offset == 8


async def test_list_offsets_errors(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("le", 1)
    client: RawClient = await raw()
    assert (await offsets_of(client, "le", -3, version=6)).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert (await offsets_of(client, "le", -4, version=7)).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert (await offsets_of(client, "nope", -1)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    req = d.list_offsets("le", 0, -1)
    req.topics[0].partitions.append(req.topics[0].partitions[0])
    resp = await client.request(req)
    assert [p.error_code for p in resp.topics[0].partitions] == [ErrorCode.INVALID_REQUEST] * 2
    req = d.list_offsets("le", 0, -1)
    req.topics[0].partitions[0].current_leader_epoch = 1
    assert (await client.request(req)).topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


async def test_offset_for_leader_epoch(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("ep", 1)
    client: RawClient = await raw()
    for _ in range(3):
        await client.request(d.produce("ep", 0, d.batch(2)))
    for version in (2, 3, 4):
        part = (await client.request(d.offset_for_leader_epoch("ep", 0, 0, version=version), version=version)).topics[0].partitions[0]
        assert (part.error_code, part.leader_epoch, part.end_offset) == (0, 0, 6)
    part = (await client.request(d.offset_for_leader_epoch("ep", 0, 5))).topics[0].partitions[0]
    assert (part.error_code, part.leader_epoch, part.end_offset) == (0, -1, -1)
    part = (await client.request(d.offset_for_leader_epoch("ep", 0, 0, current=2))).topics[0].partitions[0]
    assert part.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    part = (await client.request(d.offset_for_leader_epoch("nope", 0, 0))).topics[0].partitions[0]
    assert part.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_delete_records(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("dr", 1)
    broker.topics.create("dc", 1, {"cleanup.policy": "compact"})
    client: RawClient = await raw()
    for _ in range(5):
        await client.request(d.produce("dr", 0, d.batch(2)))
    for version in (0, 1, 2):
        part = (await client.request(d.delete_records("dr", 0, 3 + version, version=version), version=version)).topics[0].partitions[0]
        assert (part.error_code, part.low_watermark) == (0, 3 + version)
    assert (await offsets_of(client, "dr", -2)).offset == 5
    too_far = (await client.request(d.delete_records("dr", 0, 11))).topics[0].partitions[0]
    assert (too_far.error_code, too_far.low_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    hw = (await client.request(d.delete_records("dr", 0, -1))).topics[0].partitions[0]
    assert (hw.error_code, hw.low_watermark) == (0, 10)
    policy = (await client.request(d.delete_records("dc", 0, 0))).topics[0].partitions[0]
    assert policy.error_code == ErrorCode.POLICY_VIOLATION
    unknown = (await client.request(d.delete_records("nope", 0, 0))).topics[0].partitions[0]
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_init_producer_id(make_config: Callable[..., Config]) -> None:
    seen = set()
    for _ in range(2):  # ids stay unique across a restart
        async with Broker(make_config()) as b:
            client = await RawClient.connect(b.bootstrap)
            for version in range(6):
                resp = await client.request(d.init_producer_id(version=version), version=version)
                assert resp.error_code == 0 and resp.producer_epoch == 0 and resp.producer_id not in seen
                seen.add(resp.producer_id)
            # Re-init with the current id and epoch: like Kafka, a new id (idempotent producers bump epochs themselves).
            again = await client.request(d.init_producer_id(producer_id=resp.producer_id, epoch=0))
            assert again.error_code == 0 and again.producer_id not in seen
            seen.add(again.producer_id)
            bad = await client.request(d.init_producer_id(producer_id=5, epoch=-1))
            assert (bad.error_code, bad.producer_id, bad.producer_epoch) == (ErrorCode.INVALID_REQUEST, -1, -1)
            await client.close()


async def test_internal_partitions_reach_the_disk_with_their_first_write(make_config: Callable[..., Config]) -> None:
    """A fresh data dir holds no __consumer_offsets / __transaction_state partition directories
    (they are created in memory, made on disk by their first write); a commit makes its shard's,
    and a restart on the data dir serves it and still creates the others lazily."""
    from tests.support import groups as g
    from tests.support.coordinator import committed

    config = make_config()
    async with Broker(config) as b:
        root = b.datadir.path
        assert not [p for p in os.listdir(root) if p.startswith(("__consumer_offsets-", "__transaction_state-"))]
        b.topics.create("t", 1)
        await b.coordinator.loaded.wait()
        client = await RawClient.connect(b.bootstrap)
        resp = await client.request(g.commit_request("lazy-dirs", {("t", 0): 42}))
        assert resp.topics[0].partitions[0].error_code == 0
        shard = b.coordinator.partition_for("lazy-dirs")
        made = sorted(p for p in os.listdir(root) if p.startswith("__consumer_offsets-"))
        assert made == [f"__consumer_offsets-{shard}"]
        assert os.path.getsize(root / made[0] / "00000000000000000000.log") > 0
        await client.close()
    async with Broker(config) as b:
        await b.coordinator.loaded.wait()
        client = await RawClient.connect(b.bootstrap)
        assert await committed(client, "lazy-dirs") == {("t", 0): 42}
        assert sorted(p for p in os.listdir(b.datadir.path) if p.startswith("__consumer_offsets-")) == made
        await client.close()
