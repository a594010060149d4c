"""Spec 3.4, Heartbeat v0-v4 (HB-1..HB-4).

HB-2's Dead check is not observable on the wire of a single broker; HB-3 (NONE while the shard
loads, GE-2) is in test_group_errors.py.
"""

from __future__ import annotations

import pytest

from tests.support.classic import (
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    LONG_MS,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    GroupEnv,
    joined_group,
    settle,
    stable_group,
)


@pytest.mark.parametrize("version", range(5))
async def test_HB_1_unknown_group_is_unknown_member(env: GroupEnv, version: int) -> None:
    m = env.member("absent")
    assert await m.heartbeat(member_id="m", generation=1, version=version) == UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", [3, 4])
async def test_HB_2_validation_order(env: GroupEnv, version: int) -> None:
    leader = env.member("g", "leader")
    await leader.join()
    static = env.member("g", "static", instance_id="s")
    f = await static.start_join()
    await env.barrier()
    await leader.join()
    await settle(f)
    await leader.sync({})
    gen = leader.generation
    pending = env.member("g", "pending")
    await pending.get_member_id()
    cases = [
        ({"member_id": "ghost", "generation": gen + 3}, UNKNOWN_MEMBER_ID),  # the member check comes first
        ({"member_id": leader.member_id, "instance_id": "unregistered"}, UNKNOWN_MEMBER_ID),
        ({"member_id": leader.member_id, "instance_id": "s", "generation": gen + 3}, FENCED_INSTANCE_ID),
        ({"member_id": pending.member_id, "generation": gen}, UNKNOWN_MEMBER_ID),  # pending is not a member
        ({"member_id": leader.member_id, "generation": gen + 1}, ILLEGAL_GENERATION),
        ({"member_id": static.member_id, "instance_id": "s", "generation": gen - 1}, ILLEGAL_GENERATION),
        ({"member_id": static.member_id, "instance_id": "s", "generation": gen}, NONE),
    ]
    for overrides, error in cases:
        assert await leader.heartbeat(version=version, **{"instance_id": None, **overrides}) == error, overrides


@pytest.mark.parametrize("version", range(5))
async def test_HB_4_empty_group(env: GroupEnv, version: int) -> None:
    (m,) = await stable_group(env, "g", 1)
    await m.leave()
    assert await env.state("g") == "Empty"
    assert await m.heartbeat(version=version) == UNKNOWN_MEMBER_ID
    assert await m.heartbeat(version=version, generation=m.generation + 1) == UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", range(5))
async def test_HB_4_preparing_rebalance_is_rebalance_in_progress(env: GroupEnv, version: int) -> None:
    """A member that has not rejoined heartbeats with the current generation (the generation only
    advances at join completion) and is told to rejoin."""
    leader, follower = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    await leader.start_join()
    await env.barrier()
    assert await follower.heartbeat(version=version) == REBALANCE_IN_PROGRESS
    assert await leader.heartbeat(version=version) == REBALANCE_IN_PROGRESS


@pytest.mark.parametrize("state", ["CompletingRebalance", "Stable"])
@pytest.mark.parametrize("version", range(5))
async def test_HB_4_completing_and_stable_answer_none(env: GroupEnv, state: str, version: int) -> None:
    members = await (joined_group if state == "CompletingRebalance" else stable_group)(env, "g", 2)
    assert await env.state("g") == state
    for m in members:
        assert await m.heartbeat(version=version) == NONE


@pytest.mark.parametrize("state", ["PreparingRebalance", "CompletingRebalance", "Stable"])
async def test_HB_4_accepted_heartbeat_resets_the_liveness_timer(env: GroupEnv, state: str) -> None:
    """A member with a 300 ms session that keeps heartbeating outlives its session timeout several
    times over, in every state that accepts heartbeats."""
    leader = env.member("g", "leader", rebalance_ms=LONG_MS, session_ms=LONG_MS)
    await leader.join()
    short = env.member("g", "short", rebalance_ms=LONG_MS, session_ms=300)
    f = await short.start_join()
    await env.barrier()
    await leader.join()
    await settle(f)
    if state != "CompletingRebalance":
        fs = await short.start_sync()
        await leader.sync({})
        await settle(fs)
    if state == "PreparingRebalance":
        await leader.start_join()
    await env.barrier()
    assert await env.state("g") == state
    expected = REBALANCE_IN_PROGRESS if state == "PreparingRebalance" else NONE
    beat = await short.keep_alive(interval_ms=50)
    try:
        await env.elapse(900)
    finally:
        beat.cancel()
    assert await env.state("g") == state
    assert short.member_id in (await env.describe("g")).members
    assert await short.heartbeat() == expected
