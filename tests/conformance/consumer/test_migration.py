"""Spec 6.10, classic <-> consumer migration (KM-1..KM-4), over raw connections: classic members
form a group with real JoinGroup/SyncGroup exchanges, consumer-protocol members heartbeat."""

from __future__ import annotations

from typing import Any

import pytest

from broker import Broker
from broker.coordinator.consumer.embedded import parse_assignment
from tests.support import groups as g
from tests.support.consumer_groups import (
    GROUP_ID_NOT_FOUND,
    NONE,
    UNKNOWN_MEMBER_ID,
    CgMember,
    converge,
    describe_one,
)
from tests.support.coordinator import form_group

ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79


async def classic_pair(broker: Broker, raw: Any) -> list[Any]:
    broker.topics.create("t", 4)
    members = await form_group(raw, "g", 2, topics=["t"], assignments=[g.assignment({"t": [0, 1]}), g.assignment({"t": [2, 3]})])
    return members


async def test_km_2_upgrade_keeps_classic_members_and_their_partitions(broker: Broker, raw: Any) -> None:
    classic = await classic_pair(broker, raw)
    generation = classic[0].generation
    client = await raw()
    new = CgMember(client, "g", ["t"], member_id="new")
    resp = await new.join()
    assert resp.error_code == NONE
    d = await describe_one(client, "g")
    assert d.error_code == NONE and d.group_epoch == generation + 1
    by_id = {m.member_id: m for m in d.members}
    for old, parts in zip(classic, ([0, 1], [2, 3]), strict=True):
        m = by_id[old.member_id]
        assert m.member_type == 0 and m.member_epoch == generation  # a classic member, at the generation
        assert [p for tp in m.assignment.topic_partitions for p in tp.partitions] == parts
    assert by_id["new"].member_type == 1
    listed = {x.group_id: x for x in (await g.list_groups(client)).groups}
    assert listed["g"].group_type == "consumer"


@pytest.mark.broker_config(group_consumer_migration_policy="downgrade")
async def test_km_1_upgrade_disabled_by_policy(broker: Broker, raw: Any) -> None:
    await classic_pair(broker, raw)
    client = await raw()
    resp = await CgMember(client, "g", ["t"], member_id="new").join()
    assert (resp.error_code, resp.error_message) == (GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")


async def test_km_3_classic_member_served_by_the_consumer_group(broker: Broker, raw: Any) -> None:
    """A classic member joining a consumer group: MEMBER_ID_REQUIRED first (v4+), then a join
    answered at once with its member epoch as generation and no leader; its SyncGroup gets the
    server's assignment; Heartbeat says REBALANCE_IN_PROGRESS while it must rejoin."""
    broker.topics.create("t", 4)
    client = await raw()
    consumer = CgMember(client, "g", ["t"], member_id="c", assignor="range")
    await consumer.join()
    classic_client = await raw()
    first = await g.join(classic_client, "g", "", protocols=[("range", g.subscription(["t"]))])
    assert first.error_code == MEMBER_ID_REQUIRED
    joined = await g.join(classic_client, "g", first.member_id, protocols=[("range", g.subscription(["t"]))])
    assert (joined.error_code, joined.leader, joined.members, joined.protocol_name) == (NONE, "", [], "range")
    epoch = joined.generation_id
    # Its partitions are still c's: nothing yet; c revokes, then the classic member rejoins to get them.
    synced = await g.sync(classic_client, "g", first.member_id, epoch)
    assert synced.error_code == NONE and parse_assignment(synced.assignment) == {}
    await consumer.beat()
    await consumer.beat()
    hb = await g.heartbeat(classic_client, "g", first.member_id, epoch)
    assert hb.error_code == REBALANCE_IN_PROGRESS  # its target partitions became free
    joined = await g.join(classic_client, "g", first.member_id, protocols=[("range", g.subscription(["t"]))])
    synced = await g.sync(classic_client, "g", first.member_id, joined.generation_id)
    mine = parse_assignment(synced.assignment)
    assert synced.error_code == NONE and sorted(mine["t"]) in ([0, 1], [2, 3])
    assert (await g.heartbeat(classic_client, "g", first.member_id, joined.generation_id)).error_code == NONE
    assert (await g.heartbeat(classic_client, "g", first.member_id, joined.generation_id + 7)).error_code == ILLEGAL_GENERATION
    # A consumer-protocol member addressed through the classic APIs is unknown there.
    assert (await g.heartbeat(classic_client, "g", "c", consumer.epoch)).error_code == UNKNOWN_MEMBER_ID
    bad = await g.join(classic_client, "g", "", protocol_type="connect", protocols=[("x", b"")])
    assert bad.error_code == INCONSISTENT_GROUP_PROTOCOL
    resp = await g.leave(classic_client, "g", [(first.member_id, None)])
    assert resp.members[0].error_code == NONE
    d = await describe_one(client, "g")
    assert [m.member_id for m in d.members] == ["c"]


async def test_km_4_downgrade_when_the_last_consumer_member_leaves(broker: Broker, raw: Any) -> None:
    classic = await classic_pair(broker, raw)
    client = await raw()
    new = CgMember(client, "g", ["t"], member_id="new")
    await new.join()
    d = await describe_one(client, "g")
    assert d.error_code == NONE
    epoch = d.group_epoch
    await new.leave()
    d = await describe_one(client, "g")
    assert d.error_code == GROUP_ID_NOT_FOUND  # no longer a consumer group
    described = (await g.describe(client, ["g"])).groups[0]
    # A classic group again, rebalancing from the group epoch as its generation.
    assert (described.group_state, described.protocol_type) == ("PreparingRebalance", "consumer")
    assert {m.member_id for m in described.members} == {m.member_id for m in classic}
    listed = {x.group_id: x for x in (await g.list_groups(client)).groups}
    assert listed["g"].group_type == "classic"
    assert epoch >= classic[0].generation


async def test_km_3_empty_consumer_group_becomes_classic(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 2)
    client = await raw()
    member = CgMember(client, "g", ["t"])
    await member.join()
    await converge([member])
    await member.leave()
    members = await form_group(raw, "g", 1, topics=["t"])
    assert members[0].generation == 1
    assert (await describe_one(client, "g")).error_code == GROUP_ID_NOT_FOUND
