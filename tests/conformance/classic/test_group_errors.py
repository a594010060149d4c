"""Spec section 2 for the classic group APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): GE-1..GE-6.

GE-1's conditions are reached for real, never set by hand:
- a shard LOADING: a stable group's coordinator restarts behind ~96 MB of an earlier
  `__consumer_offsets` partition (offsets_log.write_ballast), so requests sent on connect reach
  its shard while it loads; a DescribeGroups sent last in the same pipeline proves it;
- a shard not hosted: `__consumer_offsets` deleted (DeleteTopics), so every shard resigns, as
  Kafka's coordinator does when it loses its partitions;
- the coordinator not active: the broker stops while the requests, held by a chaos delay rule
  before their handlers run, are still in flight (a stopping broker answers what is in flight).
GE-7 (ACLs) does not apply: kaflet has no authorizer.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka.protocol.admin import DeleteTopicsRequest

from tests.support import groups as g
from tests.support.classic import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    LONG_MS,
    NONE,
    NOT_COORDINATOR,
    UNKNOWN_MEMBER_ID,
    GroupEnv,
    Member,
    answers_while_the_coordinator_stops,
    fail_writes,
    settle,
    stable_group,
)
from tests.support.coordinator import groups_on_partition, serving, wait_ready
from tests.support.groups import leave
from tests.support.offsets_log import write_ballast
from tests.support.raw_client import RawClient

SESSION_MS = 60_000  # outlives the load: the member is still there afterwards


@pytest.fixture
def discard_data(make_config: Callable[..., Any]) -> Iterator[None]:
    """Remove the (large) data dir after the test instead of leaving it to pytest's tmp retention."""
    yield
    shutil.rmtree(make_config().data_dir, ignore_errors=True)


def member_requests(m: Member) -> dict[str, Any]:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup (v5 and v0) of member `m`, as it would send them."""
    leave_request = g.LeaveGroupRequest
    return {
        "join": m.join_request(),
        "sync": m.sync_request(),
        "heartbeat": g.HeartbeatRequest[4](group_id=m.group, generation_id=m.generation, member_id=m.member_id, group_instance_id=None),
        "leave": leave_request[5](
            group_id=m.group, members=[leave_request.MemberIdentity(member_id=m.member_id, group_instance_id=None, reason=None)]
        ),
        "leave_v0": leave_request[0](group_id=m.group, member_id=m.member_id),
    }


def check_member_answers(got: dict[str, Any], error: int, join_member_id: str) -> None:
    join = got["join"]
    assert (join.error_code, join.generation_id, join.leader, join.members, join.protocol_name) == (error, -1, "", [], None)
    assert join.member_id == join_member_id
    assert (got["sync"].error_code, bytes(got["sync"].assignment)) == (error, b"")
    # GE-2: while the shard loads, a heartbeat is blindly answered NONE.
    assert got["heartbeat"].error_code == (NONE if error == COORDINATOR_LOAD_IN_PROGRESS else error)
    assert (got["leave"].error_code, got["leave"].members) == (error, [])
    assert got["leave_v0"].error_code == error


async def pipelined(client: RawClient, requests: dict[str, Any]) -> dict[str, Any]:
    """Every request written at once on one connection; the answers, which come in order."""
    futures = {name: client.send(req) for name, req in requests.items()}
    return {name: await asyncio.wait_for(f, 30) for name, f in futures.items()}


# -- GE-1, GE-2, GE-5: a loading shard ----------------------------------------------------------------


async def test_GE_1_GE_2_GE_5_loading_shard(make_config: Callable[..., Any], discard_data: None) -> None:
    (group,) = groups_on_partition(4, 5, 1, "ge1-loading")  # loaded after partition 0 and its ballast
    async with serving(make_config()) as served:
        await served.ready()
        (m,) = await stable_group(GroupEnv(served.broker, served.connect), group, 1, session_ms=SESSION_MS)
        write_ballast(served.broker, 0)
    async with serving(make_config()) as served:
        env = GroupEnv(served.broker, served.connect)
        again = env.member(group, session_ms=SESSION_MS)
        again.member_id, again.generation, again.protocol_name = m.member_id, m.generation, m.protocol_name
        requests = member_requests(again)
        # GE-2 / HB-3: every Heartbeat version, from anyone, is NONE while the shard loads.
        for v in range(5):
            requests[f"heartbeat-v{v}"] = g.HeartbeatRequest[v](
                group_id=group, generation_id=7, member_id="anyone", **({"group_instance_id": None} if v >= 3 else {})
            )
        # GE-5: the session timeout is checked before routing (INVALID_SESSION_TIMEOUT, not loading).
        requests["join-bad-session"] = again.join_request("x", session_timeout_ms=1)
        requests["join-stranger"] = again.join_request("x", session_timeout_ms=SESSION_MS)
        requests["describe"] = g.DescribeGroupsRequest[5](groups=[group], include_authorized_operations=False)  # last: proves it
        client = await served.connect()
        got = await pipelined(client, requests)
        assert got["describe"].groups[0].error_code == COORDINATOR_LOAD_IN_PROGRESS
        check_member_answers(got, COORDINATOR_LOAD_IN_PROGRESS, "")
        assert [got[f"heartbeat-v{v}"].error_code for v in range(5)] == [NONE] * 5
        assert got["join-bad-session"].error_code == INVALID_SESSION_TIMEOUT
        assert got["join-stranger"].error_code == COORDINATOR_LOAD_IN_PROGRESS
        # Once loaded, nothing changed meanwhile: the member is still in its generation.
        await wait_ready(client)
        hb = await g.heartbeat(client, group, m.member_id, m.generation)
        assert hb.error_code == NONE
        # ...and the heartbeat from a stranger, answered NONE while loading, is now judged.
        assert (await g.heartbeat(client, group, "anyone", 7)).error_code != NONE


# -- GE-1: a shard not hosted -------------------------------------------------------------------------


async def test_GE_1_shard_not_hosted(env: GroupEnv) -> None:
    (m,) = await stable_group(env, "g", 1)
    deleted = await (await env.ctl()).request(
        DeleteTopicsRequest[6](topics=[DeleteTopicsRequest.DeleteTopicState(name="__consumer_offsets", topic_id=None)], timeout_ms=10_000)
    )
    assert [t.error_code for t in deleted.responses] == [NONE]
    got = await pipelined(await env.connect("consumer"), member_requests(m))
    # Routing errors go through handleOperationException, whose JoinGroup response has MemberId "".
    check_member_answers(got, NOT_COORDINATOR, "")


# -- GE-1, GE-5: the coordinator not active -----------------------------------------------------------


async def test_GE_1_GE_5_coordinator_not_active(make_config: Callable[..., Any]) -> None:
    members: list[Any] = []

    async def requests_of(env: GroupEnv) -> dict[str, tuple[Any, int | None]]:
        (m,) = await stable_group(env, "g", 1)
        members.append(m)
        requests = member_requests(m)
        # GE-5: SyncGroup v5's mandatory fields are checked by the API layer, before the coordinator.
        requests["sync-no-protocol-type"] = m.sync_request(member_id="x", generation=1, protocol_type=None)
        requests["join-stranger"] = m.join_request("x", session_timeout_ms=1)  # active is checked before the session timeout
        return {name: (req, None) for name, req in requests.items()}

    got = await answers_while_the_coordinator_stops(make_config, requests_of)
    (m,) = members
    # The coordinator service answers an inactive service with the request's MemberId.
    check_member_answers(got, COORDINATOR_NOT_AVAILABLE, m.member_id)
    assert got["sync-no-protocol-type"].error_code == INCONSISTENT_GROUP_PROTOCOL
    assert got["join-stranger"].error_code == COORDINATOR_NOT_AVAILABLE


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
    """API-layer checks, then coordinator active (test_GE_1_GE_5_coordinator_not_active), then group
    id, then stateless checks (session timeout), then shard routing (test_GE_1_GE_2_GE_5_loading_shard),
    then group logic."""
    m = env.member("", session_ms=1)
    # Group id before the session timeout.
    assert (await settle(await m.send_join("x"))).error_code == INVALID_GROUP_ID
    m.group = "g"
    assert (await settle(await m.send_join("x"))).error_code == INVALID_SESSION_TIMEOUT
    # Session timeout valid: the group logic judges the unknown member id.
    assert (await settle(await m.send_join("x", session_timeout_ms=1000))).error_code == UNKNOWN_MEMBER_ID


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
