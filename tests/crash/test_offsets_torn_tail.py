"""Issue 4: a torn tail in a `__consumer_offsets` partition is cut at start-up and its shard loads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from kafka.protocol.metadata import MetadataRequest

from broker.embed import BrokerProcess
from protocol import records as rec
from protocol.javahash import partition_for
from tests.support import groups as g
from tests.support.raw_client import RawClient

PARTITIONS = 5  # the broker_proc fixture's --offsets-partitions


async def _commit_all(bootstrap: str, group: str, values: list[int]) -> None:
    client = await RawClient.connect(bootstrap)
    try:
        await client.request(MetadataRequest[4](topics=[MetadataRequest.MetadataRequestTopic(name="t")], allow_auto_topic_creation=True))
        for value in values:
            assert await g.commit(client, group, {("t", 0): value}) == {("t", 0): 0}
    finally:
        await client.close()


async def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    client = await RawClient.connect(bootstrap)
    try:
        return await g.fetched_offsets(client, group, {"t": [0]})
    finally:
        await client.close()


def test_torn_offsets_tail_is_truncated_and_the_shard_loads(broker_proc: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    group = "torn-group"
    bp = broker_proc()
    bp.wait_for(lambda r: r.get("event") == "coordinator loaded")  # commits before it get COORDINATOR_LOAD_IN_PROGRESS
    asyncio.run(_commit_all(bp.bootstrap, group, [10, 20, 30]))
    bp.kill()
    partition = partition_for(group, PARTITIONS)
    segment = tmp_path / "data" / f"__consumer_offsets-{partition}" / "00000000000000000000.log"
    data = segment.read_bytes()
    (*_, (last_pos, last)) = list(rec.iter_batches(data))  # the batch of the commit of 30
    torn = data[: last_pos + last.size // 2] + b"\x07garbage after the tear"
    segment.write_bytes(torn)

    bp.start()
    warning = bp.wait_for(lambda r: r.get("event") == "truncated corrupt log tail")
    assert warning["partition"] == f"__consumer_offsets-{partition}"
    loaded = bp.wait_for(lambda r: r.get("event") == "coordinator loaded")
    assert loaded["failed"] == []
    assert segment.stat().st_size == last_pos
    # What remains is the last whole batch: the commit of 20 (the torn batch of 30 is dropped).
    assert asyncio.run(_committed(bp.bootstrap, group)) == {("t", 0): 20}
    asyncio.run(_commit_all(bp.bootstrap, group, [40]))
    assert asyncio.run(_committed(bp.bootstrap, group)) == {("t", 0): 40}
