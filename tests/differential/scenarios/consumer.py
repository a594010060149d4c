"""KIP-848 consumer groups: ConsumerGroupHeartbeat v0-v1 and ConsumerGroupDescribe v0-v1
(spec section 6: KH, KA, KR, KT, KD, KM)."""

from __future__ import annotations

from typing import Any

from tests.differential.brokers import create_topic
from tests.differential.harness import Registry
from tests.differential.scenarios.common import (
    T1,
    T3,
    ApiKey,
    Side,
    assignment,
    commit,
    join_dynamic,
    join_fields,
    protocols,
    stable_group,
    sync,
)

scenarios = Registry()

HB_VERSIONS = (0, 1)
DESCRIBE_VERSIONS = (0, 1)


def hb_fields(v: int, group: str, member_id: str, epoch: int, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": -1,
        "subscribed_topic_names": None,
        "server_assignor": None,
        "topic_partitions": None,
    }
    if v >= 1:
        out["subscribed_topic_regex"] = None
    out.update(fields)
    return out


async def hb(s: Side, actor: str, v: int, group: str, member_id: str, epoch: int, **fields: Any) -> Any:
    return await s.call(actor, ApiKey.CONSUMER_GROUP_HEARTBEAT, v, **hb_fields(v, group, member_id, epoch, **fields))


async def first_join(
    s: Side, actor: str, v: int, group: str, topics: list[str] | None = None, *, generated: bool = False, **fields: Any
) -> Any:
    """A new member's first heartbeat, with a member id of its own (the same on both brokers, so
    that the range assignor, which orders members by id, decides alike); `generated` at v0 lets
    the broker name the member (KH-5; v1 requires the client's id, KIP-1082)."""
    member_id = "" if generated and v == 0 else f"{actor}-member-id-of-22ch"[:22]
    fields.setdefault("rebalance_timeout_ms", 30_000)
    fields.setdefault("subscribed_topic_names", topics if topics is not None else [T3])
    fields.setdefault("topic_partitions", [])
    return await hb(s, actor, v, group, member_id, 0, **fields)


def owned(resp: Any) -> list[dict[str, Any]]:
    """The partitions an answer assigned, as the next heartbeat reports them."""
    if resp.assignment is None:
        return []
    return [{"topic_id": tp.topic_id, "partitions": list(tp.partitions)} for tp in resp.assignment.topic_partitions]


async def describe(s: Side, v: int, groups: list[str]) -> Any:
    return await s.call("ctl", ApiKey.CONSUMER_GROUP_DESCRIBE, v, group_ids=groups, include_authorized_operations=False)


# -- joining and heartbeats ----------------------------------------------------------------------


@scenarios.versions("kh_13_first_member_joins", HB_VERSIONS, rule="KH-13")
async def _(s: Side, v: int) -> None:
    g = s.group()
    a = await first_join(s, "a", v, g, [T3, T1], generated=True, server_assignor="range")
    await hb(s, "a", v, g, a.member_id, a.member_epoch, topic_partitions=owned(a))
    await describe(s, 0, [g])


@scenarios("kh_5_v1_needs_a_member_id", rule="KH-5")
async def _(s: Side) -> None:
    g = s.group()
    await hb(s, "a", 1, g, "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=[T3], topic_partitions=[])
    await describe(s, 0, [g])


# KH-2: requests refused before any group is looked at, (name, version, fields).
INVALID: list[tuple[str, tuple[int, ...], dict[str, Any]]] = [
    ("empty_group_id", (0, 1), {"group_id": ""}),
    ("blank_group_id", (0, 1), {"group_id": "  "}),
    ("blank_instance_id", (0, 1), {"instance_id": " "}),
    ("empty_rack_id", (0, 1), {"rack_id": ""}),
    ("join_without_rebalance_timeout", (0, 1), {"rebalance_timeout_ms": -1}),
    ("join_without_topic_partitions", (0, 1), {"topic_partitions": None}),
    ("join_with_owned_partitions", (0, 1), {"topic_partitions": [{"topic_id": None, "partitions": [0]}]}),
    ("join_without_subscription", (0, 1), {"subscribed_topic_names": None}),
    ("join_with_empty_subscription", (0, 1), {"subscribed_topic_names": []}),
    ("positive_epoch_without_member_id", (0, 1), {"member_id": "", "member_epoch": 3}),
    ("leave_without_member_id", (0, 1), {"member_id": "", "member_epoch": -1}),
    ("static_leave_without_instance_id", (0, 1), {"member_id": "m", "member_epoch": -2}),
    ("static_leave_without_member_id", (0, 1), {"member_id": "", "member_epoch": -2, "instance_id": "i"}),
    ("epoch_below_minus_two", (0, 1), {"member_id": "m", "member_epoch": -3}),
    ("unknown_assignor", (0, 1), {"server_assignor": "no-such-assignor"}),
    ("invalid_regex", (1,), {"subscribed_topic_names": None, "subscribed_topic_regex": "orders-("}),
    ("regex_and_names", (1,), {"subscribed_topic_regex": "orders-.*"}),
    ("empty_regex", (1,), {"subscribed_topic_names": None, "subscribed_topic_regex": ""}),
]


def _invalid(v: int, fields: dict[str, Any]) -> Any:
    async def run(s: Side) -> None:
        g = s.group()
        base = {
            "rebalance_timeout_ms": 30_000,
            "subscribed_topic_names": [T3],
            "topic_partitions": [],
        }
        member_id = "" if v == 0 else "m-invalid-request-id-1"
        request = hb_fields(v, g, member_id, 0, **base)
        request.update(fields)
        if request["topic_partitions"]:
            request["topic_partitions"] = [{"topic_id": next(iter(s.broker.topic_ids)), "partitions": [0]}]
        await s.call("a", ApiKey.CONSUMER_GROUP_HEARTBEAT, v, **request)
        await describe(s, 0, [g])

    return run


for _name, _versions, _fields in INVALID:
    for _v in _versions:
        scenarios.add(f"kh_2_{_name}_v{_v}", _invalid(_v, _fields), rule="KH-2")


@scenarios.versions("kh_3_unknown_group_with_an_epoch", HB_VERSIONS, rule="KH-3")
async def _(s: Side, v: int) -> None:
    await hb(s, "a", v, s.group(), "m-unknown-group-member", 4)
    await hb(s, "a", v, s.group(), "m-unknown-group-member", -1)


@scenarios("kh_3_empty_classic_group_becomes_a_consumer_group", rule="KH-3")
async def _(s: Side) -> None:
    g = s.group()
    await commit(s, "ctl", g, 9, {(T3, 0): 5})
    a = await first_join(s, "a", 1, g)
    await describe(s, 0, [g])
    await s.call(
        "ctl",
        ApiKey.OFFSET_FETCH,
        9,
        groups=[{"group_id": g, "member_id": a.member_id, "member_epoch": a.member_epoch, "topics": None}],
        require_stable=False,
    )


@scenarios("kh_6_unknown_member_with_an_epoch", rule="KH-6")
async def _(s: Side) -> None:
    g = s.group()
    await first_join(s, "a", 1, g)
    await hb(s, "b", 1, g, "m-never-joined-this-gr", 2)


@scenarios.versions("kh_7_epoch_fencing", HB_VERSIONS, rule="KH-7")
async def _(s: Side, v: int) -> None:
    g = s.group()
    a = await first_join(s, "a", v, g)
    e = a.member_epoch
    await hb(s, "a", v, g, a.member_id, e + 1)
    await hb(s, "a", v, g, a.member_id, e - 1)
    await hb(s, "a", v, g, a.member_id, e - 1, topic_partitions=owned(a))
    # A retried join (epoch 0, its previous epoch) is accepted.
    await first_join(s, "a", v, g) if v == 1 else await hb(
        s, "a", v, g, a.member_id, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=[T3], topic_partitions=[]
    )
    await hb(s, "a", v, g, a.member_id, e, topic_partitions=owned(a))


@scenarios("kh_8_subscription_change_bumps_the_epoch", rule="KH-8")
async def _(s: Side) -> None:
    g = s.group()
    a = await first_join(s, "a", 1, g, [T3])
    a2 = await hb(s, "a", 1, g, a.member_id, a.member_epoch, subscribed_topic_names=[T3, T1], topic_partitions=owned(a))
    await hb(s, "a", 1, g, a.member_id, a2.member_epoch, topic_partitions=owned(a2) or owned(a))
    await hb(s, "a", 1, g, a.member_id, a2.member_epoch, subscribed_topic_names=[T1, T3])
    await describe(s, 0, [g])


@scenarios("kh_8_created_topic_bumps_the_epoch", rule="KH-8")
async def _(s: Side) -> None:
    g = s.group()
    later = s.topic("later")
    a = await first_join(s, "a", 1, g, [T1, later])
    await create_topic(s, 2, "later")
    state = {"epoch": a.member_epoch, "owned": owned(a)}

    async def beat() -> Any:
        # The coordinator learns of the new topic from the cluster metadata, a moment later.
        resp = await s.quiet(
            "a", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, **hb_fields(1, g, a.member_id, state["epoch"], topic_partitions=state["owned"])
        )
        state["epoch"] = resp.member_epoch
        if resp.assignment is not None:
            state["owned"] = owned(resp)
        return resp

    await s.until(beat, lambda r: r.member_epoch > a.member_epoch, "the new topic in the group's metadata")
    await hb(s, "a", 1, g, a.member_id, state["epoch"], topic_partitions=state["owned"])
    await describe(s, 0, [g])


async def describe_quiet(s: Side, group: str) -> Any:
    return await s.quiet("ctl", ApiKey.CONSUMER_GROUP_DESCRIBE, 0, group_ids=[group], include_authorized_operations=False)


@scenarios("kh_11_full_and_partial_heartbeats", rule="KH-11")
async def _(s: Side) -> None:
    g = s.group()
    a = await first_join(s, "a", 1, g)
    await hb(s, "a", 1, g, a.member_id, a.member_epoch)
    await hb(s, "a", 1, g, a.member_id, a.member_epoch, topic_partitions=owned(a))
    await hb(s, "a", 1, g, a.member_id, a.member_epoch, rebalance_timeout_ms=30_000, subscribed_topic_names=[T3], topic_partitions=owned(a))


@scenarios.versions("kh_13_second_member_waits_for_revocation", HB_VERSIONS, rule="KR-3")
async def _(s: Side, v: int) -> None:
    g = s.group()
    a = await first_join(s, "a", v, g, server_assignor="range")
    b = await first_join(s, "b", v, g, server_assignor="range")
    a2 = await hb(s, "a", v, g, a.member_id, a.member_epoch, topic_partitions=owned(a))
    b2 = await hb(s, "b", v, g, b.member_id, b.member_epoch, topic_partitions=[])
    a3 = await hb(s, "a", v, g, a.member_id, a2.member_epoch, topic_partitions=owned(a2))
    b3 = await hb(s, "b", v, g, b.member_id, b2.member_epoch, topic_partitions=owned(b2))
    await describe(s, 0, [g])
    _ = (a3, b3)


@scenarios("ka_4_range_assignor", rule="KA-4")
async def _(s: Side) -> None:
    g = s.group()
    members = {}
    for actor in ("a", "b", "c"):
        members[actor] = await first_join(s, actor, 1, g, [T3, T1], server_assignor="range")
    # Everyone acknowledges whatever it was given until the group is stable.
    for _round in range(4):
        for actor, resp in list(members.items()):
            members[actor] = await s.call(
                actor,
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                1,
                label=f"{actor}:round{_round}",
                **hb_fields(1, g, resp.member_id, resp.member_epoch, topic_partitions=owned(resp) if resp.assignment is not None else None),
            )
    await describe(s, 0, [g])


@scenarios.versions("kh_14_leave", HB_VERSIONS, rule="KH-14")
async def _(s: Side, v: int) -> None:
    g = s.group()
    a = await first_join(s, "a", v, g)
    await hb(s, "a", v, g, "m-stranger-of-this-grp", -1)
    await hb(s, "a", v, s.group("other"), a.member_id, -1)
    await hb(s, "a", v, g, a.member_id, -1)
    await hb(s, "a", v, g, a.member_id, -1)
    await describe(s, 0, [g])


@scenarios("kh_15_static_member_leaves_for_a_while", rule="KH-15")
async def _(s: Side) -> None:
    g = s.group()
    a = await first_join(s, "a", 1, g, instance_id="ia", server_assignor="range")
    await hb(s, "a", 1, g, a.member_id, -2, instance_id="other")
    await hb(s, "a", 1, g, "m-other-member-of-ia-0", -2, instance_id="ia")
    await hb(s, "a", 1, g, a.member_id, -2, instance_id="ia")
    await describe(s, 0, [g])
    back = await first_join(s, "a2", 1, g, instance_id="ia", server_assignor="range")
    await describe(s, 0, [g])
    _ = back


@scenarios("kh_16_unreleased_instance_id", rule="KH-16")
async def _(s: Side) -> None:
    g = s.group()
    a = await first_join(s, "a", 1, g, instance_id="ia")
    await first_join(s, "b", 1, g, instance_id="ia")
    await hb(s, "a", 1, g, a.member_id, a.member_epoch, instance_id="ib")
    await hb(s, "a", 1, g, "m-someone-else-000000", a.member_epoch, instance_id="ia")
    await hb(s, "a", 1, g, a.member_id, a.member_epoch + 7, instance_id="ia")


# -- ConsumerGroupDescribe -------------------------------------------------------------------------


@scenarios.versions("kd_1_describe", DESCRIBE_VERSIONS, rule="KD-1")
async def _(s: Side, v: int) -> None:
    g, classic = s.group(), s.group("classic")
    a = await first_join(s, "a", 1, g, [T3, T1], rack_id="rack-1")
    await hb(s, "a", 1, g, a.member_id, a.member_epoch, topic_partitions=owned(a))
    await stable_group(s, classic)
    await describe(s, v, [g, classic, s.group("absent"), "", g])


@scenarios("kd_1_describe_nothing", rule="KD-1")
async def _(s: Side) -> None:
    await describe(s, 0, [])


# -- classic members in consumer groups (KM) ---------------------------------------------------------


@scenarios("km_2_upgrade_of_a_classic_group", rule="KM-2")
async def _(s: Side) -> None:
    g = s.group()
    # One partition: which member keeps it is then no choice of the uniform assignor's.
    a = await join_dynamic(s, "a", g, 9, protocols=protocols([T1]))
    await sync(s, "a", g, 5, a.member_id, a.generation_id, {a.member_id: assignment({T1: [0]})})
    await first_join(s, "k", 1, g, [T1])
    await describe(s, 0, [g])
    await s.call("a", ApiKey.HEARTBEAT, 4, group_id=g, generation_id=a.generation_id, member_id=a.member_id, group_instance_id=None)
    await s.call("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a.member_id, protocols=protocols([T1])))
    await describe(s, 0, [g])


@scenarios("km_3_classic_member_joins_a_consumer_group", rule="KM-3")
async def _(s: Side) -> None:
    g = s.group()
    await first_join(s, "k", 1, g)
    j = await join_dynamic(s, "c", g, 9)
    await sync(s, "c", g, 5, j.member_id, j.generation_id)
    await s.call("c", ApiKey.HEARTBEAT, 4, group_id=g, generation_id=j.generation_id, member_id=j.member_id, group_instance_id=None)
    await describe(s, 1, [g])
    await s.call("ctl", ApiKey.DESCRIBE_GROUPS, 5, groups=[g], include_authorized_operations=False)


@scenarios("km_3_classic_join_with_another_protocol_type", rule="KM-3")
async def _(s: Side) -> None:
    g = s.group()
    await first_join(s, "k", 1, g)
    await s.call("c", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, protocol_type="connect"))


# -- consumer-group timers (slow) ------------------------------------------------------------------


@scenarios("kt_2_rebalance_timeout_fences_a_member_that_keeps_its_partitions", rule="KT-2", slow=True)
async def _(s: Side) -> None:
    g = s.group()
    a = await first_join(s, "a", 1, g, server_assignor="range", rebalance_timeout_ms=1500)
    b = await first_join(s, "b", 1, g, server_assignor="range", rebalance_timeout_ms=1500)
    revoke = await hb(s, "a", 1, g, a.member_id, a.member_epoch, topic_partitions=owned(a))
    await s.until(lambda: describe_quiet(s, g), lambda d: len(d.groups[0].members) == 1, "a fenced after its rebalance timeout", timeout=30)
    await hb(s, "a", 1, g, a.member_id, revoke.member_epoch, topic_partitions=owned(a))
    await hb(s, "b", 1, g, b.member_id, b.member_epoch, topic_partitions=[])
    await describe(s, 0, [g])


@scenarios("kt_1_session_timeout_fences_a_silent_member", rule="KT-1", slow=True)
async def _(s: Side) -> None:
    g = s.group()
    a = await first_join(s, "a", 1, g)
    await s.until(lambda: describe_quiet(s, g), lambda d: not d.groups[0].members, "a fenced after its session timeout", timeout=90)
    await hb(s, "a", 1, g, a.member_id, a.member_epoch)
    await describe(s, 0, [g])


# -- rules pinned by name --------------------------------------------------------------------------


@scenarios("kr_4_group_states", rule="KR-4")
async def _(s: Side) -> None:
    g = s.group()
    a = await first_join(s, "a", 1, g, server_assignor="range")
    await describe(s, 0, [g])  # Stable
    b = await first_join(s, "b", 1, g, server_assignor="range")
    await describe(s, 0, [g])  # Reconciling: a still owns what b is to get
    a2 = await hb(s, "a", 1, g, a.member_id, a.member_epoch, topic_partitions=owned(a))
    await hb(s, "a", 1, g, a.member_id, a2.member_epoch, topic_partitions=owned(a2))
    await hb(s, "b", 1, g, b.member_id, b.member_epoch, topic_partitions=[])
    await describe(s, 0, [g])  # Stable
    await hb(s, "a", 1, g, a.member_id, -1)
    await hb(s, "b", 1, g, b.member_id, -1)
    await describe(s, 0, [g])  # Empty


@scenarios("ka_1_the_assignor_most_members_prefer", rule="KA-1")
async def _(s: Side) -> None:
    g = s.group()
    await first_join(s, "a", 1, g, [T1])
    await describe(s, 0, [g])  # no preference: the default, uniform
    await first_join(s, "b", 1, g, [T1], server_assignor="range")
    await describe(s, 0, [g])


@scenarios("km_4_downgrade_when_the_last_consumer_member_leaves", rule="KM-4")
async def _(s: Side) -> None:
    g = s.group()
    k = await first_join(s, "k", 1, g, [T1])
    c = await join_dynamic(s, "c", g, 9, protocols=protocols([T1]))
    await sync(s, "c", g, 5, c.member_id, c.generation_id)
    await hb(s, "k", 1, g, k.member_id, -1)
    await s.call("ctl", ApiKey.DESCRIBE_GROUPS, 5, groups=[g], include_authorized_operations=False)
    await describe(s, 0, [g])


@scenarios.versions("kd_authorized_operations", DESCRIBE_VERSIONS)
async def _(s: Side, v: int) -> None:
    g = s.group()
    await first_join(s, "a", 1, g)
    await s.call("ctl", ApiKey.CONSUMER_GROUP_DESCRIBE, v, group_ids=[g, s.group("absent")], include_authorized_operations=True)


@scenarios("km_3_consumer_member_over_the_classic_apis", rule="KM-3")
async def _(s: Side) -> None:
    g = s.group()
    k = await first_join(s, "k", 1, g, [T1])
    m, e = k.member_id, k.member_epoch
    await s.call("k", ApiKey.HEARTBEAT, 4, group_id=g, generation_id=e, member_id=m, group_instance_id=None)
    await sync(s, "k", g, 5, m, e)
    await s.call("k", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, m, protocols=protocols([T1])))
    await s.call("k", ApiKey.LEAVE_GROUP, 5, group_id=g, members=[{"member_id": m, "group_instance_id": None, "reason": "x"}])
    await describe(s, 0, [g])


@scenarios("ko_1_commit_at_an_older_member_epoch", rule="KO-1")
async def _(s: Side) -> None:
    g = s.group()
    a = await first_join(s, "a", 1, g, server_assignor="range")  # all of T3, at epoch 2
    a = await hb(s, "a", 1, g, a.member_id, a.member_epoch, topic_partitions=owned(a))
    b = await first_join(s, "b", 1, g, server_assignor="range")  # epoch 3: a is to give up T3-2
    a_revoke = await hb(s, "a", 1, g, a.member_id, a.member_epoch, topic_partitions=owned(a))
    a3 = await hb(s, "a", 1, g, a.member_id, a_revoke.member_epoch, topic_partitions=owned(a_revoke))
    old = a.member_epoch
    for partition, epoch in ((0, old), (2, old), (0, old - 1), (0, a3.member_epoch)):
        await commit(s, "a", g, 9, {(T3, partition): 10 + partition}, generation=epoch, member_id=a.member_id)
    _ = b
