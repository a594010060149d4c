"""Spec 3.3, SyncGroup v0-v5 (SG-1..SG-7).

SG-3's first check (a Dead group answers COORDINATOR_NOT_AVAILABLE) is not observable on the
wire of a single broker (a group is Dead only while its shard unloads). SG-6's "the group moved
on while the write was in flight" needs a write that completes later than the request that
changes the group, which the tests cannot schedule.
"""

from __future__ import annotations

import pytest

from tests.support.classic import (
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    LONG_MS,
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
from tests.support.groups import assignment


def assert_sync_error(resp: object, error: int) -> None:
    assert resp.error_code == error, resp  # type: ignore[attr-defined]
    assert bytes(resp.assignment) == b"", resp  # type: ignore[attr-defined]
    if getattr(resp, "API_VERSION", 5) >= 5:
        assert (resp.protocol_type, resp.protocol_name) == (None, None), resp  # type: ignore[attr-defined]


@pytest.mark.parametrize(("protocol_type", "protocol_name"), [(None, "range"), ("consumer", None), (None, None)])
async def test_SG_1_v5_requires_protocol_type_and_name(env: GroupEnv, protocol_type: str | None, protocol_name: str | None) -> None:
    """Checked before anything else: an unknown group (UNKNOWN_MEMBER_ID) or an empty group id
    (INVALID_GROUP_ID) still answers INCONSISTENT_GROUP_PROTOCOL."""
    (m,) = await stable_group(env, "g", 1)
    for group, member_id in (("g", m.member_id), ("no-such-group", "x"), ("", "x")):
        m.group = group
        resp = await m.sync(member_id=member_id, protocol_type=protocol_type, protocol_name=protocol_name)
        assert_sync_error(resp, INCONSISTENT_GROUP_PROTOCOL)
    m.group = "g"
    assert (await m.sync(version=4, protocol_type=None, protocol_name=None)).error_code == NONE  # no such fields below v5


@pytest.mark.parametrize("version", range(6))
async def test_SG_2_unknown_or_empty_group_is_unknown_member(env: GroupEnv, version: int) -> None:
    ghost = env.member("absent")
    resp = await ghost.sync(member_id="m", generation=1, version=version)
    assert resp.error_code == UNKNOWN_MEMBER_ID
    (m,) = await stable_group(env, "g", 1)
    await m.leave()
    assert await env.state("g") == "Empty"
    assert (await m.sync(version=version)).error_code == UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", [3, 4, 5])
async def test_SG_3_validation_order(env: GroupEnv, version: int) -> None:
    """Member (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID), then generation (ILLEGAL_GENERATION), then
    protocol type and name (INCONSISTENT_GROUP_PROTOCOL, v5 only)."""
    leader = env.member("g", "leader")
    await leader.join()
    static = env.member("g", "static", instance_id="s")
    f = await static.start_join()
    await env.barrier()
    await leader.join()
    await settle(f)
    gen = leader.generation
    cases = [
        # Unknown member, even with a wrong generation and protocol: the member check comes first.
        ({"member_id": "ghost", "generation": gen + 5, "protocol_name": "other"}, UNKNOWN_MEMBER_ID),
        ({"member_id": leader.member_id, "instance_id": "unregistered"}, UNKNOWN_MEMBER_ID),
        ({"member_id": leader.member_id, "instance_id": "s", "generation": gen + 5}, FENCED_INSTANCE_ID),
        # Known member: the generation comes before the protocol.
        ({"member_id": leader.member_id, "generation": gen - 1, "protocol_name": "other"}, ILLEGAL_GENERATION),
        ({"member_id": static.member_id, "instance_id": "s", "generation": gen + 1}, ILLEGAL_GENERATION),
    ]
    if version >= 5:
        cases += [
            ({"member_id": leader.member_id, "protocol_type": "connect"}, INCONSISTENT_GROUP_PROTOCOL),
            ({"member_id": leader.member_id, "protocol_name": "roundrobin"}, INCONSISTENT_GROUP_PROTOCOL),
        ]
    for overrides, error in cases:
        resp = await leader.sync(version=version, **{"instance_id": None, **overrides})
        assert resp.error_code == error, overrides
    assert await env.state("g") == "CompletingRebalance"
    # Sent by the leader, none of them carried the assignment.
    fs = await static.start_sync(version=version)
    assert not await answered_within(fs, 0.05)
    resp = await leader.sync({leader.member_id: b"L", static.member_id: b"S"}, version=version)
    assert (resp.error_code, bytes(resp.assignment)) == (NONE, b"L")


@pytest.mark.parametrize("version", range(6))
async def test_SG_4_preparing_rebalance_is_rebalance_in_progress(env: GroupEnv, version: int) -> None:
    leader, follower = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    await leader.start_join()
    await env.barrier()
    assert await env.state("g") == "PreparingRebalance"
    resp = await follower.sync(version=version)
    assert (resp.error_code, bytes(resp.assignment)) == (REBALANCE_IN_PROGRESS, b"")


async def test_SG_5_followers_park_and_their_assignments_are_ignored(env: GroupEnv) -> None:
    leader, f1, f2 = await joined_group(env, "g", 3)
    p1 = await f1.start_sync({f1.member_id: b"self-made", leader.member_id: b"bogus"})
    p2 = await f2.start_sync()
    assert not await answered_within(p1, 0.1)
    assert not p2.done()
    plan = {leader.member_id: assignment({"t": [0]}), f1.member_id: assignment({"t": [1]}), f2.member_id: assignment({"t": [2]})}
    lead = await leader.sync(plan)
    assert bytes(lead.assignment) == plan[leader.member_id]
    for p, m in ((p1, f1), (p2, f2)):
        resp = await settle(p)
        assert (resp.error_code, resp.protocol_type, resp.protocol_name, bytes(resp.assignment)) == (
            NONE,
            "consumer",
            "range",
            plan[m.member_id],
        )


@pytest.mark.parametrize("version", range(6))
async def test_SG_6_leader_assignment_is_distributed(env: GroupEnv, version: int) -> None:
    """Members missing from the leader's request get empty bytes, entries for non-members are
    ignored, every parked SyncGroup is answered and the group is Stable."""
    leader, f1, f2 = await joined_group(env, "g", 3)
    p1 = await f1.start_sync(version=version)
    p2 = await f2.start_sync(version=version)
    await env.barrier()
    plan = {leader.member_id: b"lead", f1.member_id: b"one", "not-a-member": b"junk"}
    lead = await leader.sync(plan, version=version)
    answers = {leader.member_id: lead, f1.member_id: await settle(p1), f2.member_id: await settle(p2)}
    for member_id, resp in answers.items():
        assert resp.error_code == NONE
        assert bytes(resp.assignment) == plan.get(member_id, b"")
        if version >= 5:
            assert (resp.protocol_type, resp.protocol_name) == ("consumer", "range")
    d = await env.describe("g")
    assert d.state == "Stable"
    assert {m: bytes(x.member_assignment) for m, x in d.members.items()} == {
        leader.member_id: b"lead",
        f1.member_id: b"one",
        f2.member_id: b"",
    }


async def test_SG_6_failed_assignment_write_answers_every_parked_sync_then_rebalances(env: GroupEnv) -> None:
    """The storage error is mapped (GE-3: KAFKA_STORAGE_ERROR -> NOT_COORDINATOR), assignments are
    cleared and a rebalance is prepared."""
    leader, follower = await joined_group(env, "g", 2, rebalance_ms=LONG_MS)
    parked = await follower.start_sync()
    await env.barrier()
    fail_writes(env.broker, "g")
    lead = await leader.sync({leader.member_id: b"a", follower.member_id: b"b"})
    assert_sync_error(lead, NOT_COORDINATOR)
    assert_sync_error(await settle(parked), NOT_COORDINATOR)
    env.broker.faults.clear()
    d = await env.describe("g")
    assert d.state == "PreparingRebalance"
    assert all(bytes(x.member_assignment) == b"" for x in d.members.values())
    assert await follower.heartbeat() == REBALANCE_IN_PROGRESS


@pytest.mark.parametrize("version", range(6))
async def test_SG_7_stable_answers_the_stored_assignment(env: GroupEnv, version: int) -> None:
    leader, follower = await stable_group(env, "g", 2, assignments=None)
    stored = {m: bytes(x.member_assignment) for m, x in (await env.describe("g")).members.items()}
    resp = await leader.sync({leader.member_id: b"new", follower.member_id: b"new"}, version=version)  # ignored
    assert (resp.error_code, bytes(resp.assignment)) == (NONE, stored[leader.member_id])
    resp = await follower.sync(version=version)
    assert (resp.error_code, bytes(resp.assignment)) == (NONE, stored[follower.member_id])
    if version >= 5:
        assert (resp.protocol_type, resp.protocol_name) == ("consumer", "range")
    assert {m: bytes(x.member_assignment) for m, x in (await env.describe("g")).members.items()} == stored


async def test_SG_7_sync_in_stable_leaves_the_pending_sync_set(env: GroupEnv) -> None:
    """A follower that syncs only after the leader made the group Stable is not removed by the
    pending-sync timer (CT-5)."""
    leader, follower = await joined_group(env, "g", 2, rebalance_ms=150)
    await leader.sync({follower.member_id: b"F"})
    assert bytes((await follower.sync()).assignment) == b"F"
    await env.elapse(450)
    d = await env.describe("g")
    assert (d.state, set(d.members)) == ("Stable", {leader.member_id, follower.member_id})
