"""ShareGroupHeartbeat and ShareGroupDescribe (KIP-932), rules QH and QD of docs/coordinator-rules.md,
over the raw protocol against one in-process broker. tests/differential/test_reference_share_groups.py
sends the same requests to Kafka 4.4 and compares every answer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from broker import Broker
from broker.share.coordinator.service import SHARE_STATE_TOPIC, coordinator_key
from protocol.errors import ErrorCode
from tests.support import groups as g
from tests.support import share as s
from tests.support.coordinator import wait_ready
from tests.support.raw_client import RawClient
from tests.support.waiting import async_wait_until

SHARE_APIS = {76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}


async def _advertised(client: RawClient) -> set[int]:
    resp = await client.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    return {k.api_key for k in resp.api_keys}


async def test_qh_1_share_apis_are_served_by_default(client: RawClient) -> None:
    assert SHARE_APIS <= await _advertised(client)


@pytest.mark.broker_config(group_coordinator_rebalance_protocols="classic,consumer")
async def test_qh_1_without_share_in_the_protocols_the_apis_are_neither_advertised_nor_served(client: RawClient) -> None:
    assert not SHARE_APIS & await _advertised(client)
    resp = await client.request(s.heartbeat_request("g", s.new_member_id(), 0, ["t"]))
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    fetch = await client.request(s.fetch_request("g", s.new_member_id(), 0))
    assert fetch.error_code == ErrorCode.UNSUPPORTED_VERSION


async def test_qh_2_request_validation_in_kafkas_words(client: RawClient) -> None:
    await s.create_topic(client, "t")
    member = s.new_member_id()
    cases = [
        (s.heartbeat_request(" ", member, 0, ["t"]), ErrorCode.INVALID_REQUEST, "GroupId can't be empty."),
        (s.heartbeat_request("g", member, 0, None), ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."),
        (s.heartbeat_request("g", " ", 0, ["t"]), ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
        (s.heartbeat_request("g", "", 0, ["t"]), ErrorCode.INVALID_REQUEST, None),
        (s.heartbeat_request("g", "x" * 37, 0, ["t"]), ErrorCode.INVALID_REQUEST, None),
        (s.heartbeat_request("g", member, -2, ["t"]), ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."),
        (s.heartbeat_request("g", member, 0, ["t"], rack=""), ErrorCode.INVALID_REQUEST, "RackId can't be empty."),
    ]
    for request, code, message in cases:
        resp = await client.request(request)
        assert (resp.error_code, resp.error_message, resp.member_id) == (code, message, None), request
    # nothing of these was created
    assert (await s.describe(client, "g")).groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


async def test_qh_3_join_then_partitions_once_initialized(client: RawClient, broker: Broker) -> None:
    topic_id = await s.create_topic(client, "t", partitions=2)
    m = s.ShareMember(client, "g")
    first = await m.heartbeat(["t"])
    assert first.error_code == 0 and first.member_id == m.member_id and first.heartbeat_interval_ms == 250
    assert first.assignment is not None and first.assignment.topic_partitions == []  # not initialized yet
    await m.join(["t"], partitions=2)
    assert m.assignment == {topic_id: [0, 1]}
    (described,) = (await s.describe(client, "g")).groups
    assert (described.error_code, described.group_state, described.assignor_name) == (0, "Stable", "simple")
    assert described.group_epoch == described.assignment_epoch == m.epoch
    (member,) = described.members
    assert (member.member_id, member.member_epoch, member.client_id, member.subscribed_topic_names) == (
        m.member_id,
        m.epoch,
        "raw-client",
        ["t"],
    )
    assert [(t.topic_id, t.topic_name, t.partitions) for t in member.assignment.topic_partitions] == [(topic_id, "t", [0, 1])]
    # a steady heartbeat carries no assignment
    again = await m.heartbeat()
    assert again.error_code == 0 and again.assignment is None and again.member_epoch == m.epoch


async def test_qh_3_a_partly_failed_initialization_is_retried_whole(client: RawClient, broker: Broker) -> None:
    """One partition's share-state initialization fails (a disk error on its __share_group_state
    partition) while the others succeed: the whole request is uninitialized, as Kafka's
    persisterInitialize does, so the next heartbeats initialize and assign every partition (not
    only the failed one, leaving the rest "initializing" until the retry interval)."""
    topic_id = await s.create_topic(client, "t", partitions=3)
    state = broker.share_coordinator.partition_for(coordinator_key("g", topic_id, 1))
    rule = broker.faults.fail_appends(SHARE_STATE_TOPIC, partition=state, count=1)
    m = s.ShareMember(client, "g")
    await m.join(["t"], partitions=3, timeout=4.0)  # well within the 5 s least retry interval
    assert rule.hits == 1 and m.assignment == {topic_id: [0, 1, 2]}


async def test_qh_3_heartbeat_interval_follows_the_group_config(client: RawClient) -> None:
    await s.create_topic(client, "t")
    await s.set_group_configs(client, "g", {"share.heartbeat.interval.ms": "1000"})
    resp = await s.ShareMember(client, "g").heartbeat(["t"])
    assert resp.heartbeat_interval_ms == 1000


async def test_qh_4_epochs_members_and_groups_are_checked(client: RawClient, raw: Callable[..., Any]) -> None:
    await s.create_topic(client, "t")
    m = s.ShareMember(client, "g")
    await m.join(["t"])
    resp = await client.request(s.heartbeat_request("g", m.member_id, m.epoch + 5))
    assert resp.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert resp.error_message.startswith(f"The share group member has a greater member epoch ({m.epoch + 5})")
    resp = await client.request(s.heartbeat_request("g", "other", 3))
    assert (resp.error_code, resp.error_message) == (ErrorCode.UNKNOWN_MEMBER_ID, "Member other is not a member of group g.")
    resp = await client.request(s.heartbeat_request("nogroup", "m", 1))
    assert (resp.error_code, resp.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Share group nogroup not found.")
    resp = await client.request(s.heartbeat_request("nogroup", "m", -1))
    assert (resp.error_code, resp.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nogroup not found.")
    # the previous epoch is still accepted (a lost answer), an older one is not
    first = m.epoch
    other = s.ShareMember(await raw(), "g")
    await other.join(["t"], partitions=1)  # bumps the group epoch; m moves on at its next heartbeat
    await async_wait_until(lambda: _moved(m, first), message="member epoch moves on")
    assert (await client.request(s.heartbeat_request("g", m.member_id, first))).error_code == 0
    older = await client.request(s.heartbeat_request("g", m.member_id, first - 1))
    assert older.error_code == ErrorCode.FENCED_MEMBER_EPOCH


async def _moved(m: s.ShareMember, epoch: int) -> bool:
    await m.heartbeat()
    return m.epoch > epoch


async def test_qh_5_leaving_removes_the_member(client: RawClient) -> None:
    await s.create_topic(client, "t")
    m = s.ShareMember(client, "g")
    await m.join(["t"])
    epoch = (await s.describe(client, "g")).groups[0].group_epoch
    resp = await m.leave()
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (0, m.member_id, -1)
    (described,) = (await s.describe(client, "g")).groups
    assert (described.group_state, described.members, described.group_epoch) == ("Empty", [], epoch + 1)


async def test_qh_6_a_silent_member_is_removed_after_its_session_timeout(client: RawClient) -> None:
    await s.create_topic(client, "t")
    await s.set_group_configs(client, "g", {"share.session.timeout.ms": "6000"})
    m = s.ShareMember(client, "g")
    await m.join(["t"])
    started = time.monotonic()

    async def gone() -> bool:
        return (await s.describe(client, "g")).groups[0].members == []

    await async_wait_until(gone, timeout=15, interval=0.2, message="the member is fenced")
    assert time.monotonic() - started >= 5.5  # not before its session ran out
    resp = await m.heartbeat()
    assert resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_qh_7_simple_assignor_shares_partitions_between_more_members(client: RawClient, raw: Callable[..., Any]) -> None:
    one = await s.create_topic(client, "one")
    three = await s.create_topic(client, "three", partitions=3)
    members = [s.ShareMember(await raw(), "g") for _ in range(4)]
    for m in members:
        await m.heartbeat(["one", "three"])

    async def settled() -> bool:
        for m in members:
            assert (await m.heartbeat()).error_code == 0
        parts = [{(t, p) for t, ps in m.assignment.items() for p in ps} for m in members]
        return all(parts) and set().union(*parts) == {(one, 0)} | {(three, p) for p in range(3)} and len({m.epoch for m in members}) == 1

    await async_wait_until(settled, interval=0.05, message="every partition assigned to someone")
    for m in members:
        # homogeneous: each member gets at least one partition; 4 partitions over 4 members, one each
        assert sum(len(ps) for ps in m.assignment.values()) == 1


@pytest.mark.broker_config(group_share_max_size=2)
async def test_qh_8_group_max_size(client: RawClient, raw: Callable[..., Any]) -> None:
    await s.create_topic(client, "t")
    for _ in range(2):
        assert (await s.ShareMember(await raw(), "g").heartbeat(["t"])).error_code == 0
    resp = await s.ShareMember(await raw(), "g").heartbeat(["t"])
    assert (resp.error_code, resp.error_message) == (
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        "The share group has reached its maximum capacity of 2 members.",
    )


async def test_qh_9_group_ids_of_other_types(client: RawClient) -> None:
    await s.create_topic(client, "t")
    await g.commit(client, "classic", {("t", 0): 1})
    resp = await s.ShareMember(client, "classic").heartbeat(["t"])
    assert (resp.error_code, resp.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group classic is not a share group.")
    (described,) = (await s.describe(client, "classic")).groups
    assert (described.error_code, described.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group classic is not a share group.")

    m = s.ShareMember(client, "sg")
    await m.join(["t"])
    joined = await g.join(client, "sg")
    assert (joined.error_code, joined.member_id) == (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
    commit = await client.request(g.commit_request("sg", {("t", 0): 1}))
    assert commit.topics[0].partitions[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    fetched = await g.fetch(client, "sg", None)
    assert (fetched.groups[0].error_code, fetched.groups[0].topics) == (0, [])  # a share group has no committed offsets
    deleted = await g.delete_offsets(client, "sg", {"t": [0]})
    assert deleted.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    described = await g.describe(client, ["sg"], version=6)
    assert (described.groups[0].error_code, described.groups[0].error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group sg is not a classic group.",
    )


async def test_qh_10_topics_created_after_subscribing_are_assigned(client: RawClient) -> None:
    m = s.ShareMember(client, "g")
    resp = await m.heartbeat(["later"])
    assert resp.error_code == 0 and m.assignment == {}
    topic_id = await s.create_topic(client, "later", partitions=2)
    await m.join(["later"], partitions=2)
    assert m.assignment == {topic_id: [0, 1]}


async def test_qd_1_describe_unknown_blank_and_several_groups(client: RawClient) -> None:
    await s.create_topic(client, "t")
    await s.ShareMember(client, "g").join(["t"])
    resp = await s.describe(client, "g", "nope", "", include_ops=True)
    answers = {x.group_id: (x.error_code, x.error_message) for x in resp.groups}
    assert answers == {
        "g": (0, None),
        "nope": (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found."),
        "": (ErrorCode.INVALID_GROUP_ID, None),
    }
    (found,) = [x for x in resp.groups if x.group_id == "g"]
    assert found.authorized_operations == 3400  # READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS


async def test_qh_3_the_group_survives_a_restart(make_config: Callable[..., Any]) -> None:
    config = make_config(**s.SHARE_BOUNDS)
    async with Broker(config) as broker:
        client = await RawClient.connect(broker.bootstrap)
        await wait_ready(client)
        topic_id = await s.create_topic(client, "t", partitions=2)
        m = s.ShareMember(client, "g")
        await m.join(["t"], partitions=2)
        before = (await s.describe(client, "g")).groups[0]
        await client.close()
    async with Broker(config) as broker:
        client = await RawClient.connect(broker.bootstrap)
        await wait_ready(client)
        after = (await s.describe(client, "g")).groups[0]
        assert (after.group_epoch, after.assignment_epoch, [x.member_id for x in after.members]) == (
            before.group_epoch,
            before.assignment_epoch,
            [m.member_id],
        )
        m.client = client
        resp = await m.heartbeat()
        assert resp.error_code == 0 and m.assignment == {topic_id: [0, 1]}
        await client.close()
