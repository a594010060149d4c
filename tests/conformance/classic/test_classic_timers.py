"""Spec 3.7 and JG-14: the classic timers (CT-1..CT-6, CT-8) and the initial rebalance delay.

No test measures time. "Not answered yet" is a short bounded wait that must time out (it can
only pass wrongly under load, never fail wrongly); "after X ms" is `GroupEnv.elapse`, which
waits for a sentinel timer of X ms to fire; "sooner than" compares the order in which two
groups complete. CT-7 (persistence) is in test_classic_persistence.py.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.classic import (
    LONG_MS,
    MEMBER_ID_REQUIRED,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    GroupEnv,
    answered_within,
    fail_writes,
    joined_group,
    settle,
    stable_group,
)

DELAY_MS = 400  # the nonzero group.initial.rebalance.delay.ms of the JG-14 tests


async def first_of(*futs: asyncio.Future[object]) -> asyncio.Future[object]:
    done, _ = await asyncio.wait(set(futs), timeout=10, return_when=asyncio.FIRST_COMPLETED)
    assert done, "no join phase completed"
    return next(iter(done))


# -- JG-14: group.initial.rebalance.delay.ms ---------------------------------------------------------


@pytest.mark.broker_config(group_initial_rebalance_delay_ms=0)
async def test_JG_14_zero_delay_completes_the_first_join_at_once(env: GroupEnv) -> None:
    """kaflet's default: the initial rebalance ends on the next timer turn."""
    m = env.member("g", rebalance_ms=LONG_MS)
    resp = await m.join()
    assert (resp.error_code, resp.generation_id, [x.member_id for x in resp.members]) == (NONE, 1, [m.member_id])


@pytest.mark.broker_config(group_initial_rebalance_delay_ms=DELAY_MS)
async def test_JG_14_lone_member_waits_for_the_delay(env: GroupEnv) -> None:
    """MEMBER_ID_REQUIRED is immediate (before another group's delay runs out); the JoinGroup that
    adds the member is answered after the delay, even though every member has joined."""
    other = env.member("other", rebalance_ms=LONG_MS)
    f_other = await other.start_join()
    m = env.member("g", rebalance_ms=LONG_MS)
    f_first = await m.send_join("")
    assert await first_of(f_first, f_other) is f_first
    first = await settle(f_first)
    assert first.error_code == MEMBER_ID_REQUIRED
    m.member_id = first.member_id
    f = await m.start_join()
    assert not await answered_within(f, DELAY_MS / 2000)
    assert await env.state("g") == "PreparingRebalance"
    resp = await settle(f)
    assert (resp.error_code, resp.generation_id) == (NONE, 1)
    await settle(f_other)


@pytest.mark.broker_config(group_initial_rebalance_delay_ms=DELAY_MS)
async def test_JG_14_each_new_member_extends_the_delay(env: GroupEnv) -> None:
    """Group y gets a second member within the first delay: its check at D extends the phase by
    another D. Group x, whose lone member joined after both of y's, completes first."""
    y1, y2 = env.member("y", "y1", rebalance_ms=LONG_MS), env.member("y", "y2", rebalance_ms=LONG_MS)
    fy1 = await y1.start_join()
    fy2 = await y2.start_join()
    x = env.member("x", "x", rebalance_ms=LONG_MS)
    fx = await x.start_join()
    assert await first_of(fx, fy1, fy2) is fx
    assert not fy1.done()
    resp = await settle(fy1)
    assert {m.member_id for m in resp.members} == {y1.member_id, y2.member_id}
    assert (await settle(fy2)).generation_id == resp.generation_id == 1


@pytest.mark.broker_config(group_initial_rebalance_delay_ms=DELAY_MS)
async def test_JG_14_extension_is_bounded_by_the_rebalance_timeout(env: GroupEnv) -> None:
    """remaining = max(rebalanceTimeout - D, 0): group z (rebalance timeout D) has no time left to
    extend and completes at D despite its second member; group y (long timeout) extends to 2D."""
    z1, z2 = env.member("z", "z1", rebalance_ms=DELAY_MS), env.member("z", "z2", rebalance_ms=DELAY_MS)
    y1, y2 = env.member("y", "y1", rebalance_ms=LONG_MS), env.member("y", "y2", rebalance_ms=LONG_MS)
    fy1 = await y1.start_join()
    await y2.start_join()
    fz1 = await z1.start_join()
    fz2 = await z2.start_join()
    assert await first_of(fy1, fz1) is fz1
    resp = await settle(fz1)
    assert {m.member_id for m in resp.members} == {z1.member_id, z2.member_id}
    await settle(fz2)
    await settle(fy1)


@pytest.mark.broker_config(group_initial_rebalance_delay_ms=DELAY_MS)
async def test_JG_14_join_and_leave_do_not_end_the_initial_rebalance_early(env: GroupEnv) -> None:
    a, b = env.member("g", "a", rebalance_ms=LONG_MS), env.member("g", "b", rebalance_ms=LONG_MS)
    fa = await a.start_join()
    fb = await b.start_join()
    await env.barrier()
    assert [m.error_code for m in (await b.leave()).members] == [NONE]  # every remaining member has joined
    assert (await settle(fb)).error_code == UNKNOWN_MEMBER_ID
    again = await a.start_join()  # a JoinGroup from a joined member: would complete a later rebalance
    assert not await answered_within(again, DELAY_MS / 2000)
    assert not fa.done()
    resp = await settle(again)
    assert (resp.generation_id, [m.member_id for m in resp.members]) == (1, [a.member_id])


@pytest.mark.broker_config(group_initial_rebalance_delay_ms=LONG_MS)
async def test_JG_14_pending_member_expiry_can_end_the_initial_rebalance(env: GroupEnv) -> None:
    """Only an expiry completes the initial join phase early (CT-3 here): the delay is a minute."""
    a = env.member("g", "a", rebalance_ms=LONG_MS)
    fa = await a.start_join()
    pending = env.member("g", "pending", session_ms=200)
    await pending.get_member_id()
    resp = await settle(fa)
    assert (resp.error_code, resp.generation_id, [m.member_id for m in resp.members]) == (NONE, 1, [a.member_id])


# -- CT-1: liveness ---------------------------------------------------------------------------------


async def test_CT_1_silent_member_is_removed_and_the_group_rebalances(env: GroupEnv) -> None:
    a = env.member("g", "a", rebalance_ms=LONG_MS)
    await a.join()
    b = env.member("g", "b", session_ms=200, rebalance_ms=LONG_MS)
    fb = await b.start_join()
    await env.barrier()
    await a.join()
    await settle(fb)
    fs = await b.start_sync()
    await a.sync({})
    await settle(fs)
    await env.wait_state("g", "PreparingRebalance")
    assert set((await env.describe("g")).members) == {a.member_id}
    assert await b.heartbeat() == UNKNOWN_MEMBER_ID
    assert await a.heartbeat() == REBALANCE_IN_PROGRESS


async def test_CT_1_static_members_expire_too(env: GroupEnv) -> None:
    a = env.member("g", "a", rebalance_ms=LONG_MS)
    await a.join()
    s = env.member("g", "s", instance_id="s", session_ms=200, rebalance_ms=LONG_MS)
    fs = await s.start_join()
    await env.barrier()
    await a.join()
    await settle(fs)
    await env.wait_state("g", "PreparingRebalance")
    assert await s.heartbeat() == UNKNOWN_MEMBER_ID  # the instance id is not registered any more


async def test_CT_1_expiry_in_preparing_rebalance_completes_the_join(env: GroupEnv) -> None:
    a = env.member("g", "a", rebalance_ms=LONG_MS)
    await a.join()
    b = env.member("g", "b", session_ms=200, rebalance_ms=LONG_MS)
    fb = await b.start_join()
    await env.barrier()
    await a.join()
    await settle(fb)
    fs = await b.start_sync()
    await a.sync({})
    await settle(fs)
    fa = await a.start_join()  # b never rejoins; the rebalance timeout is a minute
    resp = await settle(fa)
    assert (resp.error_code, [m.member_id for m in resp.members]) == (NONE, [a.member_id])


async def test_CT_1_member_with_a_parked_join_is_not_expired(env: GroupEnv) -> None:
    a = env.member("g", "a", rebalance_ms=LONG_MS)
    b = env.member("g", "b", session_ms=150, rebalance_ms=LONG_MS)
    c = env.member("g", "c", rebalance_ms=LONG_MS)
    await a.join()
    futs = [await b.start_join(), await c.start_join()]
    await env.barrier()
    await a.join()
    for f in futs:
        await settle(f)
    # Everyone synced; b's join is then parked while c takes its time.
    syncs = [await b.start_sync(), await c.start_sync()]
    await a.sync({})
    for f in syncs:
        await settle(f)
    fa = await a.start_join()
    fb = await b.start_join()
    await env.elapse(450)  # three of b's sessions
    assert b.member_id in (await env.describe("g")).members
    await c.join()
    assert (await settle(fb)).error_code == NONE
    assert {m.member_id for m in (await settle(fa)).members} == {a.member_id, b.member_id, c.member_id}


async def test_CT_1_member_with_a_parked_sync_is_not_expired_and_rearmed_when_answered(env: GroupEnv) -> None:
    """While its SyncGroup is parked the member is kept; answering it re-arms the session timer, so
    the silent member is then expired."""
    a, b = await joined_group(env, "g", 2, session_ms=150, rebalance_ms=LONG_MS)
    beat_a = await a.keep_alive(interval_ms=30)
    try:
        fb = await b.start_sync()
        await env.elapse(450)
        assert b.member_id in (await env.describe("g")).members
        await a.sync({a.member_id: b"A", b.member_id: b"B"})
        assert bytes((await settle(fb)).assignment) == b"B"
        await env.wait_state("g", "PreparingRebalance")
        assert set((await env.describe("g")).members) == {a.member_id}
    finally:
        beat_a.cancel()


# -- CT-2, CT-3, CT-4, CT-5 -------------------------------------------------------------------------


async def test_CT_2_new_member_join_timeout_replaces_the_session_timeout(env: GroupEnv) -> None:
    """A new member's liveness timer is the 300000 ms new-member join timeout until its first join
    completes. Observed two ways: the parked new member outlives its 100 ms session several times
    (black box), and the in-process broker's timer for it is armed about 300 s ahead."""
    (a,) = await stable_group(env, "g", 1, rebalance_ms=LONG_MS)
    n = env.member("g", "new", session_ms=100, rebalance_ms=LONG_MS)
    fn = await n.start_join()
    await env.barrier()
    shard = env.broker.coordinator.shard_for("g")
    deadline = shard.timers.deadline(f"heartbeat-g-{n.member_id}")
    assert deadline is not None
    assert 299 < deadline - asyncio.get_running_loop().time() < 300.001
    await env.elapse(400)
    assert n.member_id in (await env.describe("g")).members
    await a.join()
    assert (await settle(fn)).error_code == NONE
    await env.wait_state("g", "PreparingRebalance")  # after its first join: the 100 ms session counts
    assert set((await env.describe("g")).members) == {a.member_id}


async def test_CT_3_pending_member_expires_after_its_own_session_timeout(env: GroupEnv) -> None:
    """A pending member holds the join phase until it joins or its JoinGroup's session timeout
    passes; then it is dropped and the phase completes."""
    (a,) = await stable_group(env, "g", 1, rebalance_ms=LONG_MS)
    short, long_ = env.member("g", "short", session_ms=150), env.member("g", "long", session_ms=LONG_MS)
    await short.get_member_id()
    await long_.get_member_id()
    fa = await a.start_join()
    await env.elapse(450)
    assert not fa.done()  # `long` is still pending
    await long_.start_join()
    resp = await settle(fa)
    assert {m.member_id for m in resp.members} == {a.member_id, long_.member_id}
    late = await settle(await short.send_join())
    assert (late.error_code, late.member_id) == (UNKNOWN_MEMBER_ID, short.member_id)  # no longer pending


async def test_CT_3_pending_member_expiry_completes_the_join(env: GroupEnv) -> None:
    (a,) = await stable_group(env, "g", 1, rebalance_ms=LONG_MS)
    pending = env.member("g", "pending", session_ms=150)
    await pending.get_member_id()
    fa = await a.start_join()
    resp = await settle(fa)  # long before the minute-long rebalance timeout
    assert [m.member_id for m in resp.members] == [a.member_id]


async def test_CT_4_join_timer_is_the_largest_rebalance_timeout(env: GroupEnv) -> None:
    """a (100 ms) rejoins, b (700 ms) does not: the join phase lasts 700 ms, then drops b."""
    a = env.member("g", "a", rebalance_ms=100)
    b = env.member("g", "b", rebalance_ms=700, session_ms=LONG_MS)
    await a.join()
    fb = await b.start_join()
    await env.barrier()
    await a.join()
    await settle(fb)
    fs = await b.start_sync()
    await a.sync({})
    await settle(fs)
    fa = await a.start_join()
    await env.elapse(350)
    assert not fa.done()
    resp = await settle(fa)
    assert [m.member_id for m in resp.members] == [a.member_id]
    assert await b.heartbeat() == UNKNOWN_MEMBER_ID


async def test_CT_4_join_timer_is_computed_when_scheduled(env: GroupEnv) -> None:
    """A member with a longer rebalance timeout that joins during the phase does not move the timer."""
    a, b = await stable_group(env, "g", 2, rebalance_ms=150)
    fa = await a.start_join()
    c = env.member("g", "c", rebalance_ms=LONG_MS)
    fc = await c.start_join()
    resp = await settle(fa)  # at 150 ms, not after a minute
    assert {m.member_id for m in resp.members} == {a.member_id, c.member_id}
    assert (await settle(fc)).generation_id == resp.generation_id
    assert await b.heartbeat() == UNKNOWN_MEMBER_ID


async def test_CT_5_members_that_never_sync_are_removed(env: GroupEnv) -> None:
    """At the rebalance timeout after the join phase, members that sent no SyncGroup are removed
    (however alive) and a rebalance is prepared; members that synced stay."""
    leader, f1, f2 = await joined_group(env, "g", 3, rebalance_ms=200)
    beat = await f2.keep_alive(interval_ms=30)  # alive, but it never syncs
    try:
        p1 = await f1.start_sync()
        await leader.sync({})
        await settle(p1)
        await env.wait_state("g", "PreparingRebalance")
        assert set((await env.describe("g")).members) == {leader.member_id, f1.member_id}
        assert await f2.heartbeat() == UNKNOWN_MEMBER_ID
    finally:
        beat.cancel()


async def test_CT_5_leader_that_never_syncs_fails_the_parked_syncs(env: GroupEnv) -> None:
    _, follower = await joined_group(env, "g", 2, rebalance_ms=200)
    parked = await follower.start_sync()
    resp = await settle(parked)  # the pending-sync timer removes the leader and rebalances (JG-13a)
    assert (resp.error_code, bytes(resp.assignment)) == (REBALANCE_IN_PROGRESS, b"")
    assert set((await env.describe("g")).members) == {follower.member_id}


async def test_CT_5_timer_is_cancelled_once_everyone_synced(env: GroupEnv) -> None:
    members = await stable_group(env, "g", 2, rebalance_ms=150)
    await env.elapse(450)
    d = await env.describe("g")
    assert (d.state, set(d.members)) == ("Stable", {m.member_id for m in members})


# -- CT-6, CT-8 -------------------------------------------------------------------------------------


async def test_CT_6_unload_answers_parked_requests_not_coordinator(env: GroupEnv) -> None:
    """At broker stop every shard unloads: parked JoinGroups (PreparingRebalance) and SyncGroups
    (CompletingRebalance) are answered NOT_COORDINATOR; JoinGroup echoes the member id."""
    p_leader, _ = await stable_group(env, "preparing", 2, rebalance_ms=LONG_MS)
    parked_join = await p_leader.start_join()
    _, c_follower = await joined_group(env, "completing", 2, rebalance_ms=LONG_MS)
    parked_sync = await c_follower.start_sync()
    await env.barrier()
    assert not parked_join.done() and not parked_sync.done()
    await env.broker.stop()
    join = await settle(parked_join)
    assert (join.error_code, join.member_id) == (NOT_COORDINATOR, p_leader.member_id)
    sync = await settle(parked_sync)
    assert (sync.error_code, bytes(sync.assignment)) == (NOT_COORDINATOR, b"")


async def _ct8_join_completes(env: GroupEnv, mp: object) -> None:
    a, b = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    fa = await a.start_join()
    await b.join()
    assert (await settle(fa)).error_code == NONE


async def _ct8_member_leaves(env: GroupEnv, mp: object) -> None:
    a, b, _ = await stable_group(env, "g", 3, rebalance_ms=LONG_MS)
    await a.start_join()
    fb = await b.start_join()
    await env.barrier()
    await b.leave()
    resp = await settle(fb)
    assert (resp.error_code, resp.member_id) == (UNKNOWN_MEMBER_ID, "")


async def _ct8_rebalance_while_completing(env: GroupEnv, mp: object) -> None:
    _, b = await joined_group(env, "g", 2, rebalance_ms=LONG_MS)
    fb = await b.start_sync()
    await env.barrier()
    await env.member("g", "newcomer").start_join()
    resp = await settle(fb)
    assert (resp.error_code, bytes(resp.assignment)) == (REBALANCE_IN_PROGRESS, b"")


async def _ct8_assignment_committed(env: GroupEnv, mp: object) -> None:
    a, b = await joined_group(env, "g", 2)
    fb = await b.start_sync()
    await a.sync({b.member_id: b"mine"})
    resp = await settle(fb)
    assert (resp.error_code, bytes(resp.assignment)) == (NONE, b"mine")


async def _ct8_assignment_write_fails(env: GroupEnv, mp: object) -> None:
    a, b = await joined_group(env, "g", 2, rebalance_ms=LONG_MS)
    fb = await b.start_sync()
    await env.barrier()
    fail_writes(env.broker, "g")
    await a.sync({b.member_id: b"mine"})
    resp = await settle(fb)
    assert (resp.error_code, bytes(resp.assignment)) == (NOT_COORDINATOR, b"")


async def _ct8_static_replacement(env: GroupEnv, mp: object) -> None:
    a = env.member("g", "a", rebalance_ms=LONG_MS)
    await a.join()
    s = env.member("g", "s", instance_id="s", rebalance_ms=LONG_MS)
    fs = await s.start_join()
    await env.barrier()
    await a.join()
    await settle(fs)
    parked = await s.start_sync()
    await env.barrier()
    await env.member("g", "s2", instance_id="s", rebalance_ms=LONG_MS).start_join()
    assert (await settle(parked)).error_code == 82


async def _ct8_duplicate_join(env: GroupEnv, mp: object) -> None:
    a, b = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    first = await a.start_join()
    await env.barrier()
    second = await a.start_join()
    await env.barrier()
    await b.join()
    assert (await settle(second)).error_code == NONE
    assert not await answered_within(first, 0.1)


CT8_EVENTS = {
    "join phase completes": _ct8_join_completes,
    "member removed by LeaveGroup": _ct8_member_leaves,
    "rebalance starts while CompletingRebalance": _ct8_rebalance_while_completing,
    "leader's assignment committed": _ct8_assignment_committed,
    "leader's assignment write fails": _ct8_assignment_write_fails,
    "static replacement": _ct8_static_replacement,
    "new JoinGroup from the same member": _ct8_duplicate_join,
}


@pytest.mark.parametrize("event", list(CT8_EVENTS))
async def test_CT_8_fate_of_parked_requests(env: GroupEnv, monkeypatch: pytest.MonkeyPatch, event: str) -> None:
    """The table of CT-8 (unload: CT-6; expiry: a member with a parked request is never expired
    unless new, which takes the 300 s of CT-2; upgrade to a consumer group: not served)."""
    await CT8_EVENTS[event](env, monkeypatch)


@pytest.mark.broker_config(group_max_size=2)
async def test_CT_8_group_size_gate_answers_the_rejected_join(env: GroupEnv) -> None:
    await stable_group(env, "g", 2)
    resp = await settle(await env.member("g", "third").send_join(""))
    assert (resp.error_code, resp.member_id) == (81, "")
