"""Spec 3.6, static membership (KIP-345, SM-1..SM-7)."""

from __future__ import annotations

import pytest

from tests.support.classic import (
    FENCED_INSTANCE_ID,
    LONG_MS,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    GroupEnv,
    Member,
    answered_within,
    fail_writes,
    settle,
)
from tests.support.groups import leave, subscription


async def group_with_static(
    env: GroupEnv, *, static_leader: bool, stable: bool = True, n_dynamic: int = 1, **kwargs: object
) -> tuple[Member, list[Member]]:
    """A group of one static member (instance "s") and `n_dynamic` dynamic members; the static one
    leads if `static_leader`. Each member is assigned its own name as bytes."""
    static = env.member("g", "static-client", instance_id="s", **kwargs)  # type: ignore[arg-type]
    dynamic = [env.member("g", f"dyn-{i}", **kwargs) for i in range(n_dynamic)]  # type: ignore[arg-type]
    first, rest = (static, dynamic) if static_leader else (dynamic[0], [static, *dynamic[1:]])
    await first.join()
    futs = [await m.start_join() for m in rest]
    await env.barrier()
    futs.append(await first.start_join())
    for f in futs:
        assert (await settle(f)).error_code == NONE
    if stable:
        everyone = [static, *dynamic]
        syncs = [await m.start_sync() for m in everyone if m is not first]
        await first.sync({m.member_id: m.client_id.encode() for m in everyone})
        for s in syncs:
            await settle(s)
    return static, dynamic


@pytest.mark.parametrize("version", range(5, 10))
async def test_SM_1_new_static_member_is_added_at_once(env: GroupEnv, version: int) -> None:
    """No MEMBER_ID_REQUIRED round trip, even from v5 up; the id is prefixed by the instance id."""
    (dyn,) = [env.member("g", "dyn", rebalance_ms=LONG_MS)]
    await dyn.join()
    await dyn.sync({})
    s = env.member("g", "client", instance_id="inst", version=version)
    f = await s.send_join("")
    await env.barrier()
    d = await env.describe("g")
    assert d.state == "PreparingRebalance"  # added, and a rebalance started (JG-10)
    (new_id,) = set(d.members) - {dyn.member_id}
    assert new_id.startswith("inst-")
    assert d.members[new_id].group_instance_id == "inst"
    assert not f.done()
    await dyn.join()
    resp = await settle(f)
    assert (resp.error_code, resp.member_id) == (NONE, new_id)


async def test_SM_2_replacement_fences_the_old_member_id(env: GroupEnv) -> None:
    """The restarted instance gets a new id; every request carrying the instance id with the old
    member id is FENCED_INSTANCE_ID."""
    await env.create_topic("t")
    static, (dyn,) = await group_with_static(env, static_leader=False)
    old_id, gen = static.member_id, static.generation
    restarted = env.member("g", "restarted-client", instance_id="s")
    resp = await restarted.join()
    assert resp.error_code == NONE and resp.member_id != old_id and resp.member_id.startswith("s-")
    # Heartbeat, SyncGroup, JoinGroup, OffsetCommit and LeaveGroup from the old incarnation.
    assert await static.heartbeat() == FENCED_INSTANCE_ID
    assert (await static.sync()).error_code == FENCED_INSTANCE_ID
    assert (await settle(await static.send_join())).error_code == FENCED_INSTANCE_ID
    assert await static.commit({("t", 0): 1}) == {("t", 0): FENCED_INSTANCE_ID}
    assert [m.error_code for m in (await static.leave()).members] == [FENCED_INSTANCE_ID]
    assert static.generation == gen
    assert await restarted.heartbeat() == NONE
    assert await dyn.heartbeat() == NONE


async def test_SM_2_replacement_keeps_client_assignment_and_updates_protocols(env: GroupEnv) -> None:
    static, _ = await group_with_static(env, static_leader=False)
    new_meta = subscription(["t", "other"])
    restarted = env.member("g", "restarted-client", instance_id="s", protocols=[("range", new_meta)])
    await restarted.join()
    d = await env.describe("g")
    assert d.state == "Stable"
    assert static.member_id not in d.members
    m = d.members[restarted.member_id]
    # Client id and host stay those of the replaced member; the metadata comes from the new request.
    assert (m.client_id, m.client_host, m.group_instance_id) == ("static-client", "/127.0.0.1", "s")
    assert bytes(m.member_metadata) == new_meta
    assert bytes(m.member_assignment) == b"static-client"
    assert bytes((await restarted.sync()).assignment) == b"static-client"


async def test_SM_2_liveness_timer_moves_to_the_new_id(env: GroupEnv) -> None:
    """The new id gets the liveness timer. Kafka arms it before applying the request's timeouts
    (GMM updateStaticMemberThenRebalanceOrCompleteJoin: rescheduleClassicGroupMemberHeartbeat,
    then updateMember), so it first runs for the replaced member's session timeout; the next
    reset uses the new session timeout."""
    static, (dyn,) = await group_with_static(env, static_leader=False, session_ms=LONG_MS, rebalance_ms=LONG_MS)
    restarted = env.member("g", "restarted", instance_id="s", session_ms=200, rebalance_ms=LONG_MS)
    await restarted.join()
    await env.elapse(500)  # past the new 200 ms session: the timer armed at replacement is the old one
    assert await env.state("g") == "Stable"
    assert restarted.member_id in (await env.describe("g")).members
    assert await restarted.heartbeat() == NONE  # re-armed with its own 200 ms session
    await env.wait_state("g", "PreparingRebalance")
    assert set((await env.describe("g")).members) == {dyn.member_id}
    assert await static.heartbeat() == UNKNOWN_MEMBER_ID


async def test_SM_2_parked_join_of_the_old_id_is_fenced(env: GroupEnv) -> None:
    static, (d0, d1) = await group_with_static(env, static_leader=False, n_dynamic=2, rebalance_ms=LONG_MS)
    leader = d0 if d0.is_leader else d1
    other = d1 if leader is d0 else d0
    await leader.start_join()
    parked = await static.start_join()
    await env.barrier()
    assert not parked.done()  # `other` has not rejoined
    restarted = env.member("g", "restarted", instance_id="s", rebalance_ms=LONG_MS)
    fr = await restarted.start_join()
    resp = await settle(parked)
    assert (resp.error_code, resp.member_id, resp.leader, resp.members) == (FENCED_INSTANCE_ID, static.member_id, "", [])
    assert (resp.protocol_type, resp.protocol_name, resp.skip_assignment) == (None, None, False)
    await other.join()
    done = await settle(fr)
    assert done.error_code == NONE and done.generation_id == other.generation


async def test_SM_2_parked_sync_of_the_old_id_is_fenced(env: GroupEnv) -> None:
    static, (dyn,) = await group_with_static(env, static_leader=False, stable=False, rebalance_ms=LONG_MS)
    parked = await static.start_sync()
    await env.barrier()
    restarted = env.member("g", "restarted", instance_id="s", rebalance_ms=LONG_MS)
    await restarted.start_join()
    resp = await settle(parked)
    assert (resp.error_code, bytes(resp.assignment), resp.protocol_type, resp.protocol_name) == (FENCED_INSTANCE_ID, b"", None, None)
    assert dyn.generation == static.generation


@pytest.mark.parametrize("version", [5, 8, 9])
@pytest.mark.parametrize("was_leader", [True, False])
async def test_SM_3_restart_in_stable_group_without_rebalance(env: GroupEnv, version: int, was_leader: bool) -> None:
    """v9: Leader is the current leader (the new id for a replaced leader), which gets the members
    and SkipAssignment; below v9 the leader is the one before the replacement and Members is empty."""
    static, (dyn,) = await group_with_static(env, static_leader=was_leader)
    gen, old_id = static.generation, static.member_id
    restarted = env.member("g", "restarted", instance_id="s", version=version)
    resp = await settle(await restarted.send_join(""))
    new_id = resp.member_id
    assert (resp.error_code, resp.generation_id, resp.protocol_name) == (NONE, gen, "range")
    if version >= 7:
        assert resp.protocol_type == "consumer"
    if version >= 9 and was_leader:
        assert (resp.leader, resp.skip_assignment) == (new_id, True)
        assert {m.member_id for m in resp.members} == {new_id, dyn.member_id}
    else:
        assert resp.leader == (old_id if was_leader else dyn.member_id)
        assert resp.members == []
        if version >= 9:
            assert resp.skip_assignment is False
    restarted.member_id, restarted.generation = new_id, resp.generation_id
    assert bytes((await restarted.sync()).assignment) == b"static-client"  # SG-7: the retained assignment
    assert await env.state("g") == "Stable"
    assert await dyn.heartbeat() == NONE  # no rebalance for the others
    assert dyn.generation == gen


async def test_SM_3_failed_write_reverts_the_replacement(env: GroupEnv) -> None:
    static, (dyn,) = await group_with_static(env, static_leader=False)
    fail_writes(env.broker, "g")
    resp = await settle(await env.member("g", "restarted", instance_id="s").send_join(""))
    env.broker.faults.clear()
    assert (resp.error_code, resp.member_id) == (NOT_COORDINATOR, "")  # GE-3 mapping of a storage error
    assert set((await env.describe("g")).members) == {static.member_id, dyn.member_id}
    assert await static.heartbeat() == NONE


async def test_SM_4_stable_replacement_changing_the_selected_protocol_rebalances(env: GroupEnv) -> None:
    protocols = [("range", b"r"), ("roundrobin", b"rr")]
    static = env.member("g", "static", instance_id="s", protocols=protocols, rebalance_ms=LONG_MS)
    await static.join()
    await static.sync({static.member_id: b"x"})
    restarted = env.member("g", "static", instance_id="s", protocols=list(reversed(protocols)), rebalance_ms=LONG_MS)
    resp = await restarted.join()
    assert (resp.error_code, resp.generation_id, resp.protocol_name) == (NONE, static.generation + 1, "roundrobin")
    assert await env.state("g") == "CompletingRebalance"


async def test_SM_4_completing_rebalance_replacement_always_rebalances(env: GroupEnv) -> None:
    static, (dyn,) = await group_with_static(env, static_leader=False, stable=False, rebalance_ms=LONG_MS)
    assert await env.state("g") == "CompletingRebalance"
    restarted = env.member("g", "restarted", instance_id="s", rebalance_ms=LONG_MS)  # same protocols
    fr = await restarted.start_join()
    await env.barrier()
    assert await env.state("g") == "PreparingRebalance"
    assert not await answered_within(fr, 0.05)
    await dyn.join()
    assert (await settle(fr)).generation_id == dyn.generation == static.generation + 1


async def test_SM_4_preparing_rebalance_replacement_parks_and_completes(env: GroupEnv) -> None:
    static, (dyn,) = await group_with_static(env, static_leader=False, rebalance_ms=LONG_MS)
    fd = await dyn.start_join()  # the leader rejoins; the static member has not
    await env.barrier()
    assert await env.state("g") == "PreparingRebalance"
    restarted = env.member("g", "restarted", instance_id="s", rebalance_ms=LONG_MS)
    resp = await restarted.join()  # now every member has joined: the phase completes
    lead = await settle(fd)
    assert resp.generation_id == lead.generation_id == static.generation + 1
    assert {m.member_id for m in lead.members} == {dyn.member_id, restarted.member_id}


async def test_SM_5_known_static_member_rejoin(env: GroupEnv) -> None:
    """With its current member id: JG-12 (a follower with the same metadata gets the current
    generation); with another non-empty member id: FENCED_INSTANCE_ID."""
    static, (dyn,) = await group_with_static(env, static_leader=False)
    resp = await settle(await static.send_join())
    assert (resp.error_code, resp.member_id, resp.generation_id, resp.members) == (NONE, static.member_id, static.generation, [])
    resp = await settle(await static.send_join(dyn.member_id))
    assert (resp.error_code, resp.member_id) == (FENCED_INSTANCE_ID, dyn.member_id)
    resp = await settle(await static.send_join("s-made-up"))
    assert (resp.error_code, resp.member_id) == (FENCED_INSTANCE_ID, "s-made-up")
    assert await env.state("g") == "Stable"


async def test_SM_6_static_members_that_did_not_rejoin_are_kept(env: GroupEnv) -> None:
    static, (dyn,) = await group_with_static(env, static_leader=False, rebalance_ms=200)
    resp = await dyn.join()  # the leader rejoins; the static member stays silent
    assert resp.generation_id == static.generation + 1
    listed = {m.member_id: (m.group_instance_id, bytes(m.metadata)) for m in resp.members}
    assert listed == {dyn.member_id: (None, static.protocols[0][1]), static.member_id: ("s", static.protocols[0][1])}
    assert await static.heartbeat() == 22  # ILLEGAL_GENERATION: still a member, of an older generation
    assert static.member_id in (await env.describe("g")).members


async def test_SM_6_join_phase_is_extended_while_no_member_rejoins(env: GroupEnv) -> None:
    """Two static members, neither rejoining: each rebalance timeout extends the phase instead of
    completing it; the generation advances once a member rejoins."""
    s1 = env.member("g", "s1", instance_id="s1", rebalance_ms=150)
    s2 = env.member("g", "s2", instance_id="s2", rebalance_ms=150)
    await s1.join()
    f2 = await s2.start_join()
    await env.barrier()
    await s1.join()
    await settle(f2)
    fs = await s2.start_sync()
    await s1.sync({})
    await settle(fs)
    gen = s1.generation
    passer = env.member("g", "passer", rebalance_ms=150)
    await passer.start_join()
    await env.barrier()
    assert await env.state("g") == "PreparingRebalance"
    await passer.leave()  # nobody has a parked JoinGroup now
    await env.elapse(500)  # more than three rebalance timeouts
    d = await env.describe("g")
    assert (d.state, set(d.members)) == ("PreparingRebalance", {s1.member_id, s2.member_id})
    resp = await s2.join()
    assert (resp.generation_id, resp.leader) == (gen + 1, s2.member_id)
    assert {m.member_id for m in resp.members} == {s1.member_id, s2.member_id}


@pytest.mark.parametrize("version", [3, 4, 5])
async def test_SM_7_leave_by_instance_id_removes_the_static_member(env: GroupEnv, version: int) -> None:
    static, (dyn,) = await group_with_static(env, static_leader=False, rebalance_ms=LONG_MS)
    resp = await leave(await env.ctl(), "g", [("", "s")], version=version)
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in resp.members] == [("", "s", NONE)]
    assert await env.state("g") == "PreparingRebalance"  # LG-5
    assert await static.heartbeat() == UNKNOWN_MEMBER_ID  # the instance id is not registered any more
    assert await dyn.heartbeat() == REBALANCE_IN_PROGRESS
    assert set((await env.describe("g")).members) == {dyn.member_id}
