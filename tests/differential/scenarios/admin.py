"""DescribeGroups v0-v6, ListGroups v0-v5, DeleteGroups v0-v2 (spec section 5: DG, LI, DL)."""

from __future__ import annotations

from tests.differential.harness import Registry
from tests.differential.scenarios.common import (
    T3,
    ApiKey,
    Side,
    commit,
    fetch,
    join_dynamic,
    join_fields,
    stable_group,
    wait_state,
)

scenarios = Registry()

DESCRIBE_VERSIONS = range(0, 7)
LIST_VERSIONS = range(0, 6)
DELETE_VERSIONS = range(0, 3)


async def describe_groups(s: Side, v: int, groups: list[str]) -> None:
    fields = {"groups": groups}
    if v >= 3:
        fields["include_authorized_operations"] = False
    await s.call("ctl", ApiKey.DESCRIBE_GROUPS, v, **fields)


async def list_groups(s: Side, v: int, states: list[str] | None = None, types: list[str] | None = None) -> None:
    fields = {}
    if v >= 4:
        fields["states_filter"] = states or []
    if v >= 5:
        fields["types_filter"] = types or []
    await s.call("ctl", ApiKey.LIST_GROUPS, v, **fields)


async def consumer_group(s: Side, group: str, actor: str = "k") -> None:
    await s.call(
        actor,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        group_id=group,
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[T3],
        topic_partitions=[],
    )


# -- DescribeGroups ----------------------------------------------------------------------------


@scenarios.versions("dg_1_stable_group", DESCRIBE_VERSIONS, rule="DG-1")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await stable_group(s, g, ("a", "b"), instances={"b": "ib"})
    await describe_groups(s, v, [g])


@scenarios.versions("dg_2_unknown_and_empty_ids", DESCRIBE_VERSIONS, rule="DG-2")
async def _(s: Side, v: int) -> None:
    # (The group "" is a group like any other here; ge_4_the_empty_group_id describes it.)
    await describe_groups(s, v, [s.group("absent"), s.group("absent")])
    await describe_groups(s, v, [])


@scenarios.versions("dg_2_consumer_group", DESCRIBE_VERSIONS, rule="DG-2")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await consumer_group(s, g)
    await describe_groups(s, v, [g])


@scenarios("dg_1_completing_rebalance", rule="DG-1")
async def _(s: Side) -> None:
    g = s.group()
    await join_dynamic(s, "a", g, 9)
    await describe_groups(s, 5, [g])


@scenarios("dg_1_preparing_rebalance", rule="DG-1")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"))
    a, b = grp["members"]["a"], grp["members"]["b"]
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a))
    await wait_state(s, g, "PreparingRebalance")
    await describe_groups(s, 5, [g])
    await s.call("b", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, b))
    await s.answer(pa)


@scenarios("dg_1_simple_group", rule="DG-1")
async def _(s: Side) -> None:
    g = s.group()
    await commit(s, "a", g, 9, {(T3, 0): 1})
    await describe_groups(s, 5, [g])


@scenarios("dg_1_empty_group_after_members_left", rule="DG-1")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    a = grp["members"]["a"]
    await s.call("a", ApiKey.LEAVE_GROUP, 5, group_id=g, members=[{"member_id": a, "group_instance_id": None, "reason": None}])
    await describe_groups(s, 5, [g])


# -- ListGroups --------------------------------------------------------------------------------


async def some_groups(s: Side) -> None:
    """Five groups of this scenario's own, one in each listed state and type."""
    await stable_group(s, s.group("stable"))
    await join_dynamic(s, "c", s.group("completing"), 9)
    await commit(s, "ctl", s.group("simple"), 9, {(T3, 0): 1})
    await consumer_group(s, s.group("consumer"))
    grp = await stable_group(s, s.group("left"))
    a = grp["members"]["a"]
    await s.call(
        "a", ApiKey.LEAVE_GROUP, 5, group_id=s.group("left"), members=[{"member_id": a, "group_instance_id": None, "reason": None}]
    )


@scenarios.versions("li_2_every_kind_of_group", LIST_VERSIONS, rule="LI-2")
async def _(s: Side, v: int) -> None:
    await some_groups(s)
    await list_groups(s, v)


@scenarios.versions("li_3_state_filters", (4, 5), rule="LI-3")
async def _(s: Side, v: int) -> None:
    await some_groups(s)
    await list_groups(s, v, states=["Stable"])
    await list_groups(s, v, states=["empty", " COMPLETINGREBALANCE "])
    await list_groups(s, v, states=["Dead", "no-such-state"])
    await list_groups(s, v, states=["Assigning", "Reconciling", "Stable"])


@scenarios("li_3_type_filters", rule="LI-3")
async def _(s: Side) -> None:
    await some_groups(s)
    await list_groups(s, 5, types=["classic"])
    await list_groups(s, 5, types=["Consumer"])
    await list_groups(s, 5, types=["share", "streams"])
    await list_groups(s, 5, types=["nonsense"])
    await list_groups(s, 5, states=["Empty"], types=["classic"])


# -- DeleteGroups ------------------------------------------------------------------------------


@scenarios.versions("dl_3_delete_empty_and_simple_groups", DELETE_VERSIONS, rule="DL-3")
async def _(s: Side, v: int) -> None:
    simple, left = s.group("simple"), s.group("left")
    await commit(s, "ctl", simple, 9, {(T3, 0): 1})
    grp = await stable_group(s, left)
    await commit(s, "a", left, 9, {(T3, 1): 2}, generation=grp["generation"], member_id=grp["members"]["a"])
    a = grp["members"]["a"]
    await s.call("a", ApiKey.LEAVE_GROUP, 5, group_id=left, members=[{"member_id": a, "group_instance_id": None, "reason": None}])
    await s.call("ctl", ApiKey.DELETE_GROUPS, v, groups_names=[simple, left])
    await fetch(s, "ctl", simple, 8, None)
    await fetch(s, "ctl", left, 8, None)
    await describe_groups(s, 5, [simple, left])


@scenarios.versions("dl_2_absent_and_non_empty", DELETE_VERSIONS, rule="DL-2")
async def _(s: Side, v: int) -> None:
    stable = s.group("stable")
    await stable_group(s, stable)
    await s.call("ctl", ApiKey.DELETE_GROUPS, v, groups_names=[s.group("absent"), stable])
    await describe_groups(s, 5, [stable])


@scenarios("dl_1_duplicates_are_deleted_once", rule="DL-1")
async def _(s: Side) -> None:
    g = s.group()
    await commit(s, "ctl", g, 9, {(T3, 0): 1})
    await s.call("ctl", ApiKey.DELETE_GROUPS, 2, groups_names=[g, g, s.group("absent"), s.group("absent")])


@scenarios("dl_2_consumer_groups", rule="DL-2")
async def _(s: Side) -> None:
    live, empty = s.group("live"), s.group("empty")
    await consumer_group(s, live)
    await consumer_group(s, empty, actor="e")
    hb_leave = {"group_id": empty, "member_id": "", "member_epoch": -1}
    d = await s.quiet("ctl", ApiKey.CONSUMER_GROUP_DESCRIBE, 0, group_ids=[empty], include_authorized_operations=False)
    hb_leave["member_id"] = d.groups[0].members[0].member_id
    await s.call("e", ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, **hb_leave)
    await s.call("ctl", ApiKey.DELETE_GROUPS, 2, groups_names=[live, empty])
    await describe_groups(s, 5, [live, empty])


@scenarios("dl_2_completing_rebalance", rule="DL-2")
async def _(s: Side) -> None:
    g = s.group()
    await join_dynamic(s, "a", g, 9)
    await s.call("ctl", ApiKey.DELETE_GROUPS, 2, groups_names=[g])


@scenarios.versions("dg_authorized_operations", (3, 4, 5))
async def _(s: Side, v: int) -> None:
    # No authorizer: Kafka lists every operation a group allows.
    g = s.group()
    await stable_group(s, g)
    await s.call("ctl", ApiKey.DESCRIBE_GROUPS, v, groups=[g, s.group("absent")], include_authorized_operations=True)
