"""Spec 4.1, the membership side of OffsetCommit on classic groups: OC-4 (validation order) and
OC-5 (an accepted commit keeps the member alive). OC-4's first check (Dead) is not observable on
the wire of a single broker."""

from __future__ import annotations

import asyncio

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

P = ("t", 0)


@pytest.fixture
async def topic(env: GroupEnv) -> str:
    await env.create_topic("t")
    return "t"


async def test_OC_4_empty_group_accepts_generation_minus_one_from_anyone(env: GroupEnv, topic: str) -> None:
    """Step 2 precedes member validation: any member id, even an instance id, is accepted."""
    (m,) = await stable_group(env, "g", 1)
    await m.leave()
    assert await env.state("g") == "Empty"
    for member_id, instance_id in (("", None), ("ghost", None), ("ghost", "no-such-instance")):
        assert await m.commit({P: 1}, generation=-1, member_id=member_id, instance_id=instance_id) == {P: NONE}
    # A generation >= 0 asks for member validation, which nobody passes in an Empty group.
    assert await m.commit({P: 1}, generation=0, member_id="") == {P: UNKNOWN_MEMBER_ID}
    assert await m.commit({P: 1}, generation=m.generation, member_id=m.member_id) == {P: UNKNOWN_MEMBER_ID}


@pytest.mark.parametrize("version", [2, 5, 8])
async def test_OC_4_member_then_generation_in_a_stable_group(env: GroupEnv, topic: str, version: int) -> None:
    leader, follower = await stable_group(env, "g", 2)
    gen = leader.generation
    cases = [
        ({"member_id": "ghost", "generation": gen + 3}, UNKNOWN_MEMBER_ID),  # the member check comes first
        ({"member_id": follower.member_id, "generation": gen - 1}, ILLEGAL_GENERATION),
        ({"member_id": follower.member_id, "generation": -1}, ILLEGAL_GENERATION),  # a member id asks for validation
        ({"member_id": "", "generation": -1}, UNKNOWN_MEMBER_ID),  # step 4: not Empty
        ({"member_id": follower.member_id, "generation": gen}, NONE),
        ({"member_id": leader.member_id, "generation": gen}, NONE),
    ]
    for overrides, error in cases:
        assert await leader.commit({P: 7}, version=version, **{"instance_id": None, **overrides}) == {P: error}, overrides


async def test_OC_4_static_members_are_validated_by_instance_id(env: GroupEnv, topic: str) -> None:
    leader = env.member("g", "leader")
    await leader.join()
    static = env.member("g", "static", instance_id="s")
    f = await static.start_join()
    await env.barrier()
    await leader.join()
    await settle(f)
    fs = await static.start_sync()
    await leader.sync({})
    await settle(fs)
    gen = leader.generation
    cases = [
        ({"member_id": leader.member_id, "instance_id": "s"}, FENCED_INSTANCE_ID),
        ({"member_id": "", "instance_id": "s", "generation": -1}, FENCED_INSTANCE_ID),  # an instance id asks for validation
        ({"member_id": leader.member_id, "instance_id": "unregistered"}, UNKNOWN_MEMBER_ID),
        ({"member_id": static.member_id, "instance_id": "s", "generation": gen + 1}, ILLEGAL_GENERATION),
        ({"member_id": static.member_id, "instance_id": "s"}, NONE),
    ]
    for overrides, error in cases:
        assert await leader.commit({P: 3}, **{"generation": gen, **overrides}) == {P: error}, overrides


async def test_OC_4_completing_rebalance_is_rebalance_in_progress(env: GroupEnv, topic: str) -> None:
    _, follower = await joined_group(env, "g", 2)
    assert await env.state("g") == "CompletingRebalance"
    assert await follower.commit({P: 1}) == {P: REBALANCE_IN_PROGRESS}
    assert await follower.commit({P: 1}, generation=follower.generation - 1) == {P: ILLEGAL_GENERATION}  # checked first


async def test_OC_4_preparing_rebalance_accepts_the_generation_being_rebalanced_away(env: GroupEnv, topic: str) -> None:
    leader, follower = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    await leader.start_join()
    await env.barrier()
    assert await env.state("g") == "PreparingRebalance"
    assert await follower.commit({P: 9}) == {P: NONE}
    assert await follower.commit({P: 9}, generation=follower.generation + 1) == {P: ILLEGAL_GENERATION}


@pytest.mark.parametrize("state", ["Stable", "PreparingRebalance"])
async def test_OC_5_accepted_commit_resets_the_session(env: GroupEnv, topic: str, state: str) -> None:
    """A member with a 300 ms session that only commits (never heartbeats) stays in the group."""
    leader = env.member("g", "leader", rebalance_ms=LONG_MS)
    await leader.join()
    committer = env.member("g", "committer", session_ms=300, rebalance_ms=LONG_MS)
    f = await committer.start_join()
    await env.barrier()
    await leader.join()
    await settle(f)
    fs = await committer.start_sync()
    await leader.sync({})
    await settle(fs)
    if state == "PreparingRebalance":
        await leader.start_join()
        await env.barrier()
    assert await env.state("g") == state
    stop = False

    async def keep_committing() -> None:
        while not stop:
            assert await committer.commit({P: 1}) == {P: NONE}

    task = asyncio.get_running_loop().create_task(keep_committing())
    try:
        await env.elapse(900)
    finally:
        stop = True
        await task
    assert await env.state("g") == state
    assert committer.member_id in (await env.describe("g")).members
