"""Spec 3.1, classic group states (CS-1..CS-6), observed through DescribeGroups and ListGroups."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.classic import (
    LONG_MS,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    GroupEnv,
    fail_writes,
    joined_group,
    settle,
    stable_group,
)
from tests.support.groups import delete_groups, list_groups, subscription


async def test_CS_1_state_names_on_the_wire(env: GroupEnv) -> None:
    """DescribeGroups and ListGroups name the states Empty, PreparingRebalance, CompletingRebalance,
    Stable (and Dead for a group that does not exist); ListGroups filters compare lower-cased names."""
    ctl = await env.ctl()
    empty = env.member("cs1-empty")
    await empty.get_member_id()  # creates the group, adds no member (JG-3a, JG-7)
    completing = await joined_group(env, "cs1-completing", 1)
    await stable_group(env, "cs1-stable", 1)
    preparing = await stable_group(env, "cs1-preparing", 2, rebalance_ms=LONG_MS)
    await preparing[0].start_join()  # the leader rejoins, the follower has not: PreparingRebalance
    await env.barrier()
    expected = {
        "cs1-empty": "Empty",
        "cs1-preparing": "PreparingRebalance",
        "cs1-completing": "CompletingRebalance",
        "cs1-stable": "Stable",
        "cs1-unknown": "Dead",
    }
    for group, state in expected.items():
        assert await env.state(group) == state, group
    listed = {g.group_id: g.group_state for g in (await list_groups(ctl, version=4)).groups}
    assert {g: s for g, s in listed.items() if g.startswith("cs1-")} == {g: s for g, s in expected.items() if s != "Dead"}
    for group, state in expected.items():
        if state == "Dead":
            continue
        for spelled in (state.lower(), state.upper()):
            filtered = await list_groups(ctl, version=4, states=[spelled])
            assert [g.group_id for g in filtered.groups if g.group_id.startswith("cs1-")] == [group], spelled
    assert completing[0].generation == 1


async def test_CS_2_new_group_created_by_join_group(env: GroupEnv) -> None:
    """A group created by JoinGroup starts Empty, without protocol type, protocol or leader, at generation 0."""
    m = env.member("cs2-join", version=9)
    await m.get_member_id()
    d = await env.describe("cs2-join")
    assert (d.state, d.protocol_type, d.protocol_data, d.members) == ("Empty", "", "", {})
    listed = {g.group_id: g for g in (await list_groups(await env.ctl())).groups}
    assert listed["cs2-join"].protocol_type == ""
    resp = await m.join()
    # The first join phase completes at generation 0 + 1, with the only member as leader.
    assert (resp.error_code, resp.generation_id, resp.leader) == (NONE, 1, m.member_id)


async def test_CS_2_new_group_created_by_offset_commit(env: GroupEnv) -> None:
    """A group created by a manual (generation -1) offset commit starts Empty at generation 0, without protocol type."""
    await env.create_topic("cs2-topic")
    admin = env.member("cs2-commit")
    assert await admin.commit({("cs2-topic", 0): 5}, generation=-1, member_id="") == {("cs2-topic", 0): NONE}
    d = await env.describe("cs2-commit")
    assert (d.state, d.protocol_type, d.protocol_data, d.members) == ("Empty", "", "", {})
    resp = await env.member("cs2-commit", version=3).join()
    assert (resp.error_code, resp.generation_id) == (NONE, 1)


# -- CS-3: every allowed transition, one scenario per trigger of the table ---------------------

Scenario = Callable[[GroupEnv, Any], Awaitable[None]]


async def _assert_state(env: GroupEnv, group: str, state: str) -> None:
    await env.barrier()
    assert await env.state(group) == state


async def completing_new_member(env: GroupEnv, mp: Any) -> None:
    await joined_group(env, "g", 1, rebalance_ms=LONG_MS)
    await _assert_state(env, "g", "CompletingRebalance")
    await env.member("g", "newcomer").start_join()
    await _assert_state(env, "g", "PreparingRebalance")


async def completing_changed_protocols(env: GroupEnv, mp: Any) -> None:
    _, follower = await joined_group(env, "g", 2, rebalance_ms=LONG_MS)
    await _assert_state(env, "g", "CompletingRebalance")
    await follower.start_join(protocols=[("range", subscription(["t", "u"]))])
    await _assert_state(env, "g", "PreparingRebalance")


async def completing_member_leaves(env: GroupEnv, mp: Any) -> None:
    _, follower = await joined_group(env, "g", 2, rebalance_ms=LONG_MS)
    await _assert_state(env, "g", "CompletingRebalance")
    assert (await follower.leave()).members[0].error_code == NONE
    await _assert_state(env, "g", "PreparingRebalance")


async def completing_session_expires(env: GroupEnv, mp: Any) -> None:
    leader = env.member("g", "leader", rebalance_ms=LONG_MS)
    await leader.join()
    follower = env.member("g", "follower", session_ms=300, rebalance_ms=LONG_MS)
    f = await follower.start_join()
    await env.barrier()
    await settle(await leader.start_join())
    await settle(f)
    assert follower.generation == leader.generation == 2
    # CompletingRebalance; the follower never heartbeats and its session expires (the leader's does not).
    await env.wait_state("g", "PreparingRebalance")


async def completing_pending_sync_expires(env: GroupEnv, mp: Any) -> None:
    # A static follower syncs; the leader never does; after the rebalance timeout the leader is
    # removed. The static follower keeps the group in PreparingRebalance (SM-6 extension).
    leader = env.member("g", "leader", rebalance_ms=200)
    await leader.join()
    follower = env.member("g", "follower", instance_id="f", rebalance_ms=200)
    f = await follower.start_join()
    await env.barrier()
    await settle(await leader.start_join())
    await settle(f)
    await _assert_state(env, "g", "CompletingRebalance")
    parked = await follower.start_sync()
    resp = await settle(parked)
    assert resp.error_code == REBALANCE_IN_PROGRESS
    assert await env.state("g") == "PreparingRebalance"


async def completing_sync_write_fails(env: GroupEnv, mp: Any) -> None:
    leader, follower = await joined_group(env, "g", 2, rebalance_ms=LONG_MS)
    await _assert_state(env, "g", "CompletingRebalance")
    parked = await follower.start_sync()
    await env.barrier()
    fail_writes(env.broker, "g")
    await leader.sync({leader.member_id: b"a", follower.member_id: b"b"})
    await settle(parked)
    await _assert_state(env, "g", "PreparingRebalance")


async def stable_new_member(env: GroupEnv, mp: Any) -> None:
    await stable_group(env, "g", 1, rebalance_ms=LONG_MS)
    await _assert_state(env, "g", "Stable")
    await env.member("g", "newcomer").start_join()
    await _assert_state(env, "g", "PreparingRebalance")


async def stable_leader_rejoins(env: GroupEnv, mp: Any) -> None:
    leader, _ = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    await _assert_state(env, "g", "Stable")
    await leader.start_join()  # same metadata: a leader's JoinGroup always rebalances
    await _assert_state(env, "g", "PreparingRebalance")


async def stable_follower_changed_protocols(env: GroupEnv, mp: Any) -> None:
    _, follower = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    await _assert_state(env, "g", "Stable")
    await follower.start_join(protocols=[("range", subscription(["t", "u"]))])
    await _assert_state(env, "g", "PreparingRebalance")


async def stable_static_replaced_protocol_changes(env: GroupEnv, mp: Any) -> None:
    static = env.member("g", "static", instance_id="s", rebalance_ms=LONG_MS, protocols=[("range", b"r"), ("roundrobin", b"rr")])
    await static.join()
    assert (await static.sync({static.member_id: b"a"})).error_code == NONE
    # The restarted instance prefers roundrobin, which the group would now select.
    restarted = env.member("g", "static", instance_id="s", rebalance_ms=LONG_MS, protocols=[("roundrobin", b"rr"), ("range", b"r")])
    resp = await restarted.join()
    assert (resp.error_code, resp.generation_id, resp.protocol_name) == (NONE, static.generation + 1, "roundrobin")
    await _assert_state(env, "g", "CompletingRebalance")  # through PreparingRebalance: a new generation


async def stable_member_leaves(env: GroupEnv, mp: Any) -> None:
    _, follower = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    await _assert_state(env, "g", "Stable")
    await follower.leave()
    await _assert_state(env, "g", "PreparingRebalance")


async def stable_session_expires(env: GroupEnv, mp: Any) -> None:
    leader = env.member("g", "leader", rebalance_ms=LONG_MS)
    await leader.join()
    follower = env.member("g", "follower", session_ms=300, rebalance_ms=LONG_MS)
    f = await follower.start_join()
    await env.barrier()
    await settle(await leader.start_join())
    await settle(f)
    sf = await follower.start_sync()
    await leader.sync({})
    await settle(sf)
    await env.wait_state("g", "PreparingRebalance")  # the follower stopped heartbeating


async def stable_pending_sync_expires(env: GroupEnv, mp: Any) -> None:
    # The static leader syncs, the dynamic follower never does: removed at the pending-sync timeout.
    leader = env.member("g", "leader", instance_id="l", rebalance_ms=200)
    await leader.join()
    follower = env.member("g", "follower", rebalance_ms=200)
    f = await follower.start_join()
    await env.barrier()
    await settle(await leader.start_join())
    await settle(f)
    assert (await leader.sync({})).error_code == NONE  # Stable
    await env.wait_state("g", "PreparingRebalance")
    assert await follower.heartbeat() == UNKNOWN_MEMBER_ID


async def preparing_to_completing(env: GroupEnv, mp: Any) -> None:
    leader, follower = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    f = await leader.start_join()
    await _assert_state(env, "g", "PreparingRebalance")
    await follower.join()
    await settle(f)
    await _assert_state(env, "g", "CompletingRebalance")


async def preparing_to_empty(env: GroupEnv, mp: Any) -> None:
    leader, follower = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    f = await leader.start_join()
    await _assert_state(env, "g", "PreparingRebalance")
    await leader.leave()
    assert (await settle(f)).error_code == UNKNOWN_MEMBER_ID
    await _assert_state(env, "g", "PreparingRebalance")  # the follower has not rejoined
    await follower.leave()
    await _assert_state(env, "g", "Empty")


async def completing_to_stable(env: GroupEnv, mp: Any) -> None:
    (leader,) = await joined_group(env, "g", 1)
    await _assert_state(env, "g", "CompletingRebalance")
    await leader.sync({leader.member_id: b"x"})
    await _assert_state(env, "g", "Stable")


async def completing_static_member_replaced(env: GroupEnv, mp: Any) -> None:
    leader = env.member("g", "leader", rebalance_ms=LONG_MS)
    await leader.join()
    static = env.member("g", "static", instance_id="s", rebalance_ms=LONG_MS)
    f = await static.start_join()
    await env.barrier()
    await settle(await leader.start_join())
    await settle(f)
    await _assert_state(env, "g", "CompletingRebalance")
    await env.member("g", "static", instance_id="s", rebalance_ms=LONG_MS).start_join()
    await _assert_state(env, "g", "PreparingRebalance")


TRANSITIONS: dict[str, Scenario] = {
    "CompletingRebalance->PreparingRebalance: new member": completing_new_member,
    "CompletingRebalance->PreparingRebalance: changed protocols": completing_changed_protocols,
    "CompletingRebalance->PreparingRebalance: static member replaced": completing_static_member_replaced,
    "CompletingRebalance->PreparingRebalance: member leaves": completing_member_leaves,
    "CompletingRebalance->PreparingRebalance: session expires": completing_session_expires,
    "CompletingRebalance->PreparingRebalance: pending-sync timeout": completing_pending_sync_expires,
    "CompletingRebalance->PreparingRebalance: assignment write fails": completing_sync_write_fails,
    "Stable->PreparingRebalance: new member": stable_new_member,
    "Stable->PreparingRebalance: leader rejoins": stable_leader_rejoins,
    "Stable->PreparingRebalance: follower changed protocols": stable_follower_changed_protocols,
    "Stable->PreparingRebalance: static replaced, protocol changes": stable_static_replaced_protocol_changes,
    "Stable->PreparingRebalance: member leaves": stable_member_leaves,
    "Stable->PreparingRebalance: session expires": stable_session_expires,
    "Stable->PreparingRebalance: pending-sync timeout": stable_pending_sync_expires,
    "PreparingRebalance->CompletingRebalance: join completes": preparing_to_completing,
    "PreparingRebalance->Empty: join completes without members": preparing_to_empty,
    "CompletingRebalance->Stable: assignment committed": completing_to_stable,
}


@pytest.mark.parametrize("transition", list(TRANSITIONS))
async def test_CS_3_allowed_transitions(env: GroupEnv, monkeypatch: pytest.MonkeyPatch, transition: str) -> None:
    await TRANSITIONS[transition](env, monkeypatch)


@pytest.mark.broker_config(group_initial_rebalance_delay_ms=LONG_MS)
async def test_CS_3_empty_to_preparing_rebalance_when_a_member_is_added(env: GroupEnv) -> None:
    m = env.member("g")
    await m.get_member_id()
    assert await env.state("g") == "Empty"  # MEMBER_ID_REQUIRED adds no member
    await m.start_join()
    await _assert_state(env, "g", "PreparingRebalance")


async def test_CS_3_last_member_leaving_a_stable_group_goes_through_preparing_to_empty(env: GroupEnv) -> None:
    """Stable -> Empty is not a transition: the leave prepares a rebalance whose join phase
    completes at once with no member, so the generation advances (CS-5)."""
    (only,) = await stable_group(env, "g", 1)
    await only.leave()
    assert await env.state("g") == "Empty"
    newcomer = env.member("g", "newcomer")
    await newcomer.join()
    assert newcomer.generation == only.generation + 2


async def test_CS_4_heartbeat_in_completing_rebalance_is_answered_none(env: GroupEnv) -> None:
    """The state javadoc says REBALANCE_IN_PROGRESS; the code (which wins) answers NONE."""
    leader, follower = await joined_group(env, "g", 2)
    assert await env.state("g") == "CompletingRebalance"
    assert await leader.heartbeat() == NONE
    assert await follower.heartbeat() == NONE


async def test_CS_5_generation_advances_by_one_per_join_phase(env: GroupEnv) -> None:
    """+1 at every join completion, including the one that empties the group; never otherwise."""
    a = env.member("g", "a")
    await a.join()
    assert a.generation == 1
    await a.sync({a.member_id: b""})
    assert await a.heartbeat() == NONE
    b = env.member("g", "b")
    fb = await b.start_join()
    await env.barrier()
    await a.join()
    await settle(fb)
    assert a.generation == b.generation == 2
    await a.sync({})
    await settle(await b.start_sync())  # syncs, heartbeats and a follower's no-op rejoin change nothing
    assert (await b.join()).generation_id == 2
    assert await b.heartbeat() == NONE
    await b.leave()  # generation 3 (a alone)
    fa = await a.start_join()
    assert (await settle(fa)).generation_id == 3
    await a.leave()  # generation 4: the group is Empty
    assert await env.state("g") == "Empty"
    c = env.member("g", "c")
    await c.join()
    assert c.generation == 5


async def test_CS_6_deleted_group_behaves_as_absent(env: GroupEnv) -> None:
    """After DeleteGroups, Join with a member id, Sync and Heartbeat see no group, Describe says Dead,
    and a new join creates a fresh group at generation 0."""
    (m,) = await stable_group(env, "g", 1)
    await m.leave()
    assert await env.state("g") == "Empty"
    resp = await delete_groups(await env.ctl(), ["g"])
    assert [(r.group_id, r.error_code) for r in resp.results] == [("g", NONE)]
    d = await env.describe("g")
    assert (d.error_code, d.state, d.members) == (NONE, "Dead", {})
    old = m.member_id
    rejoin = await settle(await m.send_join(old))
    assert (rejoin.error_code, rejoin.member_id) == (UNKNOWN_MEMBER_ID, old)
    assert (await m.sync({})).error_code == UNKNOWN_MEMBER_ID
    assert await m.heartbeat() == UNKNOWN_MEMBER_ID
    fresh = env.member("g", "fresh")
    await fresh.join()
    assert fresh.generation == 1
