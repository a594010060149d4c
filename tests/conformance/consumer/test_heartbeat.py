"""Spec 6.1-6.4: ConsumerGroupHeartbeat (KH-1..KH-16), driven over raw connections."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from broker import Broker
from tests.support.consumer_groups import (
    FENCED_INSTANCE_ID,
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    INVALID_REGULAR_EXPRESSION,
    INVALID_REQUEST,
    NONE,
    UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID,
    UNSUPPORTED_ASSIGNOR,
    CgMember,
    assignment_of,
    converge,
    describe_one,
    heartbeat,
)
from tests.support.waiting import async_wait_until


def topic_id(broker: Broker, name: str) -> uuid.UUID:
    return broker.topics.get(name).topic_id


async def test_kh_1_apis_advertised(broker: Broker, raw: Any) -> None:
    from protocol.apis import request_class

    client = await raw()
    resp = await client.request(request_class(18)(version=3, client_software_name="t", client_software_version="1"), version=3)
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys[68] == (0, 1) and keys[69] == (0, 1)


INVALID = [
    (dict(group="  ", epoch=0, rebalance_timeout_ms=1, topics=["t"], owned={}), "GroupId can't be empty."),
    (dict(instance_id=" ", epoch=0, rebalance_timeout_ms=1, topics=["t"], owned={}), "InstanceId can't be empty."),
    (dict(rack_id="", epoch=0, rebalance_timeout_ms=1, topics=["t"], owned={}), "RackId can't be empty."),
    (dict(epoch=0, topics=["t"], owned={}), "RebalanceTimeoutMs must be provided in first request."),
    (dict(epoch=0, rebalance_timeout_ms=1, topics=["t"]), "TopicPartitions must be empty when (re-)joining."),
    (dict(epoch=0, rebalance_timeout_ms=1, topics=["t"], owned={uuid.uuid4(): [0]}), "TopicPartitions must be empty when (re-)joining."),
    (dict(epoch=-2, member_id="m"), "InstanceId can't be null."),
    (dict(epoch=-3, member_id="m"), "MemberEpoch is invalid."),
]


@pytest.mark.parametrize(("kw", "message"), INVALID)
async def test_kh_2_invalid_requests(raw: Any, kw: dict[str, Any], message: str) -> None:
    client = await raw()
    kw = dict(kw)
    group = kw.pop("group", "g")
    member_id = kw.pop("member_id", "m-1")
    epoch = kw.pop("epoch")
    resp = await heartbeat(client, group, member_id, epoch, **kw)
    assert (resp.error_code, resp.error_message) == (INVALID_REQUEST, message)


async def test_kh_2_member_id_required_from_v1_and_for_positive_epochs(raw: Any) -> None:
    client = await raw()
    resp = await heartbeat(client, "g", "", 0, version=1, rebalance_timeout_ms=1, topics=["t"], owned={})
    assert (resp.error_code, resp.error_message) == (INVALID_REQUEST, "MemberId can't be empty.")
    resp = await heartbeat(client, "g", "", 3, version=0)
    assert (resp.error_code, resp.error_message) == (INVALID_REQUEST, "MemberId can't be empty.")
    # An empty subscription is one (Kafka 4.4 refuses only a join that names neither topics nor a
    # regex); a static leave (epoch -2) needs no member id at v0.
    resp = await heartbeat(client, "g", "", 0, version=0, rebalance_timeout_ms=1, topics=[], owned={})
    assert (resp.error_code, resp.error_message) == (NONE, None)
    resp = await heartbeat(client, "g2", "", 0, version=0, rebalance_timeout_ms=1, owned={})
    assert (resp.error_code, resp.error_message) == (
        INVALID_REQUEST,
        "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
    )
    resp = await heartbeat(client, "g3", "", -2, version=0, instance_id="i")
    assert resp.error_code == GROUP_ID_NOT_FOUND


async def test_kh_2_unsupported_assignor_and_bad_regex(raw: Any) -> None:
    client = await raw()
    resp = await heartbeat(client, "g", "m", 0, rebalance_timeout_ms=1, topics=["t"], owned={}, assignor="sticky")
    assert resp.error_code == UNSUPPORTED_ASSIGNOR
    assert resp.error_message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    resp = await heartbeat(client, "g", "m", 0, rebalance_timeout_ms=1, regex="(", owned={})
    assert resp.error_code == INVALID_REGULAR_EXPRESSION


async def test_kh_3_unknown_group_with_positive_epoch(raw: Any) -> None:
    client = await raw()
    resp = await heartbeat(client, "nope", "m", 3)
    assert resp.error_code == GROUP_ID_NOT_FOUND


async def test_kh_4_group_max_size(broker: Broker, raw: Any) -> None:
    broker.config.group_consumer_max_size = 1
    broker.topics.create("t", 2)
    client = await raw()
    a = CgMember(client, "g", ["t"])
    assert (await a.join()).error_code == NONE
    b = CgMember(client, "g", ["t"])
    assert (await b.join()).error_code == GROUP_MAX_SIZE_REACHED
    assert (await a.beat()).error_code == NONE  # a member already in the group still heartbeats


async def test_kh_5_server_generated_id_v0_and_client_id_v1(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 1)
    client = await raw()
    resp = await heartbeat(client, "g", "", 0, version=0, rebalance_timeout_ms=1000, topics=["t"], owned={})
    assert resp.error_code == NONE
    assert len(resp.member_id) == 22 and "=" not in resp.member_id  # Kafka's Uuid.toString()
    resp = await heartbeat(client, "g", "client-chosen", 0, version=1, rebalance_timeout_ms=1000, topics=["t"], owned={})
    assert (resp.error_code, resp.member_id) == (NONE, "client-chosen")


async def test_kh_6_unknown_member_with_positive_epoch(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 1)
    client = await raw()
    await CgMember(client, "g", ["t"]).join()
    resp = await heartbeat(client, "g", "stranger", 1)
    assert resp.error_code == UNKNOWN_MEMBER_ID


async def test_kh_7_epoch_fencing_and_lost_response_retry(broker: Broker, raw: Any) -> None:
    broker.topics.create("foo", 4)
    client = await raw()
    a = CgMember(client, "g", ["foo"], assignor="range")
    await a.join()
    assert a.epoch == 2  # a new group is at epoch 1 (Kafka 4.4), its first member bumps it
    b = CgMember(client, "g", ["foo"], assignor="range")
    await b.join()
    await converge([a, b])
    e = a.epoch
    foo = topic_id(broker, "foo")
    assert (await heartbeat(client, "g", a.member_id, e + 1)).error_code == FENCED_MEMBER_EPOCH
    # The previous epoch is accepted only with owned partitions that are a subset of the assignment.
    d = await describe_one(client, "g")
    member = next(m for m in d.members if m.member_id == a.member_id)
    previous = e - 1 if e > 1 else 0
    resp = await heartbeat(client, "g", a.member_id, previous)
    assert resp.error_code == FENCED_MEMBER_EPOCH
    assert member.member_epoch == e
    assert foo in a.owned
    # a fenced heartbeat does not remove the member
    assert (await heartbeat(client, "g", a.member_id, e, owned=dict(a.owned))).error_code == NONE


async def test_kh_7_retry_with_previous_epoch_accepted(broker: Broker, raw: Any) -> None:
    """A member whose epoch-bump response was lost retries with its previous epoch and a subset
    of its partitions: accepted, answered with the current epoch."""
    broker.topics.create("foo", 2)
    client = await raw()
    a = CgMember(client, "g", ["foo"])
    resp = await a.join()
    assert resp.member_epoch == 2
    foo = topic_id(broker, "foo")
    # Retried join (epoch 0 again, previous epoch 0 for a member created at epoch 0): accepted.
    retry = await heartbeat(client, "g", a.member_id, 0, rebalance_timeout_ms=1000, topics=["foo"], owned={})
    assert (retry.error_code, retry.member_epoch) == (NONE, 2)
    # Bump to epoch 3 (topic grows), then "lose" the response and retry with epoch 2.
    broker.topics.add_partitions("foo", 3)
    bumped = await heartbeat(client, "g", a.member_id, 2, owned={foo: [0, 1]})
    assert (bumped.error_code, bumped.member_epoch) == (NONE, 3)
    retry = await heartbeat(client, "g", a.member_id, 2, owned={foo: [0]})
    assert (retry.error_code, retry.member_epoch) == (NONE, 3)
    assert (await heartbeat(client, "g", a.member_id, 2, owned={foo: [0, 5]})).error_code == FENCED_MEMBER_EPOCH
    assert (await heartbeat(client, "g", a.member_id, 2)).error_code == FENCED_MEMBER_EPOCH


async def test_kh_8_epoch_bumps_on_subscription_and_topic_changes(broker: Broker, raw: Any) -> None:
    broker.topics.create("foo", 2)
    client = await raw()
    a = CgMember(client, "g", ["foo", "later"])
    await a.join()
    assert (await describe_one(client, "g")).group_epoch == 2
    await a.beat()
    assert (await describe_one(client, "g")).group_epoch == 2  # no change, no bump
    broker.topics.create("later", 1)  # a subscribed topic is created
    await a.beat()
    assert (await describe_one(client, "g")).group_epoch == 3
    broker.topics.add_partitions("foo", 3)  # grows
    await a.beat()
    assert (await describe_one(client, "g")).group_epoch == 4
    broker.topics.delete("later")  # is deleted
    await a.beat()
    d = await describe_one(client, "g")
    assert d.group_epoch == 5
    broker.topics.create("other", 1)  # not subscribed: nothing
    await a.beat()
    assert (await describe_one(client, "g")).group_epoch == 5


async def test_kh_9_kh_11_kh_13_first_join(broker: Broker, raw: Any) -> None:
    broker.topics.create("foo", 6)
    broker.topics.create("bar", 3)
    client = await raw()
    resp = await heartbeat(client, "g", "m-1", 0, rebalance_timeout_ms=5000, topics=["foo", "bar"], assignor="range", owned={})
    assert (resp.error_code, resp.member_epoch, resp.heartbeat_interval_ms) == (NONE, 2, broker.config.group_consumer_heartbeat_interval_ms)
    assert assignment_of(resp) == {topic_id(broker, "foo"): list(range(6)), topic_id(broker, "bar"): list(range(3))}
    d = await describe_one(client, "g")
    assert (d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == ("Stable", 2, 2, "range")
    # KH-11: a heartbeat that is not full and changes nothing carries no assignment
    resp = await heartbeat(client, "g", "m-1", 2, owned={topic_id(broker, "foo"): list(range(6)), topic_id(broker, "bar"): [0, 1, 2]})
    assert resp.assignment is None


@pytest.mark.broker_config(group_consumer_heartbeat_interval_ms=5000)
async def test_kh_11_heartbeat_interval_from_config(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 1)
    client = await raw()
    resp = await CgMember(client, "g", ["t"]).join()
    assert resp.heartbeat_interval_ms == 5000


async def test_kh_13_second_member_waits_for_revocation(broker: Broker, raw: Any) -> None:
    broker.topics.create("foo", 4)
    client = await raw()
    a = CgMember(client, "g", ["foo"], assignor="range", member_id="a")
    b = CgMember(client, "g", ["foo"], assignor="range", member_id="b")
    await a.join()
    resp = await b.join()
    assert (resp.member_epoch, assignment_of(resp)) == (3, {})  # nothing free yet (KR-3)
    d = await describe_one(client, "g")
    assert (d.group_epoch, d.assignment_epoch, d.group_state) == (3, 3, "Reconciling")
    resp = await a.beat()  # told to revoke foo-2, foo-3, at its old epoch
    assert resp.member_epoch == 2 and a.owned == {topic_id(broker, "foo"): [0, 1]}
    resp = await b.beat()
    assert assignment_of(resp) in (None, {})  # still not released: a has not acknowledged
    await a.beat()  # acknowledges
    resp = await b.beat()
    assert assignment_of(resp) == {topic_id(broker, "foo"): [2, 3]}
    await converge([a, b])


async def test_kh_14_leave(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 2)
    client = await raw()
    a = CgMember(client, "g", ["t"])
    await a.join()
    resp = await heartbeat(client, "other", a.member_id, -1)
    assert resp.error_code == GROUP_ID_NOT_FOUND
    resp = await heartbeat(client, "g", "stranger", -1)
    assert resp.error_code == UNKNOWN_MEMBER_ID
    resp = await a.leave()
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (NONE, a.member_id, -1)
    d = await describe_one(client, "g")
    assert (d.group_state, d.group_epoch, d.members) == ("Empty", 3, [])


async def test_kh_15_static_temporary_leave_keeps_assignment(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 4)
    client = await raw()
    a = CgMember(client, "g", ["t"], instance_id="i-a", member_id="a")
    b = CgMember(client, "g", ["t"], instance_id="i-b", member_id="b")
    await a.join()
    await b.join()
    await converge([a, b])
    before = await describe_one(client, "g")
    kept = a.owned
    resp = await heartbeat(client, "g", "a", -2, instance_id="wrong")
    assert resp.error_code == UNKNOWN_MEMBER_ID
    resp = await heartbeat(client, "g", "x", -2, instance_id="i-a")
    assert resp.error_code == FENCED_INSTANCE_ID
    resp = await a.leave(-2)
    assert (resp.error_code, resp.member_epoch) == (NONE, -2)
    d = await describe_one(client, "g")
    assert d.group_epoch == before.group_epoch  # no bump
    # KH-16: a second instance while the first has not left is refused...
    c = CgMember(client, "g", ["t"], instance_id="i-b", member_id="c")
    assert (await c.join()).error_code == UNRELEASED_INSTANCE_ID
    # ...but the released one gets its partitions back at the current epoch, without a bump.
    a2 = CgMember(client, "g", ["t"], instance_id="i-a", member_id="a2")
    resp = await a2.join()
    assert resp.error_code == NONE and a2.owned == kept
    d = await describe_one(client, "g")
    assert d.group_epoch == before.group_epoch
    assert {m.member_id for m in d.members} == {"a2", "b"}


async def test_kh_16_static_member_epoch_checks(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 1)
    client = await raw()
    a = CgMember(client, "g", ["t"], instance_id="i-a", member_id="a")
    await a.join()
    assert (await heartbeat(client, "g", "a", 1, instance_id="i-x")).error_code == UNKNOWN_MEMBER_ID
    assert (await heartbeat(client, "g", "z", 1, instance_id="i-a")).error_code == FENCED_INSTANCE_ID
    assert (await heartbeat(client, "g", "a", 9, instance_id="i-a")).error_code == FENCED_MEMBER_EPOCH


async def test_regex_subscription_resolved_in_the_background(broker: Broker, raw: Any, monkeypatch: Any) -> None:
    """Finding 7 (issue 26): as Kafka 4.x, a heartbeat never resolves an expression. The join is answered at
    once with the partitions of the topics named by the list; the expression's topics come at a later
    heartbeat, after the background resolution bumped the group epoch; a topic created later is picked up
    by the next refresh (Kafka waits at least 10 s between two; shortened here)."""
    from broker.coordinator.consumer import manager

    monkeypatch.setattr(manager, "REGEX_REFRESH_MIN_MS", 200)
    broker.topics.create("orders-1", 2)
    broker.topics.create("payments", 1)
    client = await raw()
    a = CgMember(client, "g", topics=["payments"], regex="orders-.*")
    resp = await a.join()
    assert assignment_of(resp) == {topic_id(broker, "payments"): [0]}  # the list's topic at once, the regex's not yet

    async def has(*topics: str) -> bool:
        await a.beat()
        return set(a.owned) == {topic_id(broker, t) for t in topics}

    await async_wait_until(lambda: has("payments", "orders-1"), timeout=10, message="the regex's topics in a later heartbeat")
    assert a.owned[topic_id(broker, "orders-1")] == [0, 1]
    broker.topics.create("orders-2", 1)
    await async_wait_until(lambda: has("payments", "orders-1", "orders-2"), timeout=10, message="the new topic after a refresh")
    await converge([a])
    d = await describe_one(client, "g")
    assert d.members[0].subscribed_topic_regex == "orders-.*"


@pytest.mark.broker_config(group_coordinator_rebalance_protocols="classic")
async def test_kh_1_without_consumer_in_rebalance_protocols(broker: Broker, raw: Any) -> None:
    """Neither advertised nor served: UNSUPPORTED_VERSION (librdkafka then refuses group.protocol=consumer)."""
    from protocol.apis import request_class
    from tests.support.consumer_groups import describe

    client = await raw()
    resp = await client.request(request_class(18)(version=3, client_software_name="t", client_software_version="1"), version=3)
    assert not {68, 69} & {k.api_key for k in resp.api_keys}
    broker.topics.create("t", 1)
    assert (await CgMember(client, "g", ["t"]).join()).error_code == 35
    assert (await describe(client, "g")).groups[0].error_code == 35


@pytest.mark.broker_config(group_consumer_min_session_timeout_ms=100, group_consumer_min_heartbeat_interval_ms=10)
async def test_kh_11_kh_12_group_configs_override_the_broker_defaults(broker: Broker, raw: Any) -> None:
    """`consumer.heartbeat.interval.ms` and `consumer.session.timeout.ms` set on the GROUP resource
    (IncrementalAlterConfigs) replace the broker's group.consumer.* defaults for that group."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest

    from tests.support.waiting import async_wait_until

    broker.topics.create("t", 1)
    client = await raw()
    r = IncrementalAlterConfigsRequest.AlterConfigsResource
    req = IncrementalAlterConfigsRequest[1](
        resources=[
            r(
                resource_type=32,  # GROUP
                resource_name="g",
                configs=[
                    r.AlterableConfig(name="consumer.heartbeat.interval.ms", config_operation=0, value="40"),
                    r.AlterableConfig(name="consumer.session.timeout.ms", config_operation=0, value="300"),
                ],
            )
        ],
        validate_only=False,
    )
    resp = await client.request(req)
    assert [x.error_code for x in resp.responses] == [NONE], resp
    a = CgMember(client, "g", ["t"], member_id="a")
    assert (await a.join()).heartbeat_interval_ms == 40
    other = CgMember(client, "other", ["t"])
    assert (await other.join()).heartbeat_interval_ms == broker.config.group_consumer_heartbeat_interval_ms

    async def expired() -> bool:
        return (await describe_one(client, "g")).members == []

    await async_wait_until(expired, timeout=10, message="the group's 300 ms session to expire")
    await other.beat()
    assert [m.member_id for m in (await describe_one(client, "other")).members] == [other.member_id]  # 45 s session
