"""OffsetCommit v2-v9, OffsetFetch v1-v9 and OffsetDelete v0 (spec section 4: OC, OF, OD)."""

from __future__ import annotations

import asyncio

from tests.differential.brokers import create_topic
from tests.differential.harness import Registry
from tests.differential.scenarios.common import (
    OFFSET_COMMIT_VERSIONS,
    OFFSET_FETCH_VERSIONS,
    T1,
    T3,
    ApiKey,
    Side,
    commit,
    commit_fields,
    describe,
    fetch,
    join_dynamic,
    join_fields,
    stable_group,
    subscription,
    sync,
    wait_state,
)

scenarios = Registry()

SOME = {(T3, 0): 10, (T3, 2): 12, (T1, 0): 1}


async def fetch_all(s: Side, group: str, version: int = 8) -> None:
    await fetch(s, "ctl", group, version, None)


# -- OffsetCommit ------------------------------------------------------------------------------


@scenarios.versions("oc_3_simple_group_commit_and_fetch", OFFSET_COMMIT_VERSIONS, rule="OC-3")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await commit(s, "a", g, v, SOME, metadata=f"meta v{v}")
    await fetch(s, "a", g, 8, {T3: [0, 1, 2], T1: [0]})
    await s.call("ctl", ApiKey.DESCRIBE_GROUPS, 5, groups=[g], include_authorized_operations=False)


@scenarios.versions("oc_2_unknown_topic_and_partition", OFFSET_COMMIT_VERSIONS, rule="OC-2")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await commit(s, "a", g, v, {(T3, 0): 1, (T3, 3): 2, (T3, -1): 3, (s.topic("missing"), 0): 4})
    await fetch(s, "a", g, 8, {T3: [0, 3], s.topic("missing"): [0]})


@scenarios.versions("oc_2_only_unknown_topics_skip_the_coordinator", (2, 9), rule="OC-2")
async def _(s: Side, v: int) -> None:
    g = s.group()
    # The generation would be illegal for an absent group, but the coordinator is never asked.
    await commit(s, "a", g, v, {(s.topic("missing"), 0): 4}, generation=5, member_id="m")
    await commit(s, "a", g, v, {}, generation=5, member_id="m")
    await s.call("ctl", ApiKey.DESCRIBE_GROUPS, 5, groups=[g], include_authorized_operations=False)


@scenarios.versions("oc_3_absent_group_with_a_generation", OFFSET_COMMIT_VERSIONS, rule="OC-3")
async def _(s: Side, v: int) -> None:
    await commit(s, "a", s.group(), v, {(T3, 0): 1}, generation=1, member_id="m")


@scenarios("ge_4_the_empty_group_id", rule="GE-4")
async def _(s: Side) -> None:
    # "" is a legal group for OffsetCommit, OffsetFetch, DescribeGroups and DeleteGroups. Both
    # brokers have one group "" for every scenario: only this one changes it.
    t = await create_topic(s)
    for v in (2, 8, 9):
        await commit(s, "a", "", v, {(t, 0): v})
        await fetch(s, "a", "", 1, {t: [0]})
        await fetch(s, "a", "", 8, {t: [0]})
    await s.call("ctl", ApiKey.DESCRIBE_GROUPS, 0, groups=[""])
    await s.call("ctl", ApiKey.DESCRIBE_GROUPS, 5, groups=[""], include_authorized_operations=False)
    await s.call("ctl", ApiKey.DELETE_GROUPS, 0, groups_names=[""])
    await s.call("ctl", ApiKey.DELETE_GROUPS, 2, groups_names=[""])
    await fetch(s, "a", "", 8, {t: [0]})
    await s.call("ctl", ApiKey.DESCRIBE_GROUPS, 5, groups=[""], include_authorized_operations=False)


@scenarios.versions("oc_4_member_commit_in_stable", (2, 5, 7, 9), rule="OC-4")
async def _(s: Side, v: int) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    a = grp["members"]["a"]
    await commit(s, "a", g, v, {(T3, 0): 5}, generation=grp["generation"], member_id=a)
    await commit(s, "a", g, v, {(T3, 0): 6}, generation=grp["generation"] + 1, member_id=a)
    await commit(s, "a", g, v, {(T3, 0): 7}, generation=grp["generation"], member_id="nobody")
    await commit(s, "a", g, v, {(T3, 0): 8})
    await commit(s, "a", g, v, {(T3, 0): 9}, generation=-1, member_id=a)
    await fetch(s, "a", g, 8, {T3: [0]})


@scenarios.versions("oc_4_static_member_commit", (7, 9), rule="OC-4")
async def _(s: Side, v: int) -> None:
    g = s.group()
    grp = await stable_group(s, g, instances={"a": "ia"})
    a, gen = grp["members"]["a"], grp["generation"]
    await commit(s, "a", g, v, {(T3, 0): 5}, generation=gen, member_id=a, instance_id="ia")
    await commit(s, "a", g, v, {(T3, 0): 6}, generation=gen, member_id="ia-other", instance_id="ia")
    await commit(s, "a", g, v, {(T3, 0): 7}, generation=gen, member_id=a, instance_id="ib")
    await commit(s, "a", g, v, {(T3, 0): 8}, generation=-1, member_id="", instance_id="ia")
    await fetch(s, "a", g, 8, {T3: [0]})


@scenarios("oc_4_commit_in_completing_rebalance", rule="OC-4")
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9)
    await commit(s, "a", g, 9, {(T3, 0): 5}, generation=a.generation_id, member_id=a.member_id)
    await commit(s, "a", g, 9, {(T3, 0): 5})


@scenarios("oc_4_commit_in_preparing_rebalance", rule="OC-4")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, ("a", "b"))
    a, b, gen = grp["members"]["a"], grp["members"]["b"], grp["generation"]
    pa = await s.send("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a))
    await wait_state(s, g, "PreparingRebalance")
    await commit(s, "b", g, 8, {(T3, 1): 11}, generation=gen, member_id=b)
    await commit(s, "b", g, 8, {(T3, 1): 12}, generation=gen + 1, member_id=b)
    await s.call("b", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, b))
    await s.answer(pa)
    await fetch(s, "b", g, 8, {T3: [1]})


@scenarios("oc_4_empty_group_accepts_admin_commits", rule="OC-4")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    a = grp["members"]["a"]
    await s.call("a", ApiKey.LEAVE_GROUP, 5, group_id=g, members=[{"member_id": a, "group_instance_id": None, "reason": None}])
    await commit(s, "ctl", g, 9, {(T3, 0): 3}, member_id="whoever")
    await commit(s, "ctl", g, 9, {(T3, 0): 4}, generation=grp["generation"], member_id=a)
    await fetch(s, "ctl", g, 9, {T3: [0]})


@scenarios.versions("oc_6_metadata_size", (2, 9), rule="OC-6")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await commit(s, "a", g, v, {(T3, 0): 1}, metadata="x" * 4096)
    await commit(s, "a", g, v, {(T3, 0): 2, (T3, 1): 2}, metadata="x" * 4097)
    await commit(s, "a", g, v, {(T3, 2): 3}, metadata="\U0001f600" * 2048)
    await commit(s, "a", g, v, {(T3, 2): 4}, metadata="\U0001f600" * 2048 + "x")
    await fetch(s, "a", g, 8, {T3: [0, 1, 2]})


@scenarios.versions("oc_7_null_metadata_and_leader_epoch", (2, 6, 9), rule="OC-7")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await commit(s, "a", g, v, {(T3, 0): 42}, metadata=None, leader_epoch=7)
    await fetch(s, "a", g, 5, {T3: [0]})
    await fetch(s, "a", g, 8, {T3: [0]})


@scenarios.versions("oc_7_retention_time", (2, 3, 4), rule="OC-7")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await commit(s, "a", g, v, {(T3, 0): 1}, retention_ms=3_600_000)
    await commit(s, "a", g, v, {(T3, 1): 2}, retention_ms=-1)
    await fetch(s, "a", g, 8, {T3: [0, 1]})


@scenarios("oc_7_last_commit_wins", rule="OC-7")
async def _(s: Side) -> None:
    g = s.group()
    await commit(s, "a", g, 9, {(T3, 0): 100})
    await commit(s, "a", g, 9, {(T3, 0): 5}, metadata="lower")
    await commit(s, "a", g, 9, {(T3, 0): -1})
    await fetch(s, "a", g, 8, {T3: [0]})


@scenarios("oc_commit_to_a_consumer_group_member", rule="KO-1")
async def _(s: Side) -> None:
    g = s.group()
    hb = await s.call(
        "a",
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        group_id=g,
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[T3],
        topic_partitions=[],
    )
    await commit(s, "a", g, 9, {(T3, 0): 5}, generation=hb.member_epoch, member_id=hb.member_id)
    await commit(s, "a", g, 9, {(T3, 0): 6}, generation=hb.member_epoch + 1, member_id=hb.member_id)
    await commit(s, "a", g, 8, {(T3, 0): 7}, generation=hb.member_epoch, member_id=hb.member_id)
    await commit(s, "a", g, 9, {(T3, 0): 8}, generation=hb.member_epoch, member_id="nobody")
    await commit(s, "a", g, 9, {(T3, 0): 9})
    await fetch(s, "a", g, 9, {T3: [0]}, member_id=hb.member_id, member_epoch=hb.member_epoch)
    await fetch(s, "a", g, 9, {T3: [0]}, member_id=hb.member_id, member_epoch=hb.member_epoch + 1)
    await fetch(s, "a", g, 9, {T3: [0]}, member_id="nobody", member_epoch=1)
    await fetch(s, "a", g, 9, {T3: [0]}, member_id=None, member_epoch=-1)


# -- OffsetFetch -------------------------------------------------------------------------------


@scenarios.versions("of_2_no_committed_offset", OFFSET_FETCH_VERSIONS, rule="OF-2")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await commit(s, "a", g, 9, {(T3, 0): 3})
    await fetch(s, "a", g, v, {T3: [0, 1], s.topic("missing"): [0]})


@scenarios.versions("of_3_unknown_group", OFFSET_FETCH_VERSIONS, rule="OF-3")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await fetch(s, "a", g, v, {T3: [0]})
    if v >= 2:
        await fetch(s, "a", g, v, None)


@scenarios.versions("of_4_all_partitions", range(2, 10), rule="OF-4")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await commit(s, "a", g, 9, SOME, metadata="m")
    await fetch(s, "a", g, v, None)


@scenarios.versions("of_happy_after_commit", OFFSET_FETCH_VERSIONS, rule="OF-4")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await commit(s, "a", g, 9, SOME, metadata="m", leader_epoch=3)
    await fetch(s, "a", g, v, {T3: [0, 2], T1: [0]})


@scenarios.versions("of_6_batched_groups", (8, 9), rule="OF-6")
async def _(s: Side, v: int) -> None:
    g1, g2, g3 = s.group("1"), s.group("2"), s.group("3")
    await commit(s, "a", g1, 9, {(T3, 0): 1})
    await commit(s, "a", g2, 9, {(T1, 0): 2})
    groups = [
        {"group_id": g1, "topics": [{"name": T3, "partition_indexes": [0, 1]}]},
        {"group_id": g2, "topics": None},
        {"group_id": g3, "topics": None},
        {"group_id": g1, "topics": None},
    ]
    if v >= 9:
        for e in groups:
            e.update(member_id=None, member_epoch=-1)
    await s.call("a", ApiKey.OFFSET_FETCH, v, groups=groups, require_stable=False)
    await s.call("a", ApiKey.OFFSET_FETCH, v, groups=[], require_stable=False)


@scenarios.versions("of_8_classic_group_ignores_member_fields", (9,), rule="OF-8")
async def _(s: Side, v: int) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    await commit(s, "a", g, 9, {(T3, 0): 4}, generation=grp["generation"], member_id=grp["members"]["a"])
    await fetch(s, "a", g, v, {T3: [0]}, member_id="nobody", member_epoch=77)


@scenarios.versions("of_empty_topic_list", (1, 2, 7, 8), rule="OF-4")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await commit(s, "a", g, 9, {(T3, 0): 4})
    await fetch(s, "a", g, v, {})


# -- OffsetDelete ------------------------------------------------------------------------------


async def offset_delete(s: Side, group: str, topics: dict[str, list[int]]) -> None:
    await s.call(
        "ctl",
        ApiKey.OFFSET_DELETE,
        0,
        group_id=group,
        topics=[{"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in topics.items()],
    )


@scenarios("od_1_absent_group", rule="OD-1")
async def _(s: Side) -> None:
    await offset_delete(s, s.group(), {T3: [0]})


@scenarios("od_2_simple_group", rule="OD-2")
async def _(s: Side) -> None:
    g = s.group()
    await commit(s, "a", g, 9, SOME)
    await offset_delete(s, g, {T3: [0, 1], T1: [0]})
    await fetch(s, "a", g, 8, None)


@scenarios("od_2_stable_group_subscribed_and_not", rule="OD-2")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g)  # subscribed to T3
    await commit(s, "a", g, 9, SOME, generation=grp["generation"], member_id=grp["members"]["a"])
    await offset_delete(s, g, {T3: [0], T1: [0]})
    await fetch(s, "a", g, 8, None)


@scenarios("od_1_non_consumer_protocol_type", rule="OD-1")
async def _(s: Side) -> None:
    g = s.group()
    a = await s.call("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, protocol_type="connect"))
    a = await s.call("a", ApiKey.JOIN_GROUP, 9, **join_fields(g, 9, a.member_id, protocol_type="connect"))
    await sync(s, "a", g, 5, a.member_id, a.generation_id, {a.member_id: b"x"}, protocol_type="connect")
    await commit(s, "a", g, 9, {(T1, 0): 1}, generation=a.generation_id, member_id=a.member_id)
    await offset_delete(s, g, {T1: [0]})


@scenarios("od_2_unparseable_subscription", rule="OD-2")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, protocols=[{"name": "range", "metadata": b"\x00\x09garbage"}])
    await commit(s, "a", g, 9, {(T1, 0): 1}, generation=grp["generation"], member_id=grp["members"]["a"])
    await offset_delete(s, g, {T1: [0]})


@scenarios("od_2_empty_group_after_leave", rule="OD-2")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g)
    await commit(s, "a", g, 9, {(T3, 0): 1}, generation=grp["generation"], member_id=grp["members"]["a"])
    a = grp["members"]["a"]
    await s.call("a", ApiKey.LEAVE_GROUP, 5, group_id=g, members=[{"member_id": a, "group_instance_id": None, "reason": None}])
    await offset_delete(s, g, {T3: [0]})
    await fetch(s, "a", g, 8, None)


@scenarios("od_3_unknown_topic_and_partition", rule="OD-3")
async def _(s: Side) -> None:
    g = s.group()
    await commit(s, "a", g, 9, {(T3, 0): 1})
    await offset_delete(s, g, {T3: [0, 7], s.topic("missing"): [0]})
    await offset_delete(s, s.group("absent"), {s.topic("missing"): [0]})


@scenarios("od_2_consumer_group_subscription", rule="OD-2")
async def _(s: Side) -> None:
    g = s.group()
    await s.call(
        "a",
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        group_id=g,
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[T3],
        topic_partitions=[],
    )
    await commit(s, "ctl", g, 9, {(T3, 0): 1, (T1, 0): 2})
    await offset_delete(s, g, {T3: [0], T1: [0]})
    await fetch(s, "ctl", g, 8, None)


@scenarios("od_ge_4_empty_group_id", rule="GE-4")
async def _(s: Side) -> None:
    await offset_delete(s, "", {T3: [0]})


@scenarios("od_2_subscription_by_topic_name", rule="OD-2")
async def _(s: Side) -> None:
    g = s.group()
    grp = await stable_group(s, g, protocols=[{"name": "range", "metadata": subscription([T1, "not-a-topic"])}])
    await commit(s, "a", g, 9, {(T1, 0): 1, (T3, 1): 2}, generation=grp["generation"], member_id=grp["members"]["a"])
    await offset_delete(s, g, {T1: [0], T3: [1]})
    d = await describe(s, g)
    s.note("state", d.group_state)


@scenarios.versions("of_5_require_stable", (7, 8, 9), rule="OF-5")
async def _(s: Side, v: int) -> None:
    txn, g = s.txn(), s.group()
    await commit(s, "c", g, 9, {(T3, 0): 1, (T3, 1): 2})
    p = await s.call(
        "p", ApiKey.INIT_PRODUCER_ID, 4, transactional_id=txn, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
    )
    await s.call(
        "p", ApiKey.ADD_OFFSETS_TO_TXN, 3, transactional_id=txn, producer_id=p.producer_id, producer_epoch=p.producer_epoch, group_id=g
    )
    await s.call(
        "p",
        ApiKey.TXN_OFFSET_COMMIT,
        3,
        transactional_id=txn,
        group_id=g,
        producer_id=p.producer_id,
        producer_epoch=p.producer_epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": T3,
                "partitions": [{"partition_index": 0, "committed_offset": 9, "committed_leader_epoch": -1, "committed_metadata": ""}],
            }
        ],
    )
    await fetch(s, "c", g, v, {T3: [0, 1]}, require_stable=True)
    await fetch(s, "c", g, v, None, require_stable=True)
    await fetch(s, "c", g, v, {T3: [0, 1]}, require_stable=False)


@scenarios("oc_5_commits_keep_the_member_alive", rule="OC-5", slow=True)
async def _(s: Side) -> None:
    g = s.group()
    a = await join_dynamic(s, "a", g, 9, session_timeout_ms=6000, rebalance_timeout_ms=6000)
    await sync(s, "a", g, 5, a.member_id, a.generation_id, {})
    # Only commits for 9 s (longer than the session): the member stays.
    deadline = asyncio.get_running_loop().time() + 9
    n = 0
    while asyncio.get_running_loop().time() < deadline:
        n += 1
        await s.quiet("a", ApiKey.OFFSET_COMMIT, 9, **commit_fields(g, 9, {(T3, 0): n}, generation=a.generation_id, member_id=a.member_id))
        await asyncio.sleep(1.0)  # a consumer's commit interval, not a wait for the broker
    await s.call("ctl", ApiKey.DESCRIBE_GROUPS, 5, groups=[g], include_authorized_operations=False)
    await commit(s, "a", g, 9, {(T3, 0): 0}, generation=a.generation_id, member_id=a.member_id)
