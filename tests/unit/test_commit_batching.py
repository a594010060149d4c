"""Offset commits read in one burst are appended as one batch before any of them is answered;
a failed append answers them with the mapped error (GE-3: a storage error is NOT_COORDINATOR,
bug 6 of issue 11) and reloads the shard, reverting what was applied."""

from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.consumer import OffsetCommitResponse

from broker import Broker
from broker.runtime.errors import AppendsFailed
from protocol import records as rec
from protocol.errors import ErrorCode
from tests.support import groups as g
from tests.support.waiting import async_wait_until


def _batches(broker: Broker, group: str) -> list[rec.BatchHeader]:
    shard = broker.coordinator.shard_for(group)
    return [header for _, _, header in shard.context.log.iter_batches()]


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


async def test_failed_batched_append_answers_not_coordinator_and_reverts(raw: Any, broker: Broker) -> None:
    broker.topics.create("t", 1)
    client = await raw()
    assert await g.commit(client, "revert", {("t", 0): 5}) == {("t", 0): 0}
    shard = broker.coordinator.shard_for("revert")
    other = next(grp for grp in (f"other-{i}" for i in range(100)) if broker.coordinator.shard_for(grp) is not shard)
    broker.faults.fail_appends(shard.service.topic_name, shard.partition, count=1)
    failing = await raw()
    frames = b""
    for i, (group, offset) in enumerate((("revert", 9), (other, 3))):
        request = g.commit_request(group, {("t", 0): offset})
        request.with_header(correlation_id=200 + i, client_id="burst")
        frames += bytes(request.encode(header=True, framed=True))
    await failing.send_raw(frames)  # one burst: one commit per shard, one shard's append fails
    answers = [OffsetCommitResponse.decode(await failing.read_frame(), version=8, header=True) for _ in range(2)]
    codes = [a.topics[0].partitions[0].error_code for a in answers]
    assert codes == [ErrorCode.NOT_COORDINATOR, 0], "the failed commit gets GE-3's error, the other its success"
    assert await g.commit(failing, other, {("t", 0): 4}) == {("t", 0): 0}  # the connection goes on

    async def reloaded() -> bool:
        try:
            return await g.fetched_offsets(client, "revert", {"t": [0]}) == {("t", 0): 5}
        except AssertionError:
            return False  # COORDINATOR_LOAD_IN_PROGRESS while the shard replays its log

    await async_wait_until(reloaded, message="the shard reloaded without the unappended commit")


def _same_shard_groups(broker: Broker, n: int) -> list[str]:
    shard = broker.coordinator.shard_for("turn-0")
    return [grp for grp in (f"turn-{i}" for i in range(1000)) if broker.coordinator.shard_for(grp) is shard][:n]


def _framed_commit(group: str, offset: int, corr: int) -> bytes:
    request = g.commit_request(group, {("t", 0): offset})
    request.with_header(correlation_id=corr, client_id="turn")
    return bytes(request.encode(header=True, framed=True))


async def test_two_connections_commits_in_one_turn_share_one_append(raw: Any, broker: Broker) -> None:
    """Commits read from two connections in one loop turn go to their shard as one batch, and
    neither is answered before it is written (turn.py)."""
    broker.topics.create("t", 1)
    a, b = await raw(), await raw()
    first, second = _same_shard_groups(broker, 2)
    turn = broker.coordinator.commit_turn
    before, appends = len(_batches(broker, first)), turn.appends
    # Written without yielding in between: both requests wait in their sockets for the broker's
    # next poll, which reads them in one turn.
    a.writer.write(_framed_commit(first, 7, 1))
    b.writer.write(_framed_commit(second, 8, 2))
    answers = [OffsetCommitResponse.decode(await c.read_frame(), version=8, header=True) for c in (a, b)]
    assert [x.topics[0].partitions[0].error_code for x in answers] == [0, 0]
    added = _batches(broker, first)[before:]
    assert [h.record_count for h in added] == [2], "one append holds both connections' commits"
    assert turn.appends - appends == 1
    assert await g.fetched_offsets(a, first, {"t": [0]}) == {("t", 0): 7}
    assert await g.fetched_offsets(b, second, {"t": [0]}) == {("t", 0): 8}


async def test_two_connections_waiting_on_one_failed_append_both_get_its_error(raw: Any, broker: Broker) -> None:
    """The answers of both connections depend on the one shared write: when it fails, neither
    claims success (GE-3: NOT_COORDINATOR), and neither commit survives the shard's reload."""
    broker.topics.create("t", 1)
    a, b = await raw(), await raw()
    first, second = _same_shard_groups(broker, 2)
    shard = broker.coordinator.shard_for(first)
    broker.faults.fail_appends(shard.service.topic_name, shard.partition, count=1)
    a.writer.write(_framed_commit(first, 7, 1))
    b.writer.write(_framed_commit(second, 8, 2))
    answers = [OffsetCommitResponse.decode(await c.read_frame(), version=8, header=True) for c in (a, b)]
    assert [x.topics[0].partitions[0].error_code for x in answers] == [ErrorCode.NOT_COORDINATOR] * 2

    async def reloaded() -> bool:
        try:
            return await g.fetched_offsets(a, first, {"t": [0]}) == {("t", 0): -1}
        except AssertionError:
            return False  # COORDINATOR_LOAD_IN_PROGRESS while the shard replays its log

    await async_wait_until(reloaded, message="the shard reloaded without either commit")
    assert await g.fetched_offsets(b, second, {"t": [0]}) == {("t", 0): -1}


async def test_commits_of_a_shard_unloaded_before_the_turn_ends_are_not_acknowledged(broker: Broker) -> None:
    """A shard unloaded between a commit and its turn's append (its topic deleted, the shard
    moved) cannot write the commit: the turn reports NOT_COORDINATOR for it, never success."""
    broker.topics.create("t", 1)
    coordinator = broker.coordinator
    await asyncio.wait_for(coordinator.loaded.wait(), 30)
    shard = coordinator.shard_for("unloaded")
    commit = ("t", (0, 5, -1, -1, None))
    codes, waiter = shard.commit_offsets("unloaded", -1, "", None, -1, 8, [commit], batched=True)
    assert codes == [ErrorCode.NONE] and waiter is None
    shard.context.unload()
    try:
        coordinator.flush_appends()
    except AppendsFailed as exc:
        assert exc.failed[shard].code == ErrorCode.NOT_COORDINATOR
    else:
        raise AssertionError("the turn claimed the unwritten commit was appended")
