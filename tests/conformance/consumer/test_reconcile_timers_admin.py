"""Spec 6.5-6.9 and 5.x on consumer groups: reconciliation (KR-1..KR-4), timers (KT-1..KT-3),
ConsumerGroupDescribe (KD-1), ListGroups/DescribeGroups/DeleteGroups/OffsetDelete (LI-2, DG-2,
DL-2, OD-1), offsets with member epochs (KO-1, OF-8), and a restart that loses nothing (RL-5)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.consumer import OffsetFetchRequest

from broker import Broker, Config
from tests.support import groups as g
from tests.support.consumer_groups import (
    GROUP_ID_NOT_FOUND,
    INT32_MIN,
    INVALID_GROUP_ID,
    NON_EMPTY_GROUP,
    NONE,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNSUPPORTED_VERSION,
    CgMember,
    converge,
    describe,
    describe_one,
    heartbeat,
)
from tests.support.coordinator import serving
from tests.support.raw_client import RawClient
from tests.support.waiting import async_wait_until as wait_until


async def three_members(broker: Broker, client: RawClient, partitions: int = 6, **kw: Any) -> list[CgMember]:
    broker.topics.create("t", partitions)
    members = [CgMember(client, "g", ["t"], member_id=f"m{i}", **kw) for i in range(3)]
    for m in members:
        await m.join()
    await converge(members)
    return members


async def test_kr_1_kr_3_no_partition_owned_twice_through_joins_and_leaves(broker: Broker, raw: Any) -> None:
    client = await raw()
    members = await three_members(broker, client, partitions=12)
    owned = [p for m in members for p in m.partitions()]
    assert len(owned) == len(set(owned)) == 12
    await members[1].leave()
    rest = [members[0], members[2]]
    await converge(rest)  # converge() checks KR-3 after every heartbeat
    assert len({p for m in rest for p in m.partitions()}) == 12
    late = CgMember(client, "g", ["t"], member_id="late")
    await late.join()
    await converge([*rest, late])
    assert sorted(len(m.partitions()) for m in [*rest, late]) == [4, 4, 4]


async def test_kr_2_unrevoked_member_stays_until_it_acknowledges(broker: Broker, raw: Any) -> None:
    client = await raw()
    broker.topics.create("t", 2)
    a = CgMember(client, "g", ["t"], member_id="a", assignor="range")
    await a.join()
    b = CgMember(client, "g", ["t"], member_id="b", assignor="range")
    await b.join()
    tid = broker.topics.get("t").topic_id
    resp = await heartbeat(client, "g", "a", 2, owned={tid: [0, 1]})
    assert resp.member_epoch == 2  # revocation asked
    for _ in range(2):  # still owning the partition: no progress
        resp = await heartbeat(client, "g", "a", 2, owned={tid: [0, 1]})
        assert resp.member_epoch == 2
    resp = await heartbeat(client, "g", "a", 2)  # null TopicPartitions: no progress either
    assert resp.member_epoch == 2
    resp = await heartbeat(client, "g", "a", 2, owned={tid: [0]})
    assert resp.member_epoch == 3


async def test_kr_4_group_states(broker: Broker, raw: Any) -> None:
    client = await raw()
    broker.topics.create("t", 2)
    a = CgMember(client, "g", ["t"], member_id="a")
    await a.join()
    assert (await describe_one(client, "g")).group_state == "Stable"
    b = CgMember(client, "g", ["t"], member_id="b")
    await b.join()
    assert (await describe_one(client, "g")).group_state == "Reconciling"
    await converge([a, b])
    await a.leave()
    await b.leave()
    assert (await describe_one(client, "g")).group_state == "Empty"


# The live member must outlast a second of stall of its event loop (make test runs in parallel).
@pytest.mark.broker_config(group_consumer_session_timeout_ms=1000, group_consumer_heartbeat_interval_ms=100)
async def test_kt_1_session_timeout_fences(broker: Broker, raw: Any) -> None:
    client = await raw()
    broker.topics.create("t", 2)
    a = CgMember(client, "g", ["t"], member_id="a")
    await a.join()
    b = CgMember(client, "g", ["t"], member_id="b")
    await b.join()
    await converge([a, b])

    async def only_a() -> bool:
        await a.beat()
        d = await describe_one(client, "g")
        return [m.member_id for m in d.members] == ["a"]

    await wait_until(only_a, timeout=10, message="b was not fenced")
    assert (await heartbeat(client, "g", "b", b.epoch)).error_code == UNKNOWN_MEMBER_ID


async def test_kt_2_rebalance_timeout_fences_a_member_that_does_not_revoke(broker: Broker, raw: Any) -> None:
    client = await raw()
    broker.topics.create("t", 2)
    a = CgMember(client, "g", ["t"], member_id="a", rebalance_timeout_ms=200)
    await a.join()
    b = CgMember(client, "g", ["t"], member_id="b")
    await b.join()
    tid = broker.topics.get("t").topic_id
    await heartbeat(client, "g", "a", 2, owned={tid: [0, 1]})  # told to revoke; never acknowledges

    async def a_gone() -> bool:
        await b.beat()
        return [m.member_id for m in (await describe_one(client, "g")).members] == ["b"]

    await wait_until(a_gone, timeout=10, message="a was not fenced by its rebalance timeout")
    await converge([b])
    assert len(b.partitions()) == 2


async def test_kd_1_describe(broker: Broker, raw: Any) -> None:
    client = await raw()
    members = await three_members(broker, client)
    resp = await describe(client, "g", "g", "", "nope", include_ops=True)
    # One answer per requested id, a repeated one too, as in Kafka 4.4; in its order: the blank id
    # first, then by coordinator partition ("g" on __consumer_offsets-3, "nope" on 4).
    assert [x.group_id for x in resp.groups] == ["", "g", "g", "nope"]
    empty, d, again, missing = resp.groups
    assert again == d
    assert (d.error_code, d.group_state, d.assignor_name) == (NONE, "Stable", "uniform")
    # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: every GROUP operation (no authorizer).
    assert d.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
    assert (empty.authorized_operations, missing.authorized_operations) == (INT32_MIN, INT32_MIN)  # errors: none
    by_id = {m.member_id: m for m in d.members}
    for m in members:
        dm = by_id[m.member_id]
        assert dm.member_epoch == d.assignment_epoch and dm.member_type == 1
        assert {(tp.topic_id, p) for tp in dm.assignment.topic_partitions for p in tp.partitions} == m.partitions()
        assert all(tp.topic_name == "t" for tp in dm.target_assignment.topic_partitions)
    assert (empty.error_code, empty.error_message) == (INVALID_GROUP_ID, None)
    assert (missing.error_code, missing.error_message) == (GROUP_ID_NOT_FOUND, "Group nope not found.")


async def test_li_2_dg_2_list_and_describe_groups(broker: Broker, raw: Any) -> None:
    client = await raw()
    await three_members(broker, client)
    resp = await g.list_groups(client, version=5)
    listed = {x.group_id: x for x in resp.groups}
    assert (listed["g"].protocol_type, listed["g"].group_state, listed["g"].group_type) == ("consumer", "Stable", "consumer")
    resp = await g.list_groups(client, version=5, types=["Consumer"])
    assert [x.group_id for x in resp.groups] == ["g"]
    resp = await g.list_groups(client, version=5, types=["classic"])
    assert "g" not in [x.group_id for x in resp.groups]
    resp = await g.list_groups(client, version=5, states=["stable "])
    assert [x.group_id for x in resp.groups] == ["g"]
    resp = await g.list_groups(client, version=5, states=["Empty"])
    assert resp.groups == []
    described = await g.describe(client, ["g"], version=5)
    dg = described.groups[0]
    assert (dg.error_code, dg.group_state, dg.protocol_type, dg.members) == (NONE, "Dead", "", [])


async def test_dl_2_delete_consumer_group(broker: Broker, raw: Any) -> None:
    client = await raw()
    members = await three_members(broker, client)
    resp = await g.delete_groups(client, ["g"])
    assert [(r.group_id, r.error_code) for r in resp.results] == [("g", NON_EMPTY_GROUP)]
    for m in members:
        await m.leave()
    resp = await g.delete_groups(client, ["g"])
    assert [(r.group_id, r.error_code) for r in resp.results] == [("g", NONE)]
    assert (await describe_one(client, "g")).error_code == GROUP_ID_NOT_FOUND


async def commit(client: RawClient, member: str, epoch: int, offset: int, *, version: int = 9, topic: str = "t") -> int:
    errors = await g.commit(client, "g", {(topic, 0): offset}, version=version, generation=epoch, member_id=member)
    return errors[(topic, 0)]


async def test_ko_1_offset_commit_with_member_epochs(broker: Broker, raw: Any) -> None:
    client = await raw()
    members = await three_members(broker, client)
    a = members[0]
    assert await commit(client, a.member_id, a.epoch, 5) == NONE
    assert await commit(client, a.member_id, a.epoch - 1, 5) == STALE_MEMBER_EPOCH
    assert await commit(client, "stranger", a.epoch, 5) == UNKNOWN_MEMBER_ID
    assert await commit(client, a.member_id, a.epoch, 5, version=8) == UNSUPPORTED_VERSION
    assert await commit(client, "", -1, 5) == UNKNOWN_MEMBER_ID  # the group is not empty
    for m in members:
        await m.leave()
    assert await commit(client, "", -1, 7) == NONE  # an admin commit into an empty group


def fetch(group: str, member: str | None, epoch: int) -> Any:
    t = OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name="t", partition_indexes=[0])
    grp = OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, member_id=member, member_epoch=epoch, topics=[t])
    return OffsetFetchRequest(version=9, groups=[grp], require_stable=False)


async def test_of_8_offset_fetch_member_validation(broker: Broker, raw: Any) -> None:
    client = await raw()
    members = await three_members(broker, client)
    a = members[0]
    assert await commit(client, a.member_id, a.epoch, 42) == NONE
    resp = await client.request(fetch("g", a.member_id, a.epoch), version=9)
    assert (resp.groups[0].error_code, resp.groups[0].topics[0].partitions[0].committed_offset) == (NONE, 42)
    assert (await client.request(fetch("g", a.member_id, a.epoch + 5), version=9)).groups[0].error_code == STALE_MEMBER_EPOCH
    assert (await client.request(fetch("g", "stranger", 1), version=9)).groups[0].error_code == UNKNOWN_MEMBER_ID
    assert (await client.request(fetch("g", None, -1), version=9)).groups[0].error_code == NONE


async def test_od_1_offset_delete_on_consumer_group(broker: Broker, raw: Any) -> None:
    client = await raw()
    members = await three_members(broker, client)
    broker.topics.create("other", 1)
    a = members[0]
    assert await commit(client, a.member_id, a.epoch, 3, topic="other") == NONE
    resp = await g.delete_offsets(client, "g", {"t": [0], "other": [0]})
    assert resp.error_code == NONE  # a non-empty consumer group may delete offsets
    assert [(t.name, t.partitions[0].error_code) for t in resp.topics] == [("t", 86), ("other", NONE)]


async def test_rl_5_restart_loses_no_member_epoch_or_assignment(make_config: Callable[..., Config]) -> None:
    config = make_config()
    async with serving(config) as served:
        await asyncio.wait_for(served.broker.coordinator.loaded.wait(), 10)
        client = await served.connect()
        members = await three_members(served.broker, client)
        before = await describe_one(client, "g")
    async with serving(config) as served:
        await asyncio.wait_for(served.broker.coordinator.loaded.wait(), 10)
        client = await served.connect()
        after = await describe_one(client, "g")
        assert after == before
        for m in members:  # every member goes on at its epoch with its partitions
            m.client = client
            resp = await m.beat()
            assert (resp.error_code, resp.member_epoch) == (NONE, before.assignment_epoch)
        d = await describe_one(client, "g")
        assert (d.group_state, d.group_epoch) == ("Stable", before.group_epoch)


async def test_kt_3_restart_rearms_session_timers(make_config: Callable[..., Config]) -> None:
    config = make_config(group_consumer_session_timeout_ms=300, group_consumer_heartbeat_interval_ms=50)
    async with serving(config) as served:
        await asyncio.wait_for(served.broker.coordinator.loaded.wait(), 10)
        await three_members(served.broker, await served.connect())
    async with serving(config) as served:
        await asyncio.wait_for(served.broker.coordinator.loaded.wait(), 10)
        client = await served.connect()

        async def empty() -> bool:
            return (await describe_one(client, "g")).group_state == "Empty"

        await wait_until(empty, timeout=10, message="loaded members were not fenced by their session timers")
