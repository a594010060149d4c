"""Spec 3.5, LeaveGroup v0-v5 (LG-1..LG-6).

LG-3 (a Dead group answers COORDINATOR_NOT_AVAILABLE) is not observable on the wire of a single
broker. SM-7 (removal by instance id) is in test_static_membership.py.
"""

from __future__ import annotations

import pytest

from tests.support.classic import (
    FENCED_INSTANCE_ID,
    LONG_MS,
    NONE,
    UNKNOWN_MEMBER_ID,
    GroupEnv,
    answered_within,
    settle,
    stable_group,
)
from tests.support.groups import leave


def entries(resp: object) -> list[tuple[str, str | None, int]]:
    return [(m.member_id, m.group_instance_id, m.error_code) for m in resp.members]  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", range(3))
async def test_LG_1_v0_to_v2_leave_one_member_without_instance_id(env: GroupEnv, version: int) -> None:
    """Processed as {MemberId, GroupInstanceId: null}: even a static member's id is removed,
    since without an instance id only the member id is validated."""
    dyn = env.member("g", "dyn", rebalance_ms=LONG_MS)
    await dyn.join()
    static = env.member("g", "static", instance_id="s", rebalance_ms=LONG_MS)
    f = await static.start_join()
    await env.barrier()
    await dyn.join()
    await settle(f)
    resp = await static.leave(version=version)
    assert resp.error_code == NONE
    resp = await dyn.leave(version=version)
    assert resp.error_code == NONE
    d = await env.describe("g")
    assert (d.state, d.members) == ("Empty", {})


async def test_LG_2_unknown_group(env: GroupEnv) -> None:
    """v3+: top-level NONE and UNKNOWN_MEMBER_ID for every listed member; v0-v2 carry it top-level (LG-6)."""
    ctl = await env.ctl()
    listed = [("m-1", None), ("", "i-1"), ("m-2", "i-2")]
    for version in (3, 4, 5):
        resp = await leave(ctl, "absent", listed, version=version)
        assert resp.error_code == NONE
        assert entries(resp) == [(m, i, UNKNOWN_MEMBER_ID) for m, i in listed]
    for version in (0, 1, 2):
        resp = await leave(ctl, "absent", [("m-1", None)], version=version)
        assert resp.error_code == UNKNOWN_MEMBER_ID


async def test_LG_4_members_are_processed_in_request_order(env: GroupEnv) -> None:
    """Each entry: "" + registered instance id removes that static member; "" otherwise is unknown;
    a pending member id is dropped; else the member is validated like JG-11. Entries echo the
    request's MemberId and GroupInstanceId."""
    leader = env.member("g", "leader", rebalance_ms=LONG_MS)
    await leader.join()
    s1 = env.member("g", "s1", instance_id="s1", rebalance_ms=LONG_MS)
    s2 = env.member("g", "s2", instance_id="s2", rebalance_ms=LONG_MS)
    dyn = env.member("g", "dyn", rebalance_ms=LONG_MS)
    futs = [await m.start_join() for m in (s1, s2, dyn)]
    await env.barrier()
    await leader.join()
    for f in futs:
        await settle(f)
    pending = env.member("g", "pending")
    await pending.get_member_id()
    request = [
        ("", "s1"),  # (a) removes s1, whatever its member id
        (s1.member_id, "s1"),  # s1 is gone now: its instance id is not registered
        ("", "nobody"),  # (a) not registered
        (pending.member_id, None),  # (b)
        (dyn.member_id, None),  # (c)
        (dyn.member_id, None),  # already removed
        ("wrong-id", "s2"),  # (c) fenced
        ("ghost", None),  # (c) unknown
    ]
    resp = await leave(await env.ctl(), "g", request)
    assert resp.error_code == NONE
    assert entries(resp) == [
        ("", "s1", NONE),
        (s1.member_id, "s1", UNKNOWN_MEMBER_ID),
        ("", "nobody", UNKNOWN_MEMBER_ID),
        (pending.member_id, None, NONE),
        (dyn.member_id, None, NONE),
        (dyn.member_id, None, UNKNOWN_MEMBER_ID),
        ("wrong-id", "s2", FENCED_INSTANCE_ID),
        ("ghost", None, UNKNOWN_MEMBER_ID),
    ]
    assert set((await env.describe("g")).members) == {leader.member_id, s2.member_id}
    assert (await pending.join()).error_code == UNKNOWN_MEMBER_ID  # no longer pending


async def test_LG_4_removed_member_with_a_parked_join_is_answered(env: GroupEnv) -> None:
    """Its parked JoinGroup gets UNKNOWN_MEMBER_ID with MemberId "" (CT-8)."""
    a, b, c = await stable_group(env, "g", 3, rebalance_ms=LONG_MS)
    fa = await a.start_join()
    fb = await b.start_join()  # parked: c has not rejoined
    await env.barrier()
    assert not fb.done()
    assert entries(await b.leave()) == [(b.member_id, None, NONE)]
    resp = await settle(fb)
    assert (resp.error_code, resp.member_id, resp.generation_id, resp.members) == (UNKNOWN_MEMBER_ID, "", -1, [])
    await c.join()
    assert {m.member_id for m in (await settle(fa)).members} == {a.member_id, c.member_id}


async def test_LG_4_leadership_passes_to_a_remaining_member(env: GroupEnv) -> None:
    leader, f1, f2 = await stable_group(env, "g", 3, rebalance_ms=LONG_MS)
    await leader.leave()
    futs = [await m.start_join() for m in (f1, f2)]
    resps = [await settle(f) for f in futs]
    (new_leader,) = {r.leader for r in resps}
    assert new_leader in (f1.member_id, f2.member_id)
    leading = next(r for r in resps if r.member_id == new_leader)
    assert {m.member_id for m in leading.members} == {f1.member_id, f2.member_id}


@pytest.mark.parametrize("state", ["CompletingRebalance", "Stable"])
async def test_LG_5_leave_rebalances_completing_and_stable_groups(env: GroupEnv, state: str) -> None:
    leader, f1, f2 = await stable_group(env, "g", 3, rebalance_ms=LONG_MS)
    if state == "CompletingRebalance":
        fs = [await m.start_join() for m in (leader, f1, f2)]
        for f in fs:
            await settle(f)
    assert await env.state("g") == state
    parked = await f1.start_sync() if state == "CompletingRebalance" else None
    await f2.leave()
    assert await env.state("g") == "PreparingRebalance"
    if parked is not None:
        assert (await settle(parked)).error_code == 27  # JG-13a
    await f1.start_join()
    resp = await leader.join()
    assert {m.member_id for m in resp.members} == {leader.member_id, f1.member_id}


async def test_LG_5_leave_completes_a_join_phase_waiting_for_the_leaver(env: GroupEnv) -> None:
    a, b = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    fa = await a.start_join()
    assert not await answered_within(fa, 0.05)
    await b.leave()
    resp = await settle(fa)
    assert (resp.error_code, [m.member_id for m in resp.members]) == (NONE, [a.member_id])


async def test_LG_5_no_removal_no_rebalance(env: GroupEnv) -> None:
    a, b = await stable_group(env, "g", 2)
    resp = await leave(await env.ctl(), "g", [("ghost", None), ("", "nobody")])
    assert [e[2] for e in entries(resp)] == [UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID]
    assert await env.state("g") == "Stable"
    assert await a.heartbeat() == await b.heartbeat() == NONE


async def test_LG_5_last_member_leaving_empties_the_group(env: GroupEnv) -> None:
    (m,) = await stable_group(env, "g", 1)
    await m.leave()
    d = await env.describe("g")
    assert (d.state, d.members) == ("Empty", {})
    late = env.member("g", "late")
    await late.join()
    assert late.generation == m.generation + 2


@pytest.mark.parametrize("version", range(3))
async def test_LG_6_v0_to_v2_carry_the_member_error_top_level(env: GroupEnv, version: int) -> None:
    a, b = await stable_group(env, "g", 2)
    assert (await a.leave(version=version, member_id="ghost")).error_code == UNKNOWN_MEMBER_ID
    assert (await b.leave(version=version)).error_code == NONE
    resp = await b.leave(version=version)
    assert resp.error_code == UNKNOWN_MEMBER_ID
    assert not hasattr(resp, "members") or not resp.members
