"""TxnOffsetCommit and transactional offsets: spec rules TX-1..TX-4, OF-5 and RL-2, through
the wire with a transaction coordinator (AddOffsetsToTxn, EndTxn), and across a restart.
Not covered: TX-1's authorization (no authorizer) and TRANSACTION_ABORTABLE (Transaction V2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker import Broker
from tests.support import groups as g
from tests.support.coordinator import (
    NONE,
    committed,
    create_topic,
    fetch_group,
    form_group,
    groups_on_partition,
    ready_client,
    serving,
)
from tests.support.raw_client import RawClient
from tests.support.txn import Producer
from tests.support.waiting import async_wait_until

INVALID_GROUP_ID = 24
ILLEGAL_GENERATION = 22
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
UNKNOWN_MEMBER_ID = 25
OFFSET_METADATA_TOO_LARGE = 12
UNSTABLE_OFFSET_COMMIT = 88


async def _producer(broker: Broker, client: RawClient, tid: str, group: str) -> Producer:
    assert broker.txn is not None
    await async_wait_until(lambda: broker.txn.all_loaded, message="transaction coordinator loaded")  # type: ignore[union-attr]
    p = Producer(client, tid)
    assert (await p.init()).error_code == 0
    assert await p.add_offsets(group) == NONE
    return p


async def _setup(broker: Broker, raw: Any) -> RawClient:
    create_topic(broker, "t", 3)
    return await ready_client(raw)


# -- TX-1 --------------------------------------------------------------------------------------


async def test_TX_1_group_id_and_unknown_partitions(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    p = await _producer(broker, client, "tx1", "tx1-group")
    # (a null group id is not even decoded: the field is not nullable, and the connection closes)
    assert await p.commit_offsets("", {("t", 0): 1}) == {("t", 0): INVALID_GROUP_ID}
    assert await p.commit_offsets("tx1-group", {("t", 0): 1, ("t", 9): 1, ("nope", 0): 1}) == {
        ("t", 0): NONE,
        ("t", 9): UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION,
    }


# -- TX-2 --------------------------------------------------------------------------------------


async def test_TX_2_validation_against_the_group(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    p = await _producer(broker, client, "tx2", "tx2-absent")
    assert await p.commit_offsets("tx2-absent", {("t", 0): 1}, generation=3, member_id="m") == {("t", 0): ILLEGAL_GENERATION}
    assert await p.commit_offsets("tx2-absent", {("t", 0): 1}) == {("t", 0): NONE}  # generation -1: a simple group
    members = await form_group(raw, "tx2-live", 1, topics=["t"])
    q = await _producer(broker, client, "tx2b", "tx2-live")
    member = members[0]
    # Without member info a transactional commit is accepted on a non-empty group (unlike OC-4).
    assert await q.commit_offsets("tx2-live", {("t", 1): 2}) == {("t", 1): NONE}
    assert await q.commit_offsets("tx2-live", {("t", 1): 2}, generation=member.generation + 1, member_id=member.member_id) == {
        ("t", 1): ILLEGAL_GENERATION
    }
    assert await q.commit_offsets("tx2-live", {("t", 1): 2}, generation=member.generation, member_id="stranger") == {
        ("t", 1): UNKNOWN_MEMBER_ID
    }
    assert await q.commit_offsets("tx2-live", {("t", 1): 3}, generation=member.generation, member_id=member.member_id) == {("t", 1): NONE}


# -- TX-3 --------------------------------------------------------------------------------------


async def test_TX_3_the_transaction_coordinator_verifies_the_producer(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    assert broker.txn is not None
    await async_wait_until(lambda: broker.txn.all_loaded, message="loaded")  # type: ignore[union-attr]
    p = Producer(client, "tx3")
    assert (await p.init()).error_code == 0
    # The group's __consumer_offsets partition was not added (no AddOffsetsToTxn).
    assert await p.commit_offsets("tx3-group", {("t", 0): 1}) == {("t", 0): INVALID_TXN_STATE}
    assert await p.add_offsets("tx3-group") == NONE
    stale = Producer(client, "tx3", pid=p.pid, epoch=p.epoch - 1 if p.epoch else p.epoch + 1, seq={})
    assert await stale.commit_offsets("tx3-group", {("t", 0): 1}) == {("t", 0): INVALID_PRODUCER_EPOCH}
    stranger = Producer(client, "tx3", pid=p.pid + 77, epoch=p.epoch, seq={})
    assert await stranger.commit_offsets("tx3-group", {("t", 0): 1}) == {("t", 0): INVALID_PRODUCER_ID_MAPPING}
    assert await p.commit_offsets("tx3-group", {("t", 0): 1}) == {("t", 0): NONE}


# -- TX-4 and OF-5 -------------------------------------------------------------------------------


async def test_TX_4_pending_until_commit_discarded_on_abort(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "tx4", {("t", 0): 5}) == {("t", 0): NONE}
    p = await _producer(broker, client, "tx4", "tx4")
    assert await p.commit_offsets("tx4", {("t", 0): 50, ("t", 1): 60}, metadata="m") == {("t", 0): NONE, ("t", 1): NONE}
    assert await committed(client, "tx4") == {("t", 0): 5}  # pending offsets are invisible
    assert await p.end(commit=True) == NONE
    assert await committed(client, "tx4") == {("t", 0): 50, ("t", 1): 60}
    assert await p.add_offsets("tx4") == NONE
    assert await p.commit_offsets("tx4", {("t", 0): 99}) == {("t", 0): NONE}
    assert await p.end(commit=False) == NONE
    assert await committed(client, "tx4") == {("t", 0): 50, ("t", 1): 60}
    too_long = "x" * 4097
    assert await p.add_offsets("tx4") == NONE
    assert await p.commit_offsets("tx4", {("t", 2): 1}, metadata=too_long) == {("t", 2): OFFSET_METADATA_TOO_LARGE}


async def test_TX_4_a_later_plain_commit_wins_over_the_transaction(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    p = await _producer(broker, client, "tx4b", "tx4b")
    assert await p.commit_offsets("tx4b", {("t", 0): 10, ("t", 1): 11}) == {("t", 0): NONE, ("t", 1): NONE}
    assert await g.commit(client, "tx4b", {("t", 0): 7}) == {("t", 0): NONE}
    assert await p.end(commit=True) == NONE
    assert await committed(client, "tx4b") == {("t", 0): 7, ("t", 1): 11}


async def test_OF_5_require_stable_sees_the_open_transaction(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "of5-live", {("t", 0): 5, ("t", 1): 6}) == {("t", 0): NONE, ("t", 1): NONE}
    p = await _producer(broker, client, "of5", "of5-live")
    assert await p.commit_offsets("of5-live", {("t", 0): 50}) == {("t", 0): NONE}
    for version in (7, 8, 9):
        stable = await fetch_group(client, "of5-live", {"t": [0, 1]}, version=version, require_stable=True)
        assert stable.rows == {("t", 0): (-1, -1, "", UNSTABLE_OFFSET_COMMIT), ("t", 1): (6, -1, "", NONE)}
        loose = await fetch_group(client, "of5-live", {"t": [0, 1]}, version=version)
        assert loose.rows == {("t", 0): (5, -1, "", NONE), ("t", 1): (6, -1, "", NONE)}
    assert await p.end(commit=True) == NONE
    stable = await fetch_group(client, "of5-live", {"t": [0]}, version=8, require_stable=True)
    assert stable.rows == {("t", 0): (50, -1, "", NONE)}


# -- RL-2 --------------------------------------------------------------------------------------


async def test_RL_2_markers_written_live_replay_the_same_at_load(make_config: Callable[..., Any]) -> None:
    async with serving(make_config()) as served:
        create_topic(served.broker, "t", 3)
        client = await served.ready()
        p = await _producer(served.broker, client, "rl2", "rl2-c")
        assert await p.commit_offsets("rl2-c", {("t", 0): 3}) == {("t", 0): NONE}
        assert await p.end(commit=True) == NONE
        assert await p.add_offsets("rl2-a") == NONE
        assert await p.commit_offsets("rl2-a", {("t", 0): 4}) == {("t", 0): NONE}
        assert await p.end(commit=False) == NONE
        assert await p.add_offsets("rl2-open") == NONE
        assert await p.commit_offsets("rl2-open", {("t", 1): 9}) == {("t", 0 + 1): NONE}
        before = {grp: await committed(client, grp) for grp in ("rl2-c", "rl2-a", "rl2-open")}
    async with serving(make_config()) as served:
        client = await served.ready()
        after = {grp: await committed(client, grp) for grp in ("rl2-c", "rl2-a", "rl2-open")}
        assert after == before == {"rl2-c": {("t", 0): 3}, "rl2-a": {}, "rl2-open": {}}
        stable = await fetch_group(client, "rl2-open", {"t": [1]}, version=8, require_stable=True)
        assert stable.rows == {("t", 1): (-1, -1, "", UNSTABLE_OFFSET_COMMIT)}


# -- compaction (RC-2 with transactions) ---------------------------------------------------------


async def test_compaction_never_lets_an_aborted_offset_hide_the_committed_one(make_config: Callable[..., Any]) -> None:
    config = make_config(offsets_topic_segment_bytes=1024)
    async with serving(config) as served:
        broker = served.broker
        create_topic(broker, "t", 1)
        client = await served.ready()
        assert await g.commit(client, "cmp", {("t", 0): 5}) == {("t", 0): NONE}
        p = await _producer(broker, client, "cmp-tx", "cmp")
        assert await p.commit_offsets("cmp", {("t", 0): 99}) == {("t", 0): NONE}
        assert await p.end(commit=False) == NONE
        partition = broker.coordinator.partition_for("cmp")  # type: ignore[union-attr]
        fillers = groups_on_partition(partition, 5, 40, "filler")
        for i, group in enumerate(fillers[:20]):  # roll segments past the aborted transaction (1 KiB each)
            assert await g.commit(client, group, {("t", 0): i}) == {("t", 0): NONE}
        assert await p.add_offsets("cmp") == NONE
        assert await p.commit_offsets("cmp", {("t", 0): 77}) == {("t", 0): NONE}  # still open: never cleaned
        for i, group in enumerate(fillers[20:]):
            assert await g.commit(client, group, {("t", 0): i}) == {("t", 0): NONE}
        plog = broker.logs.get("__consumer_offsets", partition)
        assert plog is not None and len(plog.segments) > 2
        before = plog.size_bytes
        await broker.logs.run_compaction(force=True)
        assert plog.size_bytes < before  # the aborted record is gone
        assert await committed(client, "cmp") == {("t", 0): 5}
    async with serving(config) as served:
        client = await served.ready()
        assert await committed(client, "cmp") == {("t", 0): 5}
        stable = await fetch_group(client, "cmp", {"t": [0]}, version=8, require_stable=True)
        assert stable.rows == {("t", 0): (-1, -1, "", UNSTABLE_OFFSET_COMMIT)}
