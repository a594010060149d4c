"""Offset commits read in one burst are appended as one batch before any of them is answered;
a failed append answers none of them and reloads the shard, reverting what was applied."""

from __future__ import annotations

from typing import Any

from broker import Broker
from protocol import records as rec
from tests.support import groups as g
from tests.support.waiting import async_wait_until


def _batches(broker: Broker, group: str) -> list[rec.BatchHeader]:
    shard = broker.coordinator.shard_for(group)
    return [header for _, _, header in shard.log_.iter_batches()]


async def test_pipelined_commits_share_one_batch(raw: Any, broker: Broker) -> None:
    broker.topics.create("t", 1)
    client = await raw()
    before = len(_batches(broker, "burst"))
    frames = b""
    for i in range(10):
        request = g.commit_request("burst", {("t", 0): i})
        request.with_header(correlation_id=100 + i, client_id="burst")
        frames += bytes(request.encode(header=True, framed=True))
    await client.send_raw(frames)  # ten requests arrive together
    for _ in range(10):
        await client.read_frame()
    added = _batches(broker, "burst")[before:]
    assert sum(h.record_count for h in added) == 10
    assert len(added) < 10  # appended together, not one batch per request
    assert await g.fetched_offsets(client, "burst", {"t": [0]}) == {("t", 0): 9}


async def test_failed_batched_append_answers_nothing_and_reverts(raw: Any, broker: Broker) -> None:
    broker.topics.create("t", 1)
    client = await raw()
    assert await g.commit(client, "revert", {("t", 0): 5}) == {("t", 0): 0}
    shard = broker.coordinator.shard_for("revert")
    broker.faults.fail_appends(shard.service.topic_name, shard.partition, count=1)
    failing = await raw()
    pending = failing.send(g.commit_request("revert", {("t", 0): 9}))
    assert await failing.wait_closed_by_peer(), "an unappended commit must not be acknowledged"
    assert pending.done() and pending.exception() is not None

    async def reloaded() -> bool:
        try:
            return await g.fetched_offsets(client, "revert", {"t": [0]}) == {("t", 0): 5}
        except AssertionError:
            return False  # COORDINATOR_LOAD_IN_PROGRESS while the shard replays its log

    await async_wait_until(reloaded, message="the shard reloaded without the unappended commit")
