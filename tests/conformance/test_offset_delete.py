"""OffsetDelete v0: spec rules OD-1..OD-3 (section 4.4), on real classic groups.

Not covered: OD-1's Dead state (only observable while a shard unloads, CS-6) and consumer
(KIP-848) groups (not served by this broker yet).
"""

from __future__ import annotations

from typing import Any

import pytest

from broker import Broker
from tests.support import groups as g
from tests.support.coordinator import (
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    INVALID_GROUP_ID,
    NON_EMPTY_GROUP,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
    committed,
    create_topic,
    form_group,
    ready_client,
    wait_state,
)
from tests.support.offsets_log import offset_records, read_all_logs


async def _setup(broker: Broker, raw: Any) -> Any:
    create_topic(broker, "t", 2)
    create_topic(broker, "u", 2)
    return await ready_client(raw)


def _partitions(resp: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


async def _commit(client: Any, group: str, offsets: dict[tuple[str, int], int], **kw: Any) -> None:
    assert await g.commit(client, group, offsets, **kw) == dict.fromkeys(offsets, NONE)


# -- OD-1 ------------------------------------------------------------------------------------------


async def test_OD_1_absent_group_is_group_id_not_found_without_partitions(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    resp = await g.delete_offsets(client, "od1-absent", {"t": [0, 1], "no-such-topic": [0]})
    assert (resp.error_code, resp.topics) == (GROUP_ID_NOT_FOUND, [])


async def test_OD_1_empty_group_id_is_invalid(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    await _commit(client, "", {("t", 0): 1})  # "" is a legal group for OffsetCommit (GE-4), not here
    resp = await g.delete_offsets(client, "", {"t": [0]})
    assert (resp.error_code, resp.topics) == (INVALID_GROUP_ID, [])
    assert await committed(client, "") == {("t", 0): 1}


@pytest.mark.parametrize("state", ["Stable", "CompletingRebalance", "PreparingRebalance"])
async def test_OD_1_non_empty_group_with_other_protocol_type_is_non_empty_group(broker: Broker, raw: Any, state: str) -> None:
    client = await _setup(broker, raw)
    group = f"od1-connect-{state}"
    await _commit(client, group, {("u", 0): 4})
    protocols = [("default", b"\x00\x01opaque")]
    await form_group(raw, group, protocol_type="connect", protocols=protocols, sync=state != "CompletingRebalance")
    if state == "PreparingRebalance":
        newcomer = await raw("newcomer")
        first = await g.join(newcomer, group, "", protocol_type="connect", protocols=protocols)
        newcomer.send(g.join_request(group, first.member_id, protocol_type="connect", protocols=protocols))
    await wait_state(client, group, state)
    resp = await g.delete_offsets(client, group, {"u": [0]})
    assert (resp.error_code, resp.topics) == (NON_EMPTY_GROUP, [])
    assert await committed(client, group) == {("u", 0): 4}


async def test_OD_1_consumer_group_with_members_is_allowed(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    (m,) = await form_group(raw, "od1-consumer", topics=["t"])
    await _commit(client, "od1-consumer", {("u", 1): 9}, generation=m.generation, member_id=m.member_id)
    resp = await g.delete_offsets(client, "od1-consumer", {"u": [1]})
    assert (resp.error_code, _partitions(resp)) == (NONE, {("u", 1): NONE})
    assert await committed(client, "od1-consumer") == {}


# -- OD-2 ------------------------------------------------------------------------------------------


async def test_OD_2_subscribed_topics_are_refused_others_tombstoned(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    (m,) = await form_group(raw, "od2-sub", topics=["t"])
    await _commit(client, "od2-sub", {("t", 0): 1, ("t", 1): 2, ("u", 0): 3}, generation=m.generation, member_id=m.member_id)
    resp = await g.delete_offsets(client, "od2-sub", {"t": [0, 1], "u": [0, 1]})
    assert resp.error_code == NONE
    assert _partitions(resp) == {
        ("t", 0): GROUP_SUBSCRIBED_TO_TOPIC,
        ("t", 1): GROUP_SUBSCRIBED_TO_TOPIC,
        ("u", 0): NONE,
        ("u", 1): NONE,  # nothing committed: no-op, still 0
    }
    assert await committed(client, "od2-sub") == {("t", 0): 1, ("t", 1): 2}
    # One tombstone, for the one committed partition that was deleted.
    tombstones = [(k.topic, k.partition) for k, v in offset_records(read_all_logs(broker), "od2-sub") if v is None]
    assert tombstones == [("u", 0)]


async def test_OD_2_simple_group_deletes_everything_requested(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    await _commit(client, "od2-simple", {("t", 0): 1, ("t", 1): 2, ("u", 0): 3})
    resp = await g.delete_offsets(client, "od2-simple", {"t": [0, 1]})
    assert (resp.error_code, _partitions(resp)) == (NONE, {("t", 0): NONE, ("t", 1): NONE})
    assert await committed(client, "od2-simple") == {("u", 0): 3}


async def test_OD_2_empty_consumer_group_is_subscribed_to_nothing(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    (m,) = await form_group(raw, "od2-empty", topics=["t"])
    await _commit(client, "od2-empty", {("t", 0): 5}, generation=m.generation, member_id=m.member_id)
    assert (await g.leave(m.client, "od2-empty", [(m.member_id, None)])).error_code == NONE
    await wait_state(client, "od2-empty", "Empty")
    resp = await g.delete_offsets(client, "od2-empty", {"t": [0]})
    assert (resp.error_code, _partitions(resp)) == (NONE, {("t", 0): NONE})
    assert await committed(client, "od2-empty") == {}


async def test_OD_2_unparseable_consumer_subscription_counts_as_every_topic(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    (m,) = await form_group(raw, "od2-garbage", protocols=[("range", b"\x01")])
    await _commit(client, "od2-garbage", {("u", 0): 5}, generation=m.generation, member_id=m.member_id)
    resp = await g.delete_offsets(client, "od2-garbage", {"u": [0], "t": [1]})
    assert (resp.error_code, _partitions(resp)) == (NONE, {("u", 0): GROUP_SUBSCRIBED_TO_TOPIC, ("t", 1): GROUP_SUBSCRIBED_TO_TOPIC})
    assert await committed(client, "od2-garbage") == {("u", 0): 5}


async def test_OD_2_subscription_is_the_union_over_members(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    create_topic(broker, "w", 1)
    # Each member subscribes to its own topic; the group is subscribed to the union.
    members = []
    for i, topic in enumerate(["t", "u"]):
        protocols = [("range", g.subscription([topic]))]
        if i == 0:
            members = await form_group(raw, "od2-union", protocols=protocols, sync=False)
        else:
            break
    assert members
    # Form the two-member group with distinct subscriptions through form_group's rejoin flow.
    await g.leave(members[0].client, "od2-union", [(members[0].member_id, None)])
    await wait_state(client, "od2-union", "Empty")
    group_members = await _two_member_group(raw, client, "od2-union", [["t"], ["u"]])
    m = group_members[0]
    await _commit(client, "od2-union", {("t", 0): 1, ("u", 0): 2, ("w", 0): 3}, generation=m.generation, member_id=m.member_id)
    resp = await g.delete_offsets(client, "od2-union", {"t": [0], "u": [0], "w": [0]})
    assert _partitions(resp) == {("t", 0): GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): GROUP_SUBSCRIBED_TO_TOPIC, ("w", 0): NONE}


async def _two_member_group(raw: Any, observer: Any, group: str, subscriptions: list[list[str]]) -> list[Any]:
    """Two members with different subscriptions, Stable."""
    a, b = await raw("member-a"), await raw("member-b")
    ja = await g.join(a, group, "", protocols=[("range", g.subscription(subscriptions[0]))])
    jb = await g.join(b, group, "", protocols=[("range", g.subscription(subscriptions[1]))])
    fa = a.send(g.join_request(group, ja.member_id, protocols=[("range", g.subscription(subscriptions[0]))]))
    fb = b.send(g.join_request(group, jb.member_id, protocols=[("range", g.subscription(subscriptions[1]))]))
    ra, rb = await fa, await fb
    assert ra.error_code == NONE and rb.error_code == NONE and ra.generation_id == rb.generation_id
    plan = {ra.member_id: g.assignment({"t": [0]}), rb.member_id: g.assignment({"u": [0]})}
    futures = [
        c.send(g.sync_request(group, r.member_id, r.generation_id, assignments=plan if r.member_id == r.leader else None))
        for c, r in ((a, ra), (b, rb))
    ]
    for f in futures:
        assert (await f).error_code == NONE
    await wait_state(observer, group, "Stable")

    class M:
        generation = ra.generation_id
        member_id = ra.member_id

    return [M]


# -- OD-3 ------------------------------------------------------------------------------------------


async def test_OD_3_unknown_topics_and_partitions_fail_per_partition(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    await _commit(client, "od3", {("t", 0): 1, ("t", 1): 2})
    resp = await g.delete_offsets(client, "od3", {"t": [1, 5], "no-such-topic": [0, 1]})
    assert resp.error_code == NONE
    assert _partitions(resp) == {
        ("t", 1): NONE,
        ("t", 5): UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 1): UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert await committed(client, "od3") == {("t", 0): 1}


async def test_OD_3_coordinator_is_consulted_even_with_only_unknown_topics(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    # Unlike OffsetCommit (OC-2) the group is checked: an absent group is a top-level error.
    resp = await g.delete_offsets(client, "od3-absent", {"no-such-topic": [0]})
    assert (resp.error_code, resp.topics) == (GROUP_ID_NOT_FOUND, [])
    # An existing group: only the pre-filter errors.
    await _commit(client, "od3-present", {("t", 0): 1})
    resp = await g.delete_offsets(client, "od3-present", {"no-such-topic": [0]})
    assert (resp.error_code, _partitions(resp)) == (NONE, {("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION})
