"""Offset retention and expiry: spec rules OR-1..OR-5 (section 4.5).

The broker's wall clock (commit and state timestamps) is moved with `broker.clock.advance`; the
cleanup cycle runs every 50 ms (`offsets_retention_check_interval_ms`). To prove that an offset
did *not* expire, each test keeps a sentinel: a simple group on the same shard (same
`__consumer_offsets` partition, CO-1) whose offset must expire in the same pass. A shard's
cleanup covers all its groups in one pass (OR-1), so once the sentinel is gone the subject has
been judged at the advanced time.
Not covered: pending transactional offsets (no TxnOffsetCommit yet).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support import groups as g
from tests.support.coordinator import (
    NONE,
    Served,
    committed,
    create_topic,
    describe_one,
    form_group,
    groups_on_partition,
    listed,
    serving,
    wait_state,
)
from tests.support.offsets_log import group_records, offset_records, read_all_logs
from tests.support.waiting import async_wait_until

DAY_MINUTES = 1440
R = DAY_MINUTES * 60_000  # offsets.retention.minutes = 1 day, in ms
MINUTE = 60_000


def _config(make_config: Callable[..., Any]) -> Any:
    return make_config(offsets_retention_minutes=DAY_MINUTES, offsets_retention_check_interval_ms=50)


async def _setup(served: Served) -> Any:
    create_topic(served.broker, "t", 2)
    create_topic(served.broker, "u", 2)
    return await served.ready()


async def _commit(client: Any, group: str, offsets: dict[tuple[str, int], int], **kw: Any) -> None:
    assert await g.commit(client, group, offsets, **kw) == dict.fromkeys(offsets, NONE)


async def _gone(client: Any, group: str, tp: tuple[str, int]) -> None:
    """Wait until `group` has no committed offset for `tp` (expired by a cleanup pass)."""

    async def check() -> bool:
        return tp not in await committed(client, group, {tp[0]: [tp[1]]})

    await async_wait_until(check, timeout=10, message=f"offset {tp} of {group} to expire")


def _pair(name: str) -> tuple[str, str]:
    """A subject group and a sentinel group on the same shard (partition 1 of 5)."""
    subject, sentinel = groups_on_partition(1, 5, 2, name)
    return subject, sentinel


# -- OR-1 ------------------------------------------------------------------------------------------


async def test_OR_1_cleanup_runs_every_check_interval(make_config: Callable[..., Any]) -> None:
    async with serving(_config(make_config)) as served:
        client = await _setup(served)
        for round_ in range(2):
            await _commit(client, "or1", {("t", 0): 10 + round_})
            served.broker.clock.advance(R + MINUTE)
            # No request triggers it: the periodic pass expires the offset by itself.
            await _gone(client, "or1", ("t", 0))


# -- OR-2 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [2, 3, 4])
async def test_OR_2_explicit_expire_timestamp_wins(make_config: Callable[..., Any], version: int) -> None:
    async with serving(_config(make_config)) as served:
        client = await _setup(served)
        subject, sentinel = _pair("or2-expire")
        # An hour of retention (v2-4 RetentionTimeMs) expires long before the 1-day default...
        await _commit(client, subject, {("t", 0): 1}, version=version, retention_ms=3_600_000)
        await _commit(client, subject, {("t", 1): 2})  # v8: no expire timestamp
        served.broker.clock.advance(3_600_000 + MINUTE)
        await _gone(client, subject, ("t", 0))
        assert await committed(client, subject) == {("t", 1): 2}
        # ...and three days of it outlive the default.
        await _commit(client, subject, {("u", 0): 3}, version=version, retention_ms=3 * R)
        await _commit(client, sentinel, {("u", 0): 4})
        served.broker.clock.advance(R + MINUTE)
        await _gone(client, sentinel, ("u", 0))
        assert await committed(client, subject) == {("u", 0): 3}


async def test_OR_2_subscribed_topics_never_expire(make_config: Callable[..., Any]) -> None:
    async with serving(_config(make_config)) as served:
        client = await _setup(served)
        (m,) = await form_group(served.connect, "or2-sub", topics=["t"])
        await _commit(client, "or2-sub", {("t", 0): 1, ("u", 0): 2}, generation=m.generation, member_id=m.member_id)
        served.broker.clock.advance(3 * R)
        await _gone(client, "or2-sub", ("u", 0))  # not subscribed: base = commit time (OR-3)
        assert await committed(client, "or2-sub") == {("t", 0): 1}
        assert (await describe_one(client, "or2-sub")).group_state == "Stable"


# -- OR-3 ------------------------------------------------------------------------------------------


async def test_OR_3_simple_group_base_is_commit_time(make_config: Callable[..., Any]) -> None:
    async with serving(_config(make_config)) as served:
        client = await _setup(served)
        await _commit(client, "or3-simple", {("t", 0): 1})
        served.broker.clock.advance(R // 2)
        await _commit(client, "or3-simple", {("t", 1): 2})
        served.broker.clock.advance(R // 2 + MINUTE)
        await _gone(client, "or3-simple", ("t", 0))
        assert await committed(client, "or3-simple") == {("t", 1): 2}


async def test_OR_3_empty_group_base_is_the_time_it_became_empty(make_config: Callable[..., Any]) -> None:
    async with serving(_config(make_config)) as served:
        client = await _setup(served)
        subject, sentinel = _pair("or3-empty")
        (m,) = await form_group(served.connect, subject, topics=["t"])
        await _commit(client, subject, {("t", 0): 1}, generation=m.generation, member_id=m.member_id)
        await _commit(client, sentinel, {("t", 0): 2})
        served.broker.clock.advance(R // 2)
        assert (await g.leave(m.client, subject, [(m.member_id, None)])).error_code == NONE
        await wait_state(client, subject, "Empty")
        # A retention period after the commit, but not after the group became Empty.
        served.broker.clock.advance(R // 2 + MINUTE)
        await _gone(client, sentinel, ("t", 0))
        assert await committed(client, subject) == {("t", 0): 1}
        served.broker.clock.advance(R // 2)
        await _gone(client, subject, ("t", 0))


async def test_OR_3_stable_consumer_group_base_is_commit_time(make_config: Callable[..., Any]) -> None:
    async with serving(_config(make_config)) as served:
        client = await _setup(served)
        (m,) = await form_group(served.connect, "or3-stable", topics=["t"])
        member = {"generation": m.generation, "member_id": m.member_id}
        await _commit(client, "or3-stable", {("u", 0): 1}, **member)
        served.broker.clock.advance(R // 2)
        await _commit(client, "or3-stable", {("u", 1): 2}, **member)
        served.broker.clock.advance(R // 2 + MINUTE)
        await _gone(client, "or3-stable", ("u", 0))
        assert await committed(client, "or3-stable") == {("u", 1): 2}


@pytest.mark.parametrize("state", ["PreparingRebalance", "CompletingRebalance", "Stable-other-protocol", "Stable-unknown-subscription"])
async def test_OR_3_no_expiry_in_other_classic_states(make_config: Callable[..., Any], state: str) -> None:
    async with serving(_config(make_config)) as served:
        client = await _setup(served)
        subject, sentinel = _pair(f"or3-{state}")
        # Offsets committed while the group is still simple, then members arrive.
        await _commit(client, subject, {("u", 0): 1})
        kw: dict[str, Any] = {"topics": ["t"]}
        if state == "Stable-other-protocol":
            kw = {"protocol_type": "connect", "protocols": [("default", b"opaque")]}
        elif state == "Stable-unknown-subscription":
            kw = {"protocols": [("range", b"\x01")]}  # a consumer subscription that does not parse
        await form_group(served.connect, subject, sync=state != "CompletingRebalance", **kw)
        if state == "PreparingRebalance":
            newcomer = await served.connect("newcomer")
            first = await g.join(newcomer, subject, "")
            newcomer.send(g.join_request(subject, first.member_id))
        await wait_state(client, subject, state.split("-")[0])
        await _commit(client, sentinel, {("u", 0): 2})
        served.broker.clock.advance(3 * R)
        await _gone(client, sentinel, ("u", 0))
        assert await committed(client, subject) == {("u", 0): 1}


# -- OR-4 ------------------------------------------------------------------------------------------


async def test_OR_4_empty_group_without_offsets_is_deleted_at_next_cleanup(make_config: Callable[..., Any]) -> None:
    async with serving(_config(make_config)) as served:
        client = await _setup(served)
        (m,) = await form_group(served.connect, "or4-empty")
        assert (await g.leave(m.client, "or4-empty", [(m.member_id, None)])).error_code == NONE

        async def deleted() -> bool:
            return "or4-empty" not in await listed(client)

        await async_wait_until(deleted, timeout=10, message="the empty group to be deleted")
        assert (await describe_one(client, "or4-empty")).group_state == "Dead"
        # Its last record is the GroupMetadata tombstone (RF-5).
        assert group_records(read_all_logs(served.broker), "or4-empty")[-1] is None


async def test_OR_4_group_whose_offsets_all_expired_is_deleted(make_config: Callable[..., Any]) -> None:
    async with serving(_config(make_config)) as served:
        client = await _setup(served)
        await _commit(client, "or4-expired", {("t", 0): 1, ("u", 1): 2})
        served.broker.clock.advance(R + MINUTE)

        async def deleted() -> bool:
            return "or4-expired" not in await listed(client)

        await async_wait_until(deleted, timeout=10, message="the expired group to be deleted")
        records = read_all_logs(served.broker)
        tombstones = {(k.topic, k.partition) for k, v in offset_records(records, "or4-expired") if v is None}
        assert tombstones == {("t", 0), ("u", 1)}
        assert group_records(records, "or4-expired")[-1:] == [None]


async def test_OR_4_group_keeping_some_offsets_is_kept(make_config: Callable[..., Any]) -> None:
    async with serving(_config(make_config)) as served:
        client = await _setup(served)
        await _commit(client, "or4-partial", {("t", 0): 1})
        served.broker.clock.advance(R // 2)
        await _commit(client, "or4-partial", {("t", 1): 2})
        served.broker.clock.advance(R // 2 + MINUTE)
        await _gone(client, "or4-partial", ("t", 0))
        assert "or4-partial" in await listed(client)
        assert await committed(client, "or4-partial") == {("t", 1): 2}


async def test_OR_4_non_empty_group_is_kept_when_its_offsets_expire(make_config: Callable[..., Any]) -> None:
    async with serving(_config(make_config)) as served:
        client = await _setup(served)
        (m,) = await form_group(served.connect, "or4-stable", topics=["t"])
        await _commit(client, "or4-stable", {("u", 0): 1}, generation=m.generation, member_id=m.member_id)
        served.broker.clock.advance(R + MINUTE)
        await _gone(client, "or4-stable", ("u", 0))
        assert (await describe_one(client, "or4-stable")).group_state == "Stable"
        hb = await g.heartbeat(m.client, "or4-stable", m.member_id, m.generation)
        assert hb.error_code == NONE


# -- OR-5 ------------------------------------------------------------------------------------------


async def test_OR_5_deleting_a_topic_tombstones_its_offsets_at_once(make_config: Callable[..., Any]) -> None:
    # DeleteTopics is being built on another branch: the test deletes through the topic manager,
    # the path that API takes.
    async with serving(_config(make_config)) as served:
        client = await _setup(served)
        create_topic(served.broker, "doomed", 3)
        groups = ["or5-a", "or5-b", "or5-c", ""]  # several shards
        for group in groups:
            await _commit(client, group, {("doomed", 0): 1, ("doomed", 2): 2, ("t", 0): 3})
        served.broker.topics.delete("doomed")

        async def cleared() -> bool:
            for group in groups:
                if await committed(client, group) != {("t", 0): 3}:
                    return False
            return True

        # No clock movement: retention plays no part.
        await async_wait_until(cleared, timeout=10, message="offsets of the deleted topic to be removed")
        records = read_all_logs(served.broker)
        for group in groups:
            tombstones = {(k.topic, k.partition) for k, v in offset_records(records, group) if v is None}
            assert tombstones == {("doomed", 0), ("doomed", 2)}
