"""KIP-1071 streams groups on one in-process broker, the rules the differential scenarios
(tests/differential/streams/) cannot pin on Kafka 4.4 at its test settings: gating (KS-1), the v0
wire (KS-2), group size (KS-5), internal topics created with their configs (KS-13), the initial
rebalance delay and the assignment interval (KS-15), standby placement (KS-16), no warm-ups
(KS-17), endpoints (KS-19) and group configs applied to a group (KS-25)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka.protocol.admin import IncrementalAlterConfigsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from broker import Broker
from tests.support.streams_groups import (
    ASSIGNMENT_DELAYED,
    GROUP_MAX_SIZE_REACHED,
    MISSING_INTERNAL_TOPICS,
    NONE,
    UNSUPPORTED_VERSION,
    R,
    StreamsMember,
    converge,
    describe,
    describe_one,
    heartbeat,
    statuses,
    subtopology,
    topic_info,
    topology,
    word_count,
)


def word_count_input(broker: Broker, partitions: int = 4) -> None:
    broker.topics.create("p-input", partitions)


async def test_ks_1_streams_apis_are_advertised_and_served(broker: Broker, raw: Any) -> None:
    client = await raw()
    resp = await client.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    served = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert served[88] == (0, 1) and served[89] == (0, 1)
    assert 93 not in served  # StreamsGroupTopologyDescriptionUpdate: no topology description plugin


@pytest.mark.broker_config(group_coordinator_rebalance_protocols="classic,consumer")
async def test_ks_1_without_streams_in_the_rebalance_protocols_the_apis_are_unsupported(broker: Broker, raw: Any) -> None:
    client = await raw()
    resp = await client.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    assert not {88, 89} & {k.api_key for k in resp.api_keys}
    hb = await heartbeat(client, "g", "m", 0, topology=word_count("p", "app"))
    assert (hb.error_code, hb.error_message) == (UNSUPPORTED_VERSION, None)
    assert [g.error_code for g in (await describe(client, "g")).groups] == [UNSUPPORTED_VERSION]


async def test_ks_2_v0_answers_with_the_legacy_recovery_lag_and_v1_with_the_long(broker: Broker, raw: Any) -> None:
    word_count_input(broker)
    client = await raw()
    v0 = await heartbeat(client, "g0", "m", 0, topology=word_count("p", "app0"), version=0)
    assert v0.error_code == NONE and v0.acceptable_recovery_lag_legacy == 10_000
    v1 = await heartbeat(client, "g1", "m", 0, topology=word_count("p", "app1"))
    assert v1.error_code == NONE and v1.acceptable_recovery_lag == 10_000 and v1.topology_description_required is False


@pytest.mark.broker_config(group_streams_max_size=1)
async def test_ks_5_group_max_size(broker: Broker, raw: Any) -> None:
    word_count_input(broker)
    client = await raw()
    assert (await heartbeat(client, "g", "a", 0, topology=word_count("p", "app"))).error_code == NONE
    full = await heartbeat(client, "g", "b", 0, topology=word_count("p", "app"))
    assert (full.error_code, full.error_message) == (
        GROUP_MAX_SIZE_REACHED,
        "The streams group has reached its maximum capacity of 1 members.",
    )


async def test_ks_13_internal_topics_are_created_with_the_topologys_configs(broker: Broker, raw: Any) -> None:
    word_count_input(broker, partitions=3)
    client = await raw()
    m = StreamsMember(client, "g", "m", word_count("p", "app"))
    first = await m.beat()
    assert statuses(first) == [(MISSING_INTERNAL_TOPICS, "Internal topics are missing: app-counts-repartition, app-counts-changelog")]
    changelog, repartition = broker.topics.get("app-counts-changelog"), broker.topics.get("app-counts-repartition")
    assert changelog is not None and repartition is not None  # created before the answer (docs/decisions.md)
    assert changelog.partitions == repartition.partitions == 3
    assert changelog.configs.get("cleanup.policy") == "compact"
    assert repartition.configs.get("cleanup.policy") == "delete" and repartition.configs.get("segment.bytes") == "52428800"
    await m.beat()
    assert m.last.status == [] and m.active == {"0": [0, 1, 2], "1": [0, 1, 2]}


async def test_ks_13_an_internal_topic_that_cannot_be_created_is_named_in_the_status(broker: Broker, raw: Any) -> None:
    word_count_input(broker)
    client = await raw()
    bad = topology(subtopology("0", ["p-input"], changelogs=[topic_info("app-store-changelog", configs={"cleanup.policy": "bogus"})]))
    resp = await heartbeat(client, "g", "m", 0, topology=bad)
    assert resp.error_code == NONE
    [(code, detail)] = statuses(resp)
    assert code == MISSING_INTERNAL_TOPICS
    assert detail.startswith("Internal topics are missing: app-store-changelog; Creation failed: app-store-changelog (")
    assert "cleanup.policy" in detail and broker.topics.get("app-store-changelog") is None
    assert resp.active_tasks == [] and (await describe_one(client, "g")).group_state == "NotReady"


@pytest.mark.broker_config(group_streams_initial_rebalance_delay_ms=400)
async def test_ks_15_the_initial_rebalance_delay_holds_the_first_assignment(broker: Broker, raw: Any) -> None:
    for name in ("p-input", "app-counts-repartition", "app-counts-changelog"):
        broker.topics.create(name, 2)
    client = await raw()
    m = StreamsMember(client, "g", "m", word_count("p", "app"))
    first = await m.beat()
    assert statuses(first) == [(ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay.")]
    assert m.active == {}
    await asyncio.sleep(0.6)
    await m.beat()
    assert m.active == {"0": [0, 1], "1": [0, 1]} and m.last.status == []


@pytest.mark.broker_config(group_streams_assignment_interval_ms=400)
async def test_ks_15_the_assignment_interval_batches_target_assignments(broker: Broker, raw: Any) -> None:
    for name in ("p-input", "app-counts-repartition", "app-counts-changelog"):
        broker.topics.create(name, 2)
    client = await raw()
    a = StreamsMember(client, "g", "a", word_count("p", "app"))
    await a.beat()
    assert a.active == {"0": [0, 1], "1": [0, 1]}  # the group's first assignment is not held
    b = StreamsMember(client, "g", "b", word_count("p", "app"), process_id="process-b")
    joined = await b.beat()
    assert statuses(joined) == [(ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment interval.")]
    await asyncio.sleep(0.6)
    d = await converge([a, b], client)
    assert d.group_state == "Stable" and sorted(len(x) for m in (a, b) for x in m.active.values()) == [1, 1, 1, 1]


@pytest.mark.broker_config(group_streams_num_standby_replicas=1)
async def test_ks_16_standbys_go_to_other_processes_and_ks_17_no_warmups(broker: Broker, raw: Any) -> None:
    for name in ("p-input", "app-counts-repartition", "app-counts-changelog"):
        broker.topics.create(name, 4)
    client = await raw()
    members = [StreamsMember(client, "g", f"m{i}", word_count("p", "app"), process_id=f"process-{i % 2}") for i in range(4)]
    await converge(members, client)
    active = {(s, p): m.process_id for m in members for s, ps in m.active.items() for p in ps}
    standby = {(s, p): m.process_id for m in members for s, ps in m.standby.items() for p in ps}
    assert len(active) == 8 and set(standby) == {("1", p) for p in range(4)}  # only the stateful sub-topology
    assert all(standby[t] != active[t] for t in standby)
    assert all(m.warmup == {} for m in members)


async def test_ks_19_endpoints_are_sent_when_the_member_is_behind(broker: Broker, raw: Any) -> None:
    for name in ("p-input", "app-counts-repartition", "app-counts-changelog"):
        broker.topics.create(name, 2)
    client = await raw()
    a = StreamsMember(client, "g", "a", word_count("p", "app"))
    resp = await a.beat(user_endpoint=R.Endpoint(host="a.local", port=1), endpoint_information_epoch=-1)
    [entry] = resp.partitions_by_user_endpoint
    assert (entry.user_endpoint.host, entry.user_endpoint.port) == ("a.local", 1)
    assert sorted((tp.topic, tuple(tp.partitions)) for tp in entry.active_partitions) == [
        ("app-counts-repartition", (0, 1)),
        ("p-input", (0, 1)),
    ]
    again = await a.beat(endpoint_information_epoch=resp.endpoint_information_epoch)
    assert again.partitions_by_user_endpoint is None  # up to date: nothing sent
    b = StreamsMember(client, "g", "b", word_count("p", "app"), process_id="process-b")
    await b.beat(user_endpoint=R.Endpoint(host="b.local", port=2))
    behind = await a.beat(endpoint_information_epoch=again.endpoint_information_epoch)
    assert behind.endpoint_information_epoch > again.endpoint_information_epoch
    assert sorted(e.user_endpoint.host for e in behind.partitions_by_user_endpoint) == ["a.local", "b.local"]


async def test_ks_25_group_configs_set_a_groups_session_heartbeat_and_standbys(broker: Broker, raw: Any) -> None:
    for name in ("p-input", "app-counts-repartition", "app-counts-changelog"):
        broker.topics.create(name, 2)
    client = await raw()
    r = IncrementalAlterConfigsRequest.AlterConfigsResource
    configs = {"streams.heartbeat.interval.ms": "300", "streams.num.standby.replicas": "1", "streams.session.timeout.ms": "50000"}
    req = IncrementalAlterConfigsRequest[1](
        resources=[
            r(
                resource_type=32,
                resource_name="g",
                configs=[r.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()],
            )
        ],
        validate_only=False,
    )
    assert [x.error_code for x in (await client.request(req)).responses] == [NONE]
    a = StreamsMember(client, "g", "a", word_count("p", "app"), process_id="pa")
    b = StreamsMember(client, "g", "b", word_count("p", "app"), process_id="pb")
    assert (await a.beat()).heartbeat_interval_ms == 300
    await converge([a, b], client)
    assert {**a.standby, **b.standby} != {}
    other = await heartbeat(client, "other", "x", 0, topology=word_count("p", "app"))
    assert other.heartbeat_interval_ms == broker.config.group_streams_heartbeat_interval_ms
    assert broker.coordinator.shard_for("g").streams.session_timeout_ms("g") == 50_000
