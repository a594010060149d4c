"""Classic groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, static membership and the
classic timers (spec sections 2 and 3; rule ids as in docs/coordinator-rules.md)."""

from __future__ import annotations

from tests.differential.harness import Registry
from tests.differential.scenarios.common import (
    HEARTBEAT_VERSIONS,
    JOIN_VERSIONS,
    LEAVE_VERSIONS,
    SYNC_VERSIONS,
    T1,
    T3,
    ApiKey,
    Side,
    assignment,
    describe,
    heartbeat,
    join,
    join_dynamic,
    join_fields,
    leave,
    protocols,
    stable_group,
    subscription,
    sync,
    sync_fields,
    wait_state,
)

scenarios = Registry()

A3 = assignment({T3: [0, 1, 2]})


async def described(s: Side, group: str) -> None:
    """Record the group as DescribeGroups v5 shows it (state, protocol, members)."""
    await s.call("ctl", ApiKey.DESCRIBE_GROUPS, 5, label=f"describe {group}", groups=[group], include_authorized_operations=False)


# -- JoinGroup ---------------------------------------------------------------------------------


@scenarios.versions("jg_happy_single_member", JOIN_VERSIONS, rule="JG-17")
async def _(s: Side, v: int) -> None:
    g = s.group()
    joined = await join_dynamic(s, "a", g, v, reason="first join" if v >= 8 else None)
    await sync(s, "a", g, 3, joined.member_id, joined.generation_id, {joined.member_id: A3})
    await heartbeat(s, "a", g, 3, joined.member_id, joined.generation_id)
    await described(s, g)
    await leave(s, "a", g, 3, [(joined.member_id, None)])
    await described(s, g)


@scenarios.versions("jg_1_session_timeout_below_minimum", JOIN_VERSIONS, rule="JG-1")
async def _(s: Side, v: int) -> None:
    await join(s, "a", s.group(), v, session_timeout_ms=5999)
    await described(s, s.group())


@scenarios.versions("jg_1_session_timeout_above_maximum", (0, 5, 9), rule="JG-1")
async def _(s: Side, v: int) -> None:
    await join(s, "a", s.group(), v, "some-member", session_timeout_ms=1_800_001)


@scenarios("jg_1_session_timeout_bounds_accepted", rule="JG-1")
async def _(s: Side) -> None:
    lo = await join_dynamic(s, "a", s.group("lo"), 9, session_timeout_ms=6000)
    hi = await join_dynamic(s, "b", s.group("hi"), 9, session_timeout_ms=1_800_000)
    s.note("joined", [lo.error_code, hi.error_code])


@scenarios.versions("jg_3b_unknown_member_on_absent_group", JOIN_VERSIONS, rule="JG-3")
async def _(s: Side, v: int) -> None:
    await join(s, "a", s.group(), v, "a-no-such-member")
    await described(s, s.group())


@scenarios.versions("jg_ge_4_empty_group_id", JOIN_VERSIONS, rule="GE-4")
async def _(s: Side, v: int) -> None:
    await join(s, "a", "", v)


@scenarios.versions("jg_6_empty_protocol_type_on_new_group", (0, 4, 7, 9), rule="JG-6")
async def _(s: Side, v: int) -> None:
    await join(s, "a", s.group(), v, protocol_type="")
    await described(s, s.group())


@scenarios.versions("jg_6_no_protocols_on_new_group", (0, 9), rule="JG-6")
async def _(s: Side, v: int) -> None:
    await join(s, "a", s.group(), v, protocols=[])


@scenarios.versions("jg_6_other_protocol_type", (3, 5, 9), rule="JG-6")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await stable_group(s, g)
    await join(s, "b", g, v, protocol_type="connect")


@scenarios("jg_6_no_common_protocol", rule="JG-6")
async def _(s: Side) -> None:
    g = s.group()
    await stable_group(s, g)
    await join(s, "b", g, 9, protocols=[{"name": "roundrobin", "metadata": subscription([T3])}])


@scenarios("jg_6_known_member_other_protocol_type", rule="JG-6")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"))
    await join(s, "b", g, 9, grp["members"]["b"], protocol_type="connect")


@scenarios("jg_7_pending_member_is_not_a_member", rule="JG-7")
async def _(s: Side) -> None:
    g = s.group()
    await join(s, "a", g, 9)
    await described(s, g)


@scenarios("jg_7_pending_member_in_stable_group", rule="JG-7")
async def _(s: Side) -> None:
    g = s.group()
    await stable_group(s, g)
    await join(s, "b", g, 9)
    await described(s, g)


@scenarios.versions("jg_11_unknown_member_in_existing_group", (1, 3, 6, 9), rule="JG-11")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await stable_group(s, g)
    await join(s, "b", g, v, "b-not-a-member")


@scenarios("jg_11_unknown_instance_id", rule="JG-11")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    await join(s, "a", g, 9, grp["members"]["a"], group_instance_id="never-registered")


@scenarios.versions("jg_11_fenced_instance_id", (5, 9), rule="JG-11")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await stable_group(s, g, instances={"a": "ia"})
    await join(s, "b", g, v, "ia-stale-member-id", group_instance_id="ia")


@scenarios("jg_12_follower_same_metadata_in_stable", rule="JG-12")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"))
    await join(s, "b", g, 9, grp["members"]["b"])
    await described(s, g)


@scenarios("jg_12_leader_rejoin_in_stable_rebalances", rule="JG-12")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    await join(s, "a", g, 9, grp["members"]["a"])
    await described(s, g)


@scenarios("jg_12_follower_changed_metadata_in_stable", rule="JG-12")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"))
    b = grp["members"]["b"]
    pb = await s.send("b", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, b, protocols=protocols([T1])))
    await wait_state(s, g, "PreparingRebalance")
    await join(s, "a", g, 9, grp["members"]["a"])
    await s.answer(pb)
    await described(s, g)


@scenarios("jg_12_same_metadata_in_completing_rebalance", rule="JG-12")
async def _(s: Side) -> None:
    g = s.group()
    joined = await join_dynamic(s, "a", g, 9)
    await described(s, g)
    await join(s, "a", g, 9, joined.member_id)
    await described(s, g)


@scenarios("jg_12_changed_metadata_in_completing_rebalance", rule="JG-12")
async def _(s: Side) -> None:
    g = s.group()
    joined = await join_dynamic(s, "a", g, 9)
    await join(s, "a", g, 9, joined.member_id, protocols=protocols([T1]))
    await described(s, g)


@scenarios("jg_12_known_member_of_empty_group", rule="JG-12")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    a = grp["members"]["a"]
    await leave(s, "a", g, 5, [(a, None)])
    await join(s, "a", g, 9, a)


@scenarios("jg_13a_rebalance_answers_parked_sync", rule="JG-13")
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9)
    b_pre = await join(s, "b", g, 9)
    pb = await s.send("b", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, b_pre.member_id))
    await wait_state(s, g, "PreparingRebalance")
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a.member_id))
    ra, rb = await s.answer(pa), await s.answer(pb)
    sync_b = await s.send("b", ApiKey.SYNC_GROUP, 5, **sync_fields(g, 5, rb.member_id, rb.generation_id))
    await s.unanswered(sync_b, 0.3)
    await join(s, "c", g, 9)  # a pending member: no rebalance yet
    await s.unanswered(sync_b, 0.3)
    pa2 = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, ra.member_id, protocols=protocols([T1])))
    await s.answer(sync_b)
    await described(s, g)
    await s.unanswered(pa2, 0.2)


async def protocol_votes(s: Side, tie: str) -> None:
    g = s.group()
    sub = subscription([T3])
    prefs = {
        "a": [{"name": "range", "metadata": sub}, {"name": "roundrobin", "metadata": sub}, {"name": "sticky", "metadata": sub}],
        "b": [{"name": "roundrobin", "metadata": sub}, {"name": "range", "metadata": sub}, {"name": "sticky", "metadata": sub}],
        "c": [{"name": "sticky", "metadata": sub}, {"name": "roundrobin", "metadata": sub}, {"name": "range", "metadata": sub}],
    }
    if tie == "no":  # c does not list sticky, so it is no candidate: c votes roundrobin, which wins 2-1
        prefs["c"] = [{"name": "only-c", "metadata": sub}, *prefs["c"][1:]]
    a = await join_dynamic(s, "a", g, 9, protocols=prefs["a"])
    ids = {"a": a.member_id}
    for actor in ("b", "c"):
        ids[actor] = (await join(s, actor, g, 9, protocols=prefs[actor])).member_id
    pending = [await s.send(actor, ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, ids[actor], protocols=prefs[actor])) for actor in ("b", "c")]
    await wait_state(s, g, "PreparingRebalance")
    pending.append(await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, ids["a"], protocols=prefs["a"])))
    for p in pending:
        await s.answer(p)


@scenarios("jg_16_protocol_selection_by_votes", rule="JG-16")
async def _(s: Side) -> None:
    await protocol_votes(s, tie="no")


@scenarios("jg_16_protocol_vote_tie", rule="JG-16")
async def _(s: Side) -> None:
    await protocol_votes(s, tie="yes")


@scenarios("jg_17_three_members_join", rule="JG-17")
async def _(s: Side) -> None:
    g = s.group()
    await stable_group(s, g, ("a", "b", "c"))
    await described(s, g)


@scenarios("jg_19_second_join_of_a_parked_member", rule="JG-19")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"))
    a, b = grp["members"]["a"], grp["members"]["b"]
    first = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a))
    await wait_state(s, g, "PreparingRebalance")
    second = await s.send("a2", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a))
    await s.unanswered(second, 0.3)
    await join(s, "b", g, 9, b)
    await s.answer(second)
    await s.unanswered(first, 0.3)


# -- static membership ---------------------------------------------------------------------------


@scenarios.versions("sm_1_new_static_member", range(5, 10), rule="SM-1")
async def _(s: Side, v: int) -> None:
    g = s.group()
    joined = await join(s, "a", g, v, group_instance_id="ia")
    await sync(s, "a", g, 3, joined.member_id, joined.generation_id, {joined.member_id: A3}, group_instance_id="ia")
    await heartbeat(s, "a", g, 3, joined.member_id, joined.generation_id, group_instance_id="ia")
    await described(s, g)


@scenarios("sm_2_replacement_fences_the_old_member_id", rule="SM-2")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "c"), instances={"c": "ic"})
    old = grp["members"]["c"]
    pc = await s.send("c", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, old, group_instance_id="ic", protocols=protocols([T1])))
    await wait_state(s, g, "PreparingRebalance")
    replaced = await s.send("c2", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, group_instance_id="ic"))
    await s.answer(pc)
    await join(s, "a", g, 9, grp["members"]["a"])
    await s.answer(replaced)
    await heartbeat(s, "c", g, 3, old, grp["generation"], group_instance_id="ic")
    await join(s, "c", g, 9, old, group_instance_id="ic")
    await leave(s, "c", g, 5, [(old, "ic")])
    await described(s, g)


@scenarios.versions("sm_3_static_leader_restart_without_rebalance", range(5, 10), rule="SM-3")
async def _(s: Side, v: int) -> None:
    g = s.group()
    first = await join(s, "x", g, 9, group_instance_id="ix")
    await sync(s, "x", g, 5, first.member_id, first.generation_id, {first.member_id: A3}, group_instance_id="ix")
    restarted = await join(s, "x2", g, v, group_instance_id="ix")
    await sync(s, "x2", g, 3, restarted.member_id, restarted.generation_id, group_instance_id="ix")
    await described(s, g)


@scenarios("sm_3_static_follower_restart_without_rebalance", rule="SM-3")
async def _(s: Side) -> None:
    g = s.group()
    a = await join(s, "a", g, 9, group_instance_id="ia")
    pb = await s.send("b", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, group_instance_id="ib"))
    await wait_state(s, g, "PreparingRebalance")
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a.member_id, group_instance_id="ia"))
    ra, rb = await s.answer(pa), await s.answer(pb)
    plan = {ra.member_id: assignment({T3: [0, 1]}), rb.member_id: assignment({T3: [2]})}
    sb = await s.send("b", ApiKey.SYNC_GROUP, 5, **sync_fields(g, 5, rb.member_id, rb.generation_id, group_instance_id="ib"))
    await sync(s, "a", g, 5, ra.member_id, ra.generation_id, plan, group_instance_id="ia")
    await s.answer(sb)
    again = await join(s, "b2", g, 9, group_instance_id="ib")
    await sync(s, "b2", g, 5, again.member_id, again.generation_id, group_instance_id="ib")
    await heartbeat(s, "b", g, 3, rb.member_id, rb.generation_id, group_instance_id="ib")
    await described(s, g)


@scenarios("sm_4_replacement_in_completing_rebalance", rule="SM-4")
async def _(s: Side) -> None:
    g = s.group()
    a = await join(s, "a", g, 9, group_instance_id="ia")
    await described(s, g)
    replaced = await s.send("a2", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, group_instance_id="ia"))
    await s.answer(replaced)
    await sync(s, "a", g, 5, a.member_id, a.generation_id, group_instance_id="ia")
    await described(s, g)


@scenarios("sm_5_static_member_rejoins_with_its_id", rule="SM-5")
async def _(s: Side) -> None:
    g = s.group()
    a = await join(s, "a", g, 9, group_instance_id="ia")
    await sync(s, "a", g, 5, a.member_id, a.generation_id, {a.member_id: A3}, group_instance_id="ia")
    await join(s, "a", g, 9, a.member_id, group_instance_id="ia")
    await join(s, "a", g, 9, "ia-other-id", group_instance_id="ia")


@scenarios.versions("sm_7_removal_by_instance_id", (3, 4, 5), rule="SM-7")
async def _(s: Side, v: int) -> None:
    g = s.group()
    a = await join(s, "a", g, 9, group_instance_id="ia")
    await sync(s, "a", g, 5, a.member_id, a.generation_id, {a.member_id: A3}, group_instance_id="ia")
    await leave(s, "ctl", g, v, [("", "ia"), ("", "never-registered")])
    await described(s, g)


# -- SyncGroup ---------------------------------------------------------------------------------


@scenarios.versions("sg_happy_two_members", SYNC_VERSIONS, rule="SG-6")
async def _(s: Side, v: int) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9)
    b_pre = await join(s, "b", g, 9)
    pb = await s.send("b", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, b_pre.member_id))
    await wait_state(s, g, "PreparingRebalance")
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a.member_id))
    ra, rb = await s.answer(pa), await s.answer(pb)
    plan = {ra.member_id: assignment({T3: [0, 1]}), rb.member_id: assignment({T3: [2]})}
    sb = await s.send("b", ApiKey.SYNC_GROUP, v, **sync_fields(g, v, rb.member_id, rb.generation_id))
    await sync(s, "a", g, v, ra.member_id, ra.generation_id, plan)
    await s.answer(sb)
    await described(s, g)


@scenarios("sg_1_v5_null_protocol_type", rule="SG-1")
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9)
    await sync(s, "a", g, 5, a.member_id, a.generation_id, {a.member_id: A3}, protocol_type=None)
    await described(s, g)


@scenarios("sg_1_v5_null_protocol_name", rule="SG-1")
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9)
    await sync(s, "a", g, 5, a.member_id, a.generation_id, {a.member_id: A3}, protocol_name=None)


@scenarios("sg_1_v5_null_protocol_on_unknown_group", rule="SG-1")
async def _(s: Side) -> None:
    await sync(s, "a", s.group(), 5, "nobody", 1, protocol_type=None, protocol_name=None)


@scenarios.versions("sg_2_unknown_group", SYNC_VERSIONS, rule="SG-2")
async def _(s: Side, v: int) -> None:
    await sync(s, "a", s.group(), v, "nobody", 1)


@scenarios.versions("sg_ge_4_empty_group_id", (0, 3, 5), rule="GE-4")
async def _(s: Side, v: int) -> None:
    await sync(s, "a", "", v, "nobody", 1)


@scenarios("sg_2_empty_group", rule="SG-2")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    a = grp["members"]["a"]
    await leave(s, "a", g, 5, [(a, None)])
    await sync(s, "a", g, 5, a, grp["generation"])


@scenarios("sg_3_unknown_member", rule="SG-3")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    await sync(s, "b", g, 5, "b-not-a-member", grp["generation"])


@scenarios.versions("sg_3_illegal_generation", (0, 5), rule="SG-3")
async def _(s: Side, v: int) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    await sync(s, "a", g, v, grp["members"]["a"], grp["generation"] + 1)


@scenarios("sg_3_fenced_instance_id", rule="SG-3")
async def _(s: Side) -> None:
    g = s.group()
    a = await join(s, "a", g, 9, group_instance_id="ia")
    await sync(s, "a", g, 5, "ia-other", a.generation_id, group_instance_id="ia")
    await sync(s, "a", g, 5, a.member_id, a.generation_id, group_instance_id="ib")


@scenarios("sg_3_inconsistent_protocol_type", rule="SG-3")
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9)
    await sync(s, "a", g, 5, a.member_id, a.generation_id, protocol_type="connect")


@scenarios("sg_3_inconsistent_protocol_name", rule="SG-3")
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9)
    await sync(s, "a", g, 5, a.member_id, a.generation_id, protocol_name="roundrobin")


@scenarios("sg_3_check_order_generation_before_protocol", rule="SG-3")
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9)
    await sync(s, "a", g, 5, a.member_id, a.generation_id + 5, protocol_name="roundrobin")
    await sync(s, "a", g, 5, "nobody", a.generation_id + 5, protocol_name="roundrobin")


@scenarios("sg_4_preparing_rebalance", rule="SG-4")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"))
    a, b = grp["members"]["a"], grp["members"]["b"]
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a))
    await wait_state(s, g, "PreparingRebalance")
    await sync(s, "b", g, 5, b, grp["generation"])
    await heartbeat(s, "b", g, 4, b, grp["generation"])
    await join(s, "b", g, 9, b)
    await s.answer(pa)


@scenarios("sg_6_assignments_for_strangers_and_missing_members", rule="SG-6")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"))
    a, b = grp["members"]["a"], grp["members"]["b"]
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a))
    await wait_state(s, g, "PreparingRebalance")
    rb = await join(s, "b", g, 9, b)
    ra = await s.answer(pa)
    sb = await s.send("b", ApiKey.SYNC_GROUP, 5, **sync_fields(g, 5, b, rb.generation_id))
    await sync(s, "a", g, 5, a, ra.generation_id, {a: A3, "stranger": assignment({T1: [0]})})
    await s.answer(sb)
    await described(s, g)


@scenarios("sg_7_sync_in_stable_returns_the_stored_assignment", rule="SG-7")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"))
    a, b = grp["members"]["a"], grp["members"]["b"]
    await sync(s, "b", g, 5, b, grp["generation"])
    await sync(s, "a", g, 5, a, grp["generation"], {a: assignment({T1: [0]})})
    await described(s, g)


# -- Heartbeat ---------------------------------------------------------------------------------


@scenarios.versions("hb_happy", HEARTBEAT_VERSIONS, rule="HB-4")
async def _(s: Side, v: int) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    await heartbeat(s, "a", g, v, grp["members"]["a"], grp["generation"])


@scenarios.versions("hb_1_unknown_group", HEARTBEAT_VERSIONS, rule="HB-1")
async def _(s: Side, v: int) -> None:
    await heartbeat(s, "a", s.group(), v, "nobody", 1)


@scenarios.versions("hb_ge_4_empty_group_id", (0, 4), rule="GE-4")
async def _(s: Side, v: int) -> None:
    await heartbeat(s, "a", "", v, "nobody", 1)


@scenarios.versions("hb_2_illegal_generation", (0, 4), rule="HB-2")
async def _(s: Side, v: int) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    await heartbeat(s, "a", g, v, grp["members"]["a"], grp["generation"] - 1)


@scenarios("hb_2_unknown_member", rule="HB-2")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    await heartbeat(s, "b", g, 4, "b-not-a-member", grp["generation"])


@scenarios("hb_2_pending_member", rule="HB-2")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    pending = await join(s, "b", g, 9)
    await heartbeat(s, "b", g, 4, pending.member_id, grp["generation"])


@scenarios("hb_2_fenced_instance_id", rule="HB-2")
async def _(s: Side) -> None:
    g = s.group()
    a = await join(s, "a", g, 9, group_instance_id="ia")
    await sync(s, "a", g, 5, a.member_id, a.generation_id, {a.member_id: A3}, group_instance_id="ia")
    await heartbeat(s, "a", g, 3, "ia-other", a.generation_id, group_instance_id="ia")
    await heartbeat(s, "a", g, 4, a.member_id, a.generation_id, group_instance_id="not-ia")


@scenarios("hb_4_preparing_rebalance", rule="HB-4")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"))
    a, b = grp["members"]["a"], grp["members"]["b"]
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a))
    await wait_state(s, g, "PreparingRebalance")
    await heartbeat(s, "b", g, 4, b, grp["generation"])
    await heartbeat(s, "b", g, 0, b, grp["generation"] + 1)
    await join(s, "b", g, 9, b)
    await s.answer(pa)


@scenarios("hb_4_completing_rebalance", rule="HB-4")
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9)
    await heartbeat(s, "a", g, 4, a.member_id, a.generation_id)


@scenarios("hb_4_empty_group", rule="HB-4")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    a = grp["members"]["a"]
    await leave(s, "a", g, 5, [(a, None)])
    await heartbeat(s, "a", g, 4, a, grp["generation"])
    await heartbeat(s, "a", g, 4, a, grp["generation"] + 1)


# -- LeaveGroup --------------------------------------------------------------------------------


@scenarios.versions("lg_happy", LEAVE_VERSIONS, rule="LG-4")
async def _(s: Side, v: int) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    await leave(s, "a", g, v, [(grp["members"]["a"], None)])
    await described(s, g)


@scenarios.versions("lg_2_unknown_group", LEAVE_VERSIONS, rule="LG-2")
async def _(s: Side, v: int) -> None:
    await leave(s, "a", s.group(), v, [("nobody", None), ("", "some-instance")][: 1 if v < 3 else 2])


@scenarios.versions("lg_ge_4_empty_group_id", (0, 5), rule="GE-4")
async def _(s: Side, v: int) -> None:
    await leave(s, "a", "", v, [("nobody", None)])


@scenarios.versions("lg_6_unknown_member_top_level", (0, 1, 2), rule="LG-6")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await stable_group(s, g)
    await leave(s, "b", g, v, [("b-not-a-member", None)])
    await described(s, g)


@scenarios.versions("lg_4_batch_in_request_order", (3, 5), rule="LG-4")
async def _(s: Side, v: int) -> None:
    g = s.group()
    a = await join(s, "a", g, 9, group_instance_id="ia")
    await sync(s, "a", g, 5, a.member_id, a.generation_id, {a.member_id: A3}, group_instance_id="ia")
    pending = await join(s, "p", g, 9)
    await leave(
        s,
        "ctl",
        g,
        v,
        [
            ("nobody", None),
            (pending.member_id, None),
            ("", "unknown-instance"),
            ("ia-wrong-id", "ia"),
            (a.member_id, "ia"),
            (a.member_id, "ia"),
        ],
    )
    await described(s, g)


@scenarios("lg_4_leave_answers_the_parked_join", rule="LG-4")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"))
    a, b = grp["members"]["a"], grp["members"]["b"]
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a))
    await wait_state(s, g, "PreparingRebalance")
    await leave(s, "ctl", g, 5, [(a, None)])  # b has not rejoined: the join phase goes on
    await s.answer(pa)
    await join(s, "b", g, 9, b)
    await described(s, g)


@scenarios("lg_5_last_member_leaves", rule="LG-5")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"))
    await leave(s, "ctl", g, 5, [(grp["members"]["a"], None), (grp["members"]["b"], None)])
    await described(s, g)
    again = await join_dynamic(s, "a", g, 9)
    s.note("generation after rejoin", again.generation_id)


@scenarios("lg_5_leave_in_completing_rebalance", rule="LG-5")
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9)
    await leave(s, "a", g, 5, [(a.member_id, None)])
    await described(s, g)


# -- classic timers (slow: they wait for the broker's own timers) -------------------------------


@scenarios("ct_1_session_expiry_removes_the_member", rule="CT-1", slow=True)
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9, session_timeout_ms=6000, rebalance_timeout_ms=6000)
    await sync(s, "a", g, 5, a.member_id, a.generation_id, {a.member_id: A3})
    await s.until(lambda: describe(s, g), lambda d: d.group_state == "Empty", "session expiry", timeout=30)
    await described(s, g)
    await heartbeat(s, "a", g, 4, a.member_id, a.generation_id)


@scenarios("ct_3_pending_member_expiry", rule="CT-3", slow=True)
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"), rebalance_timeout_ms=20_000)
    a, b = grp["members"]["a"], grp["members"]["b"]
    await join(s, "p", g, 9, session_timeout_ms=6000)  # pending, never rejoins
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a, rebalance_timeout_ms=20_000))
    await wait_state(s, g, "PreparingRebalance")
    pb = await s.send("b", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, b, rebalance_timeout_ms=20_000))
    await s.unanswered(pb, 1.0)
    await s.answer(pa, timeout=30)
    await s.answer(pb, timeout=30)


@scenarios("ct_4_rebalance_timeout_removes_the_unjoined_member", rule="CT-4", slow=True)
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"), rebalance_timeout_ms=1500)
    a = grp["members"]["a"]
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a, rebalance_timeout_ms=1500))
    await s.answer(pa, timeout=30)
    await described(s, g)


@scenarios("ct_5_pending_sync_timeout", rule="CT-5", slow=True)
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9, rebalance_timeout_ms=1500)
    b_pre = await join(s, "b", g, 9, rebalance_timeout_ms=1500)
    pb = await s.send("b", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, b_pre.member_id, rebalance_timeout_ms=1500))
    await wait_state(s, g, "PreparingRebalance")
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a.member_id, rebalance_timeout_ms=1500))
    ra, rb = await s.answer(pa), await s.answer(pb)
    await sync(s, "a", g, 5, ra.member_id, ra.generation_id, {ra.member_id: A3, rb.member_id: assignment({T1: [0]})})
    # b never syncs: after the rebalance timeout it is removed and a rebalance starts.
    await s.until(lambda: describe(s, g), lambda d: d.group_state == "PreparingRebalance", "pending-sync expiry", timeout=30)
    await heartbeat(s, "a", g, 4, ra.member_id, ra.generation_id)
    await heartbeat(s, "b", g, 4, rb.member_id, rb.generation_id)


@scenarios("sm_6_static_member_survives_the_join_timer", rule="SM-6", slow=True)
async def _(s: Side) -> None:
    g = s.group()
    a = await join(s, "a", g, 9, group_instance_id="ia", rebalance_timeout_ms=1500)
    await sync(s, "a", g, 5, a.member_id, a.generation_id, {a.member_id: A3}, group_instance_id="ia")
    b = await join(s, "b", g, 9, rebalance_timeout_ms=1500)
    pb = await s.send("b", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, b.member_id, rebalance_timeout_ms=1500))
    rb = await s.answer(pb, timeout=30)
    s.note("b leads", rb.leader == rb.member_id)
    await described(s, g)


# -- rules pinned by name --------------------------------------------------------------------------


@scenarios("cs_3_states_through_a_rebalance", rule="CS-3")
async def _(s: Side) -> None:
    g = s.group()
    await described(s, g)  # absent: Dead
    a = await join(s, "a", g, 9)  # a pending member only: still no group member
    await described(s, g)
    a = await join(s, "a", g, 9, a.member_id)
    await described(s, g)  # CompletingRebalance
    await sync(s, "a", g, 5, a.member_id, a.generation_id, {a.member_id: A3})
    await described(s, g)  # Stable
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a.member_id, protocols=protocols([T1])))
    await s.answer(pa)  # the lone member rejoins: the join completes at once
    await described(s, g)
    await leave(s, "a", g, 5, [(a.member_id, None)])
    await described(s, g)  # Empty


@scenarios.versions("jg_8_member_id_format", (3, 9), rule="JG-8")
async def _(s: Side, v: int) -> None:
    # The ids are compared by shape (<client id>-<UUID>, <instance id>-<UUID>): "generated ids".
    await join_dynamic(s, "consumer-1", s.group("dynamic"), v)
    if v >= 5:
        await join(s, "consumer-2", s.group("static"), v, group_instance_id="instance-7")


@scenarios("jg_9_pending_member_rejoins", rule="JG-9")
async def _(s: Side) -> None:
    g = s.group()
    await stable_group(s, g)
    pending = await join(s, "b", g, 9)
    await described(s, g)
    pb = await s.send("b", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, pending.member_id))
    await wait_state(s, g, "PreparingRebalance")
    await described(s, g)
    await s.unanswered(pb, 0.2)


@scenarios("jg_14_a_new_group_completes_at_once", rule="JG-14")
async def _(s: Side) -> None:
    # With group.initial.rebalance.delay.ms 0 (kaflet's default, set on the reference Kafka).
    g = s.group()
    first = await join(s, "a", g, 9)
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, first.member_id))
    await s.answer(pa, timeout=5)


@scenarios("jg_2_v0_rebalance_timeout_is_the_session_timeout", rule="JG-2", slow=True)
async def _(s: Side) -> None:
    g = s.group()
    a = await join(s, "a", g, 0, session_timeout_ms=6000)  # v0: rebalance timeout := 6000
    await sync(s, "a", g, 0, a.member_id, a.generation_id, {a.member_id: A3})
    b = await join(s, "b", g, 9, session_timeout_ms=30_000, rebalance_timeout_ms=1000)
    pb = await s.send("b", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, b.member_id, session_timeout_ms=30_000, rebalance_timeout_ms=1000))
    # a never rejoins: the join phase ends after the group's rebalance timeout, a's 6000 ms.
    await s.unanswered(pb, 2.5)
    await s.answer(pb, timeout=30)
    await described(s, g)


@scenarios("sg_5_follower_parks_until_the_leader_syncs", rule="SG-5")
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9)
    b_pre = await join(s, "b", g, 9)
    pb = await s.send("b", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, b_pre.member_id))
    await wait_state(s, g, "PreparingRebalance")
    ra = await join(s, "a", g, 9, a.member_id)
    rb = await s.answer(pb)
    sb = await s.send("b", ApiKey.SYNC_GROUP, 4, **sync_fields(g, 4, rb.member_id, rb.generation_id, {rb.member_id: b"ignored"}))
    await s.unanswered(sb, 0.3)
    await heartbeat(s, "a", g, 4, ra.member_id, ra.generation_id)
    await s.unanswered(sb, 0.2)
    await sync(s, "a", g, 4, ra.member_id, ra.generation_id, {rb.member_id: assignment({T1: [0]})})
    await s.answer(sb)
