"""Spec 3.2, JoinGroup v0-v9 (JG-1..JG-19) over the raw protocol.

JG-5 (a Dead group answers COORDINATOR_NOT_AVAILABLE) is not observable on the wire of a single
broker: a group is Dead only while its shard unloads, when no request reaches it. JG-14 lives in
test_classic_timers.py with the other timers.
"""

from __future__ import annotations

import re

import pytest

from protocol.errors import ErrorCode
from tests.support.classic import (
    FENCED_INSTANCE_ID,
    GROUP_MAX_SIZE_REACHED,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    LONG_MS,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_SERVER_ERROR,
    GroupEnv,
    answered_within,
    joined_group,
    settle,
    stable_group,
)
from tests.support.groups import subscription

ALL_VERSIONS = range(10)
UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def null_name(version: int) -> str | None:
    """JG-18: how an absent protocol name is written at `version`."""
    return None if version >= 7 else ""


def assert_error_response(resp: object, error: int, member_id: str, version: int) -> None:
    """An error JoinGroup response: no generation, leader, protocol or members (JG-11, JG-18)."""
    assert resp.error_code == error, resp  # type: ignore[attr-defined]
    assert resp.member_id == member_id, resp  # type: ignore[attr-defined]
    assert resp.generation_id == -1, resp  # type: ignore[attr-defined]
    assert resp.leader == "", resp  # type: ignore[attr-defined]
    assert resp.protocol_name == null_name(version), resp  # type: ignore[attr-defined]
    assert resp.members == [], resp  # type: ignore[attr-defined]
    if version >= 7:
        assert resp.protocol_type is None, resp  # type: ignore[attr-defined]
    if version >= 9:
        assert resp.skip_assignment is False, resp  # type: ignore[attr-defined]


# -- JG-1, JG-2 ----------------------------------------------------------------------------------


@pytest.mark.broker_config(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=1_800_000)
@pytest.mark.parametrize("version", [0, 4, 9])
@pytest.mark.parametrize(("session_ms", "valid"), [(5999, False), (6000, True), (1_800_000, True), (1_800_001, False)])
async def test_JG_1_session_timeout_bounds(env: GroupEnv, version: int, session_ms: int, valid: bool) -> None:
    """Kafka's default bounds, inclusive; the check precedes the group lookup and echoes MemberId."""
    m = env.member("jg1", version=version, session_ms=session_ms)
    resp = await settle(await m.send_join("not-a-member"))
    if valid:
        assert (resp.error_code, resp.member_id) == (UNKNOWN_MEMBER_ID, "not-a-member")  # reached the group lookup (JG-3b)
    else:
        assert (resp.error_code, resp.member_id) == (INVALID_SESSION_TIMEOUT, "not-a-member")
        assert await env.state("jg1") == "Dead"  # nothing was created


@pytest.mark.broker_config(group_min_session_timeout_ms=300, group_max_session_timeout_ms=400)
async def test_JG_1_configured_bounds_apply(env: GroupEnv) -> None:
    for session_ms, error in [
        (299, INVALID_SESSION_TIMEOUT),
        (300, MEMBER_ID_REQUIRED),
        (400, MEMBER_ID_REQUIRED),
        (401, INVALID_SESSION_TIMEOUT),
    ]:
        resp = await settle(await env.member("jg1", session_ms=session_ms).send_join(""))
        assert resp.error_code == error, session_ms


async def test_JG_2_v0_rebalance_timeout_is_the_session_timeout(env: GroupEnv) -> None:
    """A v0 member (session 1000 ms, so rebalance timeout 1000 ms) that does not rejoin holds the
    join phase open for 1000 ms, not for the other member's 100 ms rebalance timeout."""
    leader = env.member("g", "leader", rebalance_ms=100, session_ms=LONG_MS)
    await leader.join()
    old = env.member("g", "v0", version=0, session_ms=1000)
    f = await old.start_join()
    await env.barrier()
    await leader.join()
    await settle(f)
    fs = await old.start_sync(version=0)
    await leader.sync({})
    await settle(fs)
    beat = await old.keep_alive(interval_ms=100)  # alive, but it never rejoins
    try:
        rejoin = await leader.start_join()
        await env.elapse(400)  # every timer due within 400 ms has fired
        assert not rejoin.done(), "the join phase ended before the v0 member's rebalance timeout"
        resp = await settle(rejoin)
    finally:
        beat.cancel()
    assert (resp.error_code, [m.member_id for m in resp.members]) == (NONE, [leader.member_id])


# -- JG-3 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 3, 4, 9])
async def test_JG_3a_join_with_empty_member_id_creates_the_group(env: GroupEnv, version: int) -> None:
    assert await env.state("g") == "Dead"  # DescribeGroups' answer for a group that does not exist
    m = env.member("g", version=version)
    if version >= 4:
        await m.get_member_id()
        assert await env.state("g") == "Empty"
    resp = await m.join()
    assert (resp.error_code, resp.generation_id) == (NONE, 1)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_JG_3b_unknown_group_with_member_id_is_unknown_member(env: GroupEnv, version: int) -> None:
    resp = await settle(await env.member("g", version=version).send_join("ghost"))
    assert_error_response(resp, UNKNOWN_MEMBER_ID, "ghost", version)
    assert await env.state("g") == "Dead"


# -- JG-4 ------------------------------------------------------------------------------------------


@pytest.mark.broker_config(group_max_size=2)
@pytest.mark.parametrize("state", ["CompletingRebalance", "Stable"])
async def test_JG_4_full_group_rejects_new_members(env: GroupEnv, state: str) -> None:
    """CompletingRebalance/Stable: existing members are accepted, new ones only below group.max.size;
    the gate comes before MEMBER_ID_REQUIRED and answers GROUP_MAX_SIZE_REACHED with MemberId ""."""
    members = await (joined_group if state == "CompletingRebalance" else stable_group)(env, "g", 2)
    assert await env.state("g") == state
    for version in (3, 9):
        resp = await settle(await env.member("g", "third", version=version).send_join(""))
        assert_error_response(resp, GROUP_MAX_SIZE_REACHED, "", version)
    static = await settle(await env.member("g", "static", instance_id="s").send_join(""))
    assert (static.error_code, static.member_id) == (GROUP_MAX_SIZE_REACHED, "")
    follower = members[1]
    resp = await follower.join()  # an existing member with the same metadata: current generation
    assert (resp.error_code, resp.generation_id) == (NONE, follower.generation)
    assert await env.state("g") == state


@pytest.mark.broker_config(group_max_size=2)
async def test_JG_4_static_member_restarting_into_a_full_stable_group_is_rejected(env: GroupEnv) -> None:
    """The note of JG-4: the gate sees MemberId "" (a new member), before any static replacement."""
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
    resp = await settle(await env.member("g", "static", instance_id="s").send_join(""))
    assert (resp.error_code, resp.member_id) == (GROUP_MAX_SIZE_REACHED, "")
    assert await static.heartbeat() == NONE  # the old member id was not replaced


@pytest.mark.broker_config(group_max_size=2)
async def test_JG_4_preparing_rebalance_counts_members_awaiting_join(env: GroupEnv) -> None:
    """PreparingRebalance: a member already awaiting join is accepted; others only while fewer
    than group.max.size members await join. A rejected existing member is removed from the group."""
    a, b = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    await a.start_join()  # 1 awaiting
    c = env.member("g", "c", rebalance_ms=LONG_MS)
    fc = await c.start_join()  # MEMBER_ID_REQUIRED, then added: 2 awaiting, 3 members
    await env.barrier()
    d = await env.describe("g")
    assert (d.state, set(d.members)) == ("PreparingRebalance", {a.member_id, b.member_id, c.member_id})
    rejected = await settle(await b.send_join())
    assert_error_response(rejected, GROUP_MAX_SIZE_REACHED, "", 9)
    assert set((await env.describe("g")).members) == {a.member_id, c.member_id}
    assert await b.heartbeat() == UNKNOWN_MEMBER_ID
    again = await settle(await a.send_join())  # accepted: a awaits join already
    assert again.error_code == NONE
    assert {m.member_id for m in again.members} == {a.member_id, c.member_id}
    assert (await settle(fc)).generation_id == again.generation_id


# -- JG-6 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 9])
async def test_JG_6_empty_group_needs_a_protocol_type_and_protocols(env: GroupEnv, version: int) -> None:
    m = env.member("g", version=version)
    resp = await settle(await m.send_join("", protocol_type=""))
    assert_error_response(resp, INCONSISTENT_GROUP_PROTOCOL, "", version)
    resp = await settle(await m.send_join("", protocols=[]))
    assert_error_response(resp, INCONSISTENT_GROUP_PROTOCOL, "", version)
    assert (await env.describe("g")).members == {}


async def test_JG_6_protocol_type_must_match_the_group(env: GroupEnv) -> None:
    await stable_group(env, "g", 1)
    resp = await settle(await env.member("g", "other", protocol_type="connect").send_join(""))
    assert_error_response(resp, INCONSISTENT_GROUP_PROTOCOL, "", 9)


async def test_JG_6_some_protocol_must_be_supported_by_every_member(env: GroupEnv) -> None:
    _, b = await stable_group(env, "g", 2, protocols=[("range", b"r"), ("sticky", b"s")])
    # A new member needs one protocol every member supports; a known member gets its id echoed.
    resp = await settle(await env.member("g", "new", protocols=[("roundrobin", b"x")]).send_join(""))
    assert_error_response(resp, INCONSISTENT_GROUP_PROTOCOL, "", 9)
    ok = await settle(await env.member("g", "new2", protocols=[("roundrobin", b"x"), ("sticky", b"s")]).send_join(""))
    assert ok.error_code == MEMBER_ID_REQUIRED
    resp = await settle(await b.send_join(protocols=[("roundrobin", b"x")]))
    assert_error_response(resp, INCONSISTENT_GROUP_PROTOCOL, b.member_id, 9)
    assert await env.state("g") == "Stable"


@pytest.mark.parametrize("version", [7, 9])
async def test_JG_6_first_member_sets_the_protocol_type(env: GroupEnv, version: int) -> None:
    m = env.member("g", version=version, protocol_type="my-type", protocols=[("p", b"meta")])
    resp = await m.join()
    assert (resp.protocol_type, resp.protocol_name) == ("my-type", "p")
    assert (await env.describe("g")).protocol_type == "my-type"


# -- JG-7, JG-8, JG-9 ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(4, 10))
async def test_JG_7_member_id_required_for_v4_dynamic_members(env: GroupEnv, version: int) -> None:
    """Answered at once; the id is pending, not a member: no state change, no rebalance."""
    (existing,) = await stable_group(env, "g", 1)
    m = env.member("g", "newcomer", version=version)
    resp = await settle(await m.send_join(""))
    assert_error_response(resp, MEMBER_ID_REQUIRED, resp.member_id, version)
    assert resp.member_id.startswith("newcomer-")
    d = await env.describe("g")
    assert (d.state, set(d.members)) == ("Stable", {existing.member_id})
    assert await existing.heartbeat() == NONE


@pytest.mark.parametrize("version", range(4))
async def test_JG_7_versions_0_to_3_add_the_member_at_once(env: GroupEnv, version: int) -> None:
    (existing,) = await stable_group(env, "g", 1)
    m = env.member("g", "old-client", version=version)
    f = await m.start_join()
    await env.barrier()
    d = await env.describe("g")
    assert d.state == "PreparingRebalance"
    (new_id,) = set(d.members) - {existing.member_id}
    assert new_id.startswith("old-client-")
    await existing.join()
    resp = await settle(f)
    assert (resp.error_code, resp.member_id, resp.generation_id) == (NONE, new_id, existing.generation)


async def test_JG_8_member_id_format(env: GroupEnv) -> None:
    """Dynamic: <client.id>-<UUID>; static: <group.instance.id>-<UUID>; all distinct."""
    ids = set()
    for i in range(3):
        resp = await settle(await env.member("g", "my.client-1").send_join(""))
        assert re.fullmatch(re.escape("my.client-1") + "-" + UUID, resp.member_id), resp.member_id
        ids.add(resp.member_id)
        static = env.member(f"static-{i}", "my.client-1", instance_id=f"instance-{i}")
        await static.join()
        assert re.fullmatch(re.escape(f"instance-{i}") + "-" + UUID, static.member_id), static.member_id
        ids.add(static.member_id)
    assert len(ids) == 6


async def test_JG_9_pending_member_rejoin_is_added(env: GroupEnv) -> None:
    m = env.member("g")
    await m.get_member_id()
    pending = m.member_id
    resp = await m.join()
    assert (resp.error_code, resp.member_id, resp.leader) == (NONE, pending, pending)


async def test_JG_9_a_pending_member_cannot_be_static(env: GroupEnv) -> None:
    """Kafka throws IllegalStateException for a static JoinGroup carrying a pending member id
    (GMM classicGroupJoinExistingMember); the runtime answers UNKNOWN_SERVER_ERROR through
    handleOperationException, whose JoinGroup response carries MemberId ""."""
    m = env.member("g")
    await m.get_member_id()
    resp = await settle(await m.send_join(m.member_id, instance_id="i-1"))
    assert (resp.error_code, resp.member_id) == (UNKNOWN_SERVER_ERROR, "")
    assert (await m.join()).error_code == NONE  # still pending: the dynamic join is accepted


# -- JG-10, JG-11, JG-12 ---------------------------------------------------------------------------


async def test_JG_10_new_member_is_stored_and_parked(env: GroupEnv) -> None:
    """Client id (request header), client host as InetAddress.toString(), instance id; the first
    member is the leader; the join response waits for the join phase to complete."""
    (leader,) = await stable_group(env, "g", 1, rebalance_ms=LONG_MS)
    s = env.member("g", "client-s", instance_id="inst-s")
    f = await s.start_join()
    assert not await answered_within(f, 0.1)  # parked until the leader rejoins
    d = await env.describe("g")
    member = d.members[next(m for m in d.members if m.startswith("inst-s-"))]
    assert (member.client_id, member.client_host, member.group_instance_id) == ("client-s", "/127.0.0.1", "inst-s")
    await leader.join()
    resp = await settle(f)
    assert resp.leader == leader.member_id
    assert d.members[leader.member_id].client_id == "consumer-0"


@pytest.mark.parametrize("version", [5, 6, 7, 9])
async def test_JG_11_known_member_validation(env: GroupEnv, version: int) -> None:
    leader = env.member("g", "leader", version=version)
    await leader.join()
    static = env.member("g", "static", instance_id="s", version=version)
    f = await static.start_join()
    await env.barrier()
    await leader.join()
    await settle(f)
    await leader.sync({})
    # Instance id not registered -> UNKNOWN_MEMBER_ID; registered to another id -> FENCED_INSTANCE_ID;
    # member id not in the group -> UNKNOWN_MEMBER_ID. Every error echoes MemberId.
    cases = [
        (leader.member_id, "not-registered", UNKNOWN_MEMBER_ID),
        (leader.member_id, "s", FENCED_INSTANCE_ID),
        ("not-a-member", None, UNKNOWN_MEMBER_ID),
        ("not-a-member", "s", FENCED_INSTANCE_ID),
    ]
    for member_id, instance_id, error in cases:
        resp = await settle(await leader.send_join(member_id, instance_id=instance_id))
        assert_error_response(resp, error, member_id, version)
    assert await env.state("g") == "Stable"


async def test_JG_12_preparing_rebalance_updates_and_parks(env: GroupEnv) -> None:
    a, b = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    fa = await a.start_join()
    new_meta = subscription(["t", "u"])
    fb = await b.start_join(protocols=[("range", new_meta)])
    resp = await settle(fa)
    assert {m.member_id: bytes(m.metadata) for m in resp.members}[b.member_id] == new_meta
    assert (await settle(fb)).generation_id == resp.generation_id


async def test_JG_12_preparing_rebalance_rejoin_updates_the_session_timeout(env: GroupEnv) -> None:
    """b rejoins with a 150 ms session (it had a long one): after the join completes, b's silence
    expires it."""
    a, b = await stable_group(env, "g", 2, rebalance_ms=LONG_MS, session_ms=LONG_MS)
    fa = await a.start_join()
    fb = await b.start_join(session_timeout_ms=150)
    await settle(fa)
    await settle(fb)
    await env.wait_state("g", "PreparingRebalance")
    assert set((await env.describe("g")).members) == {a.member_id}


async def test_JG_12_completing_rebalance_same_metadata_returns_current_generation(env: GroupEnv) -> None:
    leader, follower = await joined_group(env, "g", 2)
    for m in (leader, follower):
        resp = await settle(await m.send_join())
        assert (resp.error_code, resp.generation_id, resp.leader, resp.member_id) == (NONE, m.generation, leader.member_id, m.member_id)
        assert resp.skip_assignment is False
        assert {x.member_id for x in resp.members} == ({leader.member_id, follower.member_id} if m is leader else set())
    assert await env.state("g") == "CompletingRebalance"


async def test_JG_12_completing_rebalance_changed_metadata_rebalances(env: GroupEnv) -> None:
    leader, follower = await joined_group(env, "g", 2, rebalance_ms=LONG_MS)
    f = await follower.start_join(protocols=[("range", subscription(["u"]))])
    await env.barrier()
    assert await env.state("g") == "PreparingRebalance"
    assert not f.done()
    await leader.join()
    assert (await settle(f)).generation_id == leader.generation == 3


async def test_JG_12_stable_leader_rejoin_always_rebalances(env: GroupEnv) -> None:
    leader, follower = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    f = await leader.start_join()  # identical metadata
    await env.barrier()
    assert await env.state("g") == "PreparingRebalance"
    assert not f.done()
    await follower.join()
    assert (await settle(f)).generation_id == 3


@pytest.mark.parametrize("change", ["metadata", "order"])
async def test_JG_12_stable_follower_with_changed_metadata_rebalances(env: GroupEnv, change: str) -> None:
    """ "Same metadata" is the ordered protocol list: the same protocols in another order differ."""
    protocols = [("range", b"r"), ("roundrobin", b"rr")]
    leader, follower = await stable_group(env, "g", 2, rebalance_ms=LONG_MS, protocols=protocols)
    changed = [("range", b"r2"), ("roundrobin", b"rr")] if change == "metadata" else list(reversed(protocols))
    f = await follower.start_join(protocols=changed)
    await env.barrier()
    assert await env.state("g") == "PreparingRebalance"
    await leader.join()
    assert (await settle(f)).generation_id == 3


async def test_JG_12_stable_follower_with_same_metadata_gets_current_generation(env: GroupEnv) -> None:
    leader, follower = await stable_group(env, "g", 2)
    resp = await settle(await follower.send_join())
    assert (resp.error_code, resp.generation_id, resp.leader, resp.members) == (NONE, 2, leader.member_id, [])
    assert (resp.protocol_type, resp.protocol_name, resp.skip_assignment) == ("consumer", "range", False)
    assert await env.state("g") == "Stable"


async def test_JG_12_empty_group_rejects_a_known_member(env: GroupEnv) -> None:
    (m,) = await stable_group(env, "g", 1)
    await m.leave()
    assert await env.state("g") == "Empty"
    resp = await settle(await m.send_join())
    assert_error_response(resp, UNKNOWN_MEMBER_ID, m.member_id, 9)


# -- JG-13 -----------------------------------------------------------------------------------------


async def test_JG_13a_rebalance_from_completing_answers_parked_syncs(env: GroupEnv) -> None:
    """Parked SyncGroups get REBALANCE_IN_PROGRESS, empty assignment, null protocol type and name;
    the assignments are cleared (a rebalance from Stable keeps them until the next Stable)."""
    leader, follower = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    stored = {m: bytes(x.member_assignment) for m, x in (await env.describe("g")).members.items()}
    assert all(stored.values())
    f = await leader.start_join()
    await env.barrier()
    d = await env.describe("g")
    assert d.state == "PreparingRebalance"
    assert {m: bytes(x.member_assignment) for m, x in d.members.items()} == stored
    await follower.join()
    await settle(f)
    parked = await follower.start_sync()
    await env.barrier()
    await env.member("g", "newcomer").start_join()
    resp = await settle(parked)
    assert (resp.error_code, bytes(resp.assignment), resp.protocol_type, resp.protocol_name) == (REBALANCE_IN_PROGRESS, b"", None, None)
    d = await env.describe("g")
    assert d.state == "PreparingRebalance"
    assert all(bytes(x.member_assignment) == b"" for x in d.members.values())


async def test_JG_13d_all_members_joined_completes_at_once(env: GroupEnv) -> None:
    (m,) = await stable_group(env, "g", 1, rebalance_ms=LONG_MS)
    resp = await m.join()  # the only member rejoins: no waiting for the rebalance timeout
    assert (resp.error_code, resp.generation_id) == (NONE, 2)


async def test_JG_13d_a_pending_member_holds_the_join_phase(env: GroupEnv) -> None:
    """Every member has joined, but a MEMBER_ID_REQUIRED member is pending: the phase waits for it."""
    (a,) = await stable_group(env, "g", 1, rebalance_ms=LONG_MS)
    c = env.member("g", "c")
    await c.get_member_id()
    fa = await a.start_join()
    await env.barrier()
    assert await env.state("g") == "PreparingRebalance"
    fc = await c.start_join()
    resp = await settle(fa)
    assert {m.member_id for m in resp.members} == {a.member_id, c.member_id}
    assert (await settle(fc)).generation_id == resp.generation_id == 2


# -- JG-15, JG-16, JG-17 ---------------------------------------------------------------------------


async def test_JG_15_dynamic_members_that_did_not_rejoin_are_removed(env: GroupEnv) -> None:
    a, b, c = await stable_group(env, "g", 3, rebalance_ms=200)
    fa = await a.start_join()
    fb = await b.start_join()
    keep_c = await c.keep_alive()  # alive, but it never rejoins
    try:
        resp = await settle(fa)  # at the rebalance timeout
    finally:
        keep_c.cancel()
    assert {m.member_id for m in resp.members} == {a.member_id, b.member_id}
    assert (await settle(fb)).generation_id == resp.generation_id
    assert await c.heartbeat() == UNKNOWN_MEMBER_ID
    assert set((await env.describe("g")).members) == {a.member_id, b.member_id}


async def test_JG_15_leader_stays_leader_when_it_rejoins(env: GroupEnv) -> None:
    a, b = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    fb = await b.start_join(protocols=[("range", subscription(["x"]))])
    await a.join()
    assert (await settle(fb)).leader == a.member_id == a.leader


async def test_JG_15_a_joined_member_replaces_a_leader_that_did_not_rejoin(env: GroupEnv) -> None:
    a, b = await stable_group(env, "g", 2, rebalance_ms=200)
    fb = await b.start_join(protocols=[("range", subscription(["x"]))])
    resp = await settle(fb)  # a never rejoins: removed at the rebalance timeout
    assert (resp.error_code, resp.leader, [m.member_id for m in resp.members]) == (NONE, b.member_id, [b.member_id])
    assert await a.heartbeat() == UNKNOWN_MEMBER_ID


async def test_JG_15_join_phase_completing_without_members_empties_the_group(env: GroupEnv) -> None:
    a, b = await stable_group(env, "g", 2, rebalance_ms=200)
    await b.leave()  # PreparingRebalance, waiting for a, which never rejoins
    await env.wait_state("g", "Empty")
    d = await env.describe("g")
    assert (d.protocol_type, d.protocol_data, d.members) == ("consumer", "", {})
    newcomer = env.member("g", "newcomer")
    await newcomer.join()
    assert newcomer.generation == a.generation + 2  # one phase ended Empty, this one completed


async def test_JG_15_completion_resets_liveness_of_every_member(env: GroupEnv) -> None:
    """A member that joins with a short session is expired from its session timeout after the
    join completes (the join completion replaced the new-member timeout by the session timeout)."""
    leader = env.member("g", "leader", rebalance_ms=LONG_MS)
    await leader.join()
    short = env.member("g", "short", session_ms=200, rebalance_ms=LONG_MS)
    f = await short.start_join()
    await env.barrier()
    await leader.join()
    await settle(f)
    await env.wait_state("g", "PreparingRebalance")  # short stopped talking and was removed
    assert await short.heartbeat() == UNKNOWN_MEMBER_ID


async def test_JG_16_protocol_selected_by_vote_among_common_protocols(env: GroupEnv) -> None:
    """Candidates are the protocols every member supports; each member votes for its first
    candidate; the most votes win (the leader's own preference does not decide)."""
    a = env.member("g", "a", rebalance_ms=LONG_MS, protocols=[("x", b"ax"), ("y", b"ay"), ("z", b"az")])
    b = env.member("g", "b", rebalance_ms=LONG_MS, protocols=[("w", b"bw"), ("z", b"bz"), ("y", b"by")])
    c = env.member("g", "c", rebalance_ms=LONG_MS, protocols=[("z", b"cz"), ("y", b"cy")])
    await a.join()
    fb, fc = await b.start_join(), await c.start_join()
    await env.barrier()
    resp = await a.join()
    # Candidates {y, z}: a votes y, b votes z, c votes z.
    assert resp.protocol_name == "z"
    assert {m.member_id: bytes(m.metadata) for m in resp.members} == {a.member_id: b"az", b.member_id: b"bz", c.member_id: b"cz"}
    for f in (fb, fc):
        assert (await settle(f)).protocol_name == "z"


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_JG_17_join_success_response(env: GroupEnv, version: int) -> None:
    kwargs = {"version": version, "protocols": [("range", b"meta-r"), ("other", b"meta-o")], "rebalance_ms": LONG_MS}
    leader = env.member("g", "leader", **kwargs)
    await leader.join()
    follower = env.member("g", "follower", instance_id="f-1" if version >= 5 else None, **kwargs)
    ff = await follower.start_join()
    await env.barrier()
    fl = await leader.start_join()
    lead, foll = await settle(fl), await settle(ff)
    for resp, m in ((lead, leader), (foll, follower)):
        assert (resp.error_code, resp.generation_id, resp.protocol_name, resp.leader) == (NONE, 2, "range", leader.member_id)
        assert resp.member_id == m.member_id
        if version >= 7:
            assert resp.protocol_type == "consumer"
        if version >= 9:
            assert resp.skip_assignment is False
    assert foll.members == []
    got = {(m.member_id, m.group_instance_id if version >= 5 else None, bytes(m.metadata)) for m in lead.members}
    assert got == {(leader.member_id, None, b"meta-r"), (follower.member_id, "f-1" if version >= 5 else None, b"meta-r")}


# -- JG-18, JG-19 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_JG_18_protocol_name_nullability_by_version(env: GroupEnv, version: int) -> None:
    """v<7 writes an absent protocol name as "", v7+ as null (here: an error response)."""
    resp = await settle(await env.member("g", version=version).send_join("ghost"))
    assert resp.error_code == UNKNOWN_MEMBER_ID
    assert resp.protocol_name == null_name(version)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_JG_18_generic_error_response(env: GroupEnv, version: int) -> None:
    """The API layer's error response (getErrorResponse): GenerationId -1, Leader "", MemberId "",
    no members, protocol name per JG-18, whatever the request carried."""
    env.broker.faults.add(api_key=11, error=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    resp = await settle(await env.member("g", version=version).send_join("some-member"))
    assert_error_response(resp, ErrorCode.GROUP_AUTHORIZATION_FAILED, "", version)


async def test_JG_19_a_second_parked_join_replaces_the_first(env: GroupEnv) -> None:
    a, b = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    first = await a.start_join()
    await env.barrier()
    second = await a.start_join()  # on another connection: the first one keeps its own parked
    await env.barrier()
    await b.join()
    assert (await settle(second)).generation_id == 3
    assert not await answered_within(first, 0.2)
