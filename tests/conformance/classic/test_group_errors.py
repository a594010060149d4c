"""Spec section 2 for the classic group APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): GE-1..GE-6.

kaflet is one broker that hosts every shard, so a shard is "loading" only for moments after
start and is never hosted elsewhere. To route requests to a loading, unhosted or stopped
coordinator the tests set the in-process broker's shard state (or the service's active flag),
the conditions GE-1 is about, and restore it afterwards. GE-7 (ACLs) does not apply: kaflet
has no authorizer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from broker.runtime.shard import ShardState
from tests.support.classic import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    LONG_MS,
    NONE,
    NOT_COORDINATOR,
    GroupEnv,
    Member,
    fail_writes,
    settle,
    stable_group,
)
from tests.support.groups import leave


@contextmanager
def shard_state(env: GroupEnv, group: str, state: ShardState) -> Iterator[None]:
    context = env.broker.coordinator.runtime.contexts[env.broker.coordinator.partition_for(group)]
    saved = context.state
    context.state = state
    try:
        yield
    finally:
        context.state = saved


@contextmanager
def coordinator_inactive(env: GroupEnv) -> Iterator[None]:
    env.broker.coordinator.active = False
    try:
        yield
    finally:
        env.broker.coordinator.active = True


async def four_requests(m: Member) -> dict[str, Any]:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup (v3+ and v0) of member `m`."""
    join = await settle(await m.send_join())
    sync = await m.sync()
    hb = await m.heartbeat()
    leave_v5 = await m.leave(version=5)
    leave_v0 = await m.leave(version=0)
    return {"join": join, "sync": sync, "heartbeat": hb, "leave": leave_v5, "leave_v0": leave_v0}


# GE-1 expectations: (error, JoinGroup MemberId). GCS answers an inactive service with the request's
# MemberId; routing errors go through handleOperationException, whose JoinGroup response has MemberId "".
GE_1_CASES = {
    "loading": (lambda env: shard_state(env, "g", ShardState.LOADING), COORDINATOR_LOAD_IN_PROGRESS, ""),
    "not hosted": (lambda env: shard_state(env, "g", ShardState.UNLOADED), NOT_COORDINATOR, ""),
    "service not started": (coordinator_inactive, COORDINATOR_NOT_AVAILABLE, None),
}


@pytest.mark.parametrize("case", list(GE_1_CASES))
async def test_GE_1_shard_state(env: GroupEnv, case: str) -> None:
    condition, error, join_member_id = GE_1_CASES[case]
    (m,) = await stable_group(env, "g", 1)
    with condition(env):
        got = await four_requests(m)
    join = got["join"]
    assert (join.error_code, join.generation_id, join.leader, join.members, join.protocol_name) == (error, -1, "", [], None)
    assert (got["sync"].error_code, bytes(got["sync"].assignment)) == (error, b"")
    # GE-2: while the shard loads, a heartbeat is blindly answered NONE.
    assert got["heartbeat"] == (NONE if error == COORDINATOR_LOAD_IN_PROGRESS else error)
    assert (got["leave"].error_code, got["leave"].members) == (error, [])
    assert got["leave_v0"].error_code == error
    assert await m.heartbeat() == NONE  # nothing changed meanwhile
    assert join.member_id == (m.member_id if join_member_id is None else join_member_id)


async def test_GE_2_HB_3_heartbeat_while_loading_is_none(env: GroupEnv) -> None:
    m = env.member("g")
    with shard_state(env, "g", ShardState.LOADING):
        for version in range(5):
            assert await m.heartbeat(member_id="anyone", generation=7, version=version) == NONE


async def test_GE_3_storage_error_maps_to_not_coordinator(env: GroupEnv) -> None:
    """A failed append (a disk error, KAFKA_STORAGE_ERROR) answers NOT_COORDINATOR. Here: the
    record a JoinGroup writes for a new group (JG-3a); SG-6 and SM-3 have their own tests."""
    fail_writes(env.broker, "g")
    resp = await settle(await env.member("g", version=3).send_join(""))
    assert (resp.error_code, resp.member_id, resp.generation_id) == (NOT_COORDINATOR, "", -1)


@pytest.mark.parametrize("version", [0, 3, 5])
async def test_GE_4_empty_group_id_is_invalid(env: GroupEnv, version: int) -> None:
    m = env.member("", version=version if version < 5 else 9)
    join = await settle(await m.send_join("m-1"))
    assert (join.error_code, join.member_id) == (INVALID_GROUP_ID, "m-1")
    sync = await m.sync(member_id="m-1", generation=1, version=version)
    assert (sync.error_code, bytes(sync.assignment)) == (INVALID_GROUP_ID, b"")
    assert await m.heartbeat(member_id="m-1", generation=1, version=min(version, 4)) == INVALID_GROUP_ID
    resp = await leave(await env.ctl(), "", [("m-1", None)], version=version)
    assert resp.error_code == INVALID_GROUP_ID
    if version >= 3:
        assert resp.members == []


async def test_GE_5_check_order(env: GroupEnv) -> None:
    """API-layer checks, then coordinator active, then group id, then stateless checks (session
    timeout), then shard routing, then group logic."""
    m = env.member("", session_ms=1)
    with coordinator_inactive(env):
        # SyncGroup v5's mandatory fields are checked by the API layer, before anything else.
        assert (await m.sync(member_id="x", generation=1, protocol_type=None)).error_code == INCONSISTENT_GROUP_PROTOCOL
        assert (await settle(await m.send_join("x"))).error_code == COORDINATOR_NOT_AVAILABLE
        assert await m.heartbeat(member_id="x", generation=1) == COORDINATOR_NOT_AVAILABLE
    # Group id before the session timeout.
    assert (await settle(await m.send_join("x"))).error_code == INVALID_GROUP_ID
    m.group = "g"
    with shard_state(env, "g", ShardState.LOADING):
        # Session timeout before routing; routing before the group logic (unknown member).
        assert (await settle(await m.send_join("x"))).error_code == INVALID_SESSION_TIMEOUT
        assert (await settle(await m.send_join("x", session_timeout_ms=1000))).error_code == COORDINATOR_LOAD_IN_PROGRESS


async def test_GE_6_failed_write_reverts_its_in_memory_effects(env: GroupEnv) -> None:
    """A write operation whose records are not appended leaves no trace: the group a failed
    JoinGroup created does not exist afterwards (Kafka reverts the shard to its last snapshot)."""
    fail_writes(env.broker, "g")
    resp = await settle(await env.member("g", version=3).send_join(""))
    assert resp.error_code == NOT_COORDINATOR
    env.broker.faults.clear()
    d = await env.describe("g")
    assert (d.state, d.members) == ("Dead", {})


@pytest.mark.broker_config(group_initial_rebalance_delay_ms=300)
async def test_GE_6_concurrent_members_see_one_serial_order(env: GroupEnv) -> None:
    """Eight members join and sync at once, each on its own connection: one join phase, one
    leader, one member list, and every member gets exactly the assignment the leader sent it."""
    members = [env.member("g", f"c{i}", version=3, rebalance_ms=LONG_MS) for i in range(8)]
    futs = [await m.start_join() for m in members]
    resps = [await settle(f) for f in futs]
    assert {(r.error_code, r.generation_id, r.leader) for r in resps} == {(NONE, 1, members[0].member_id)}
    (lead,) = [r for r in resps if r.members]
    assert sorted(x.member_id for x in lead.members) == sorted(m.member_id for m in members)
    plan = {m.member_id: m.client_id.encode() for m in members}
    syncs = [await m.start_sync(plan if m.is_leader else None, version=3) for m in members]
    for m, f in zip(members, syncs, strict=True):
        resp = await settle(f)
        assert (resp.error_code, bytes(resp.assignment)) == (NONE, plan[m.member_id])
