"""A cluster that looks like one (broker/cluster/): replication factors up to N, manual
assignments over every node, racks, ISRs that shrink when a node is taken down and grow when it
returns, leaders elected among in-sync replicas, offline partitions, min.insync.replicas,
KIP-951's leader discovery, follower fetching and the rack-aware replica selector. Raw requests
over real sockets to real nodes; Kafka's behaviour for each is named where it is asserted."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeTopicPartitionsRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from broker.cluster.cluster import OFFSETS_TOPIC, Cluster
from broker.config import Config
from protocol.errors import ErrorCode
from tests.support import data as d
from tests.support.raw_client import RawClient
from tests.support.waiting import async_wait_until

_Topic = CreateTopicsRequest.CreatableTopic
_Assign = _Topic.CreatableReplicaAssignment
_Config = _Topic.CreatableTopicConfig
RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c"}


def config(tmp_path: Path, **overrides: Any) -> Config:
    values: dict[str, Any] = {
        "port": 0,
        "data_dir": str(tmp_path / "data"),
        "metrics": False,
        "offsets_partitions": 6,
        "transaction_state_partitions": 3,
        "broker_rack": "rack-a,rack-b,rack-c",
    }
    values.update(overrides)
    return Config(**values)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(config(tmp_path), brokers=3) as c:
        yield c


@pytest.fixture
async def clients(cluster: Cluster) -> AsyncIterator[Callable[[int], Any]]:
    opened: dict[int, RawClient] = {}

    async def to(node: int) -> RawClient:
        if node not in opened:
            opened[node] = await RawClient.connect(cluster.node(node).bootstrap)
        return opened[node]

    yield to
    for client in opened.values():
        await client.close()


def new_topic(name: str, partitions: int = 1, rf: int = 1, assignments: dict[int, list[int]] | None = None, **configs: str) -> Any:
    return _Topic(
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=[_Assign(partition_index=p, broker_ids=b) for p, b in (assignments or {}).items()],
        configs=[_Config(name=k.replace("_", "."), value=v) for k, v in configs.items()],
    )


async def create(client: RawClient, *topics: Any) -> dict[str, Any]:
    resp = await client.request(CreateTopicsRequest[7](topics=list(topics), timeout_ms=5000, validate_only=False))
    return {t.name: t for t in resp.topics}


async def metadata(client: RawClient, *names: str) -> Any:
    wanted = [MetadataRequest[12].MetadataRequestTopic(topic_id=None, name=n) for n in names] if names else None
    return await client.request(
        MetadataRequest[12](topics=wanted, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    )


def partitions_of(answer: Any, name: str) -> dict[int, Any]:
    (found,) = [t for t in answer.topics if t.name == name]
    return {p.partition_index: p for p in found.partitions}


# -- placement -------------------------------------------------------------------------------------


async def test_replication_factor_up_to_the_number_of_brokers(cluster: Cluster, clients: Any) -> None:
    client = await clients(1)
    results = await create(client, new_topic("three", 6, 3), new_topic("four", 1, 4), new_topic("default", 2, -1))
    assert (results["three"].error_code, results["three"].replication_factor, results["three"].num_partitions) == (0, 3, 6)
    assert results["default"].replication_factor == 1  # default.replication.factor, Kafka's 1
    assert results["four"].error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert results["four"].error_message == (
        "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached because only 3 "
        "broker(s) are registered or some brokers have all their log directories cordoned."
    )
    answer = await metadata(client, "three")
    assert [(b.node_id, b.rack) for b in answer.brokers] == [(1, "rack-a"), (2, "rack-b"), (3, "rack-c")]
    parts = partitions_of(answer, "three")
    for p in parts.values():
        assert sorted(p.replica_nodes) == [1, 2, 3] and p.isr_nodes == p.replica_nodes and p.offline_replicas == []
        assert p.leader_id == p.replica_nodes[0] and p.leader_epoch == 0 and p.error_code == 0
    assert sorted(p.leader_id for p in parts.values()) == [1, 1, 2, 2, 3, 3]  # Kafka's striped placement: leaders spread
    assert {len(p.replica_nodes) for p in partitions_of(await metadata(client, OFFSETS_TOPIC), OFFSETS_TOPIC).values()} == {3}
    assert cluster.racks_of("three", 0) == frozenset(RACKS.values())
    assert cluster.state.topics.racks_of("default", 1) in ({"rack-a"}, {"rack-b"}, {"rack-c"})
    assert cluster.state.topics.racks_of("nope", 0) == frozenset() and cluster.state.topics.racks_of("three", 6) == frozenset()


async def test_manual_assignments_over_every_node(cluster: Cluster, clients: Any) -> None:
    client = await clients(2)
    results = await create(
        client,
        new_topic("manual", -1, -1, {0: [3, 1], 1: [2, 3], 2: [1, 2]}),
        new_topic("unknown", -1, -1, {0: [1, 4]}),
        new_topic("twice", -1, -1, {0: [2, 2]}),
        new_topic("uneven", -1, -1, {0: [1, 2], 1: [3]}),
        new_topic("gap", -1, -1, {0: [1], 2: [2]}),
    )
    assert (results["manual"].error_code, results["manual"].num_partitions, results["manual"].replication_factor) == (0, 3, 2)
    assert (results["unknown"].error_code, results["unknown"].error_message) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes broker 4, but no such broker is registered.",
    )
    assert results["twice"].error_message == "The manual partition assignment includes the broker 2 more than once."
    assert results["uneven"].error_message == (
        "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous "
        "partitions, which have 2 replica(s)."
    )
    assert results["gap"].error_message == "partitions should be a consecutive 0-based integer sequence"
    parts = partitions_of(await metadata(client, "manual"), "manual")
    assert [(p.replica_nodes, p.leader_id) for _, p in sorted(parts.items())] == [([3, 1], 3), ([2, 3], 2), ([1, 2], 1)]
    assert cluster.racks_of("manual", 0) == {"rack-c", "rack-a"}
    stored = cluster.state.topics.get("manual")
    assert stored is not None and stored.replicas == [[3, 1], [2, 3], [1, 2]]


async def test_create_partitions_keeps_the_replication_factor(cluster: Cluster, clients: Any) -> None:
    client = await clients(1)
    assert (await create(client, new_topic("grow", 1, 2)))["grow"].error_code == 0
    _P = CreatePartitionsRequest.CreatePartitionsTopic
    _A = _P.CreatePartitionsAssignment

    async def grow(count: int, assignments: list[list[int]] | None = None) -> Any:
        topic = _P(name="grow", count=count, assignments=None if assignments is None else [_A(broker_ids=a) for a in assignments])
        resp = await client.request(CreatePartitionsRequest[3](topics=[topic], timeout_ms=5000, validate_only=False))
        return resp.results[0]

    assert (await grow(3)).error_code == 0
    refused = await grow(4, [[1, 2, 3]])
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes a partition with 3 replica(s), but this is not consistent with previous "
        "partitions, which have 2 replica(s).",
    )
    assert (await grow(4, [[3, 9]])).error_message == "The manual partition assignment includes broker 9, but no such broker is registered."
    assert (await grow(4, [[3, 2]])).error_code == 0
    parts = partitions_of(await metadata(client, "grow"), "grow")
    assert [len(p.replica_nodes) for _, p in sorted(parts.items())] == [2, 2, 2, 2]
    assert parts[3].replica_nodes == [3, 2]


async def test_assignments_survive_a_restart(tmp_path: Path) -> None:
    async with Cluster(config(tmp_path), brokers=3) as c:
        client = await RawClient.connect(c.bootstrap.split(",")[0])
        await create(client, new_topic("kept", -1, -1, {0: [2, 3], 1: [3, 1]}))
        await client.close()
    async with Cluster(config(tmp_path), brokers=3) as c:
        client = await RawClient.connect(c.bootstrap.split(",")[0])
        parts = partitions_of(await metadata(client, "kept"), "kept")
        await client.close()
    assert [p.replica_nodes for _, p in sorted(parts.items())] == [[2, 3], [3, 1]]


# -- nodes going down and coming back ------------------------------------------------------------


async def test_a_node_taken_down_leaves_the_isr_and_its_leaderships_move(cluster: Cluster, clients: Any) -> None:
    client = await clients(1)
    await create(client, new_topic("ha", -1, -1, {0: [2, 3, 1], 1: [3, 2, 1]}))
    cluster.node(2).chaos.down()
    answer = await metadata(client, "ha")
    assert [b.node_id for b in answer.brokers] == [1, 3]  # a fenced broker is not listed (getAliveBrokerNodes)
    parts = partitions_of(answer, "ha")
    # p0: its leader went down; the next in-sync replica in replica order leads, at the next epoch.
    assert (parts[0].leader_id, parts[0].leader_epoch, parts[0].isr_nodes, parts[0].offline_replicas) == (3, 1, [3, 1], [2])
    assert parts[0].replica_nodes == [2, 3, 1] and parts[0].error_code == 0
    # p1: a follower went down: the ISR shrinks, the leader and its epoch stay (no bump since metadata version 3.6).
    assert (parts[1].leader_id, parts[1].leader_epoch, parts[1].isr_nodes, parts[1].offline_replicas) == (3, 0, [3, 1], [2])
    produced = d.produce_result(await (await clients(3)).request(d.produce("ha", 0, d.batch())))
    assert produced.error_code == 0
    await cluster.node(2).chaos.up()
    parts = partitions_of(await metadata(client, "ha"), "ha")
    assert [b.node_id for b in (await metadata(client)).brokers] == [1, 2, 3]
    # Back in the ISR at once (it shares the log); leaderships stay until leaders are balanced.
    assert (parts[0].leader_id, parts[0].leader_epoch, parts[0].isr_nodes, parts[0].offline_replicas) == (3, 1, [3, 1, 2], [])
    assert (parts[1].leader_id, parts[1].leader_epoch, parts[1].isr_nodes) == (3, 0, [3, 1, 2])
    # Kafka's periodic leader balancing (auto.leader.rebalance.enable) gives the preferred replica back its partition.
    changes = cluster.elect_preferred_leaders()
    assert [(c.topic, c.partition, c.leader, c.leader_epoch) for c in changes if c.topic == "ha"] == [("ha", 0, 2, 2)]
    assert cluster.leader("ha", 0) == 2 and cluster.epoch_history("ha", 0) == [(0, 0), (1, 0), (2, 1)]


async def test_a_partition_is_offline_while_every_replica_is_down(cluster: Cluster, clients: Any) -> None:
    client = await clients(1)
    await create(client, new_topic("lonely", -1, -1, {0: [3]}))
    assert d.produce_result(await (await clients(3)).request(d.produce("lonely", 0, d.batch()))).error_code == 0
    cluster.node(3).chaos.down()
    (p,) = partitions_of(await metadata(client, "lonely"), "lonely").values()
    # KRaftMetadataCache: leader -1, LEADER_NOT_AVAILABLE; with ELR (Kafka 4.1+) the ISR is empty, the
    # last replica eligible.
    assert (p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas) == (
        ErrorCode.LEADER_NOT_AVAILABLE,
        -1,
        1,
        [3],
        [],
        [3],
    )
    state = cluster.partition("lonely", 0)
    assert state is not None and (state.elr, state.last_known_elr) == ([3], [3])
    assert d.produce_result(await client.request(d.produce("lonely", 0, d.batch()))).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    await cluster.node(3).chaos.up()
    (p,) = partitions_of(await metadata(client, "lonely"), "lonely").values()
    assert (p.error_code, p.leader_id, p.leader_epoch, p.isr_nodes) == (0, 3, 2, [3])
    again = await RawClient.connect(cluster.node(3).bootstrap)  # its connections closed when it went down
    fetched = await again.request(d.fetch([("lonely", 0, 0)]))
    await again.close()
    assert d.fetched_offsets(fetched.responses[0].partitions[0]) == [0]  # nothing acknowledged was lost


async def test_min_insync_replicas_refuses_acks_all(cluster: Cluster, clients: Any) -> None:
    client = await clients(1)
    await create(client, new_topic("strict", -1, -1, {0: [1, 2, 3]}, min_insync_replicas="2"))
    cluster.node(2).chaos.down()
    assert d.produce_result(await client.request(d.produce("strict", 0, d.batch()))).error_code == 0  # ISR [1, 3]: enough
    cluster.node(3).chaos.down()
    refused = d.produce_result(await client.request(d.produce("strict", 0, d.batch())))
    assert (refused.error_code, refused.base_offset, refused.log_start_offset) == (ErrorCode.NOT_ENOUGH_REPLICAS, -1, 0)
    assert d.produce_result(await client.request(d.produce("strict", 0, d.batch(), acks=1))).error_code == 0
    await cluster.node(3).chaos.up()
    assert d.produce_result(await client.request(d.produce("strict", 0, d.batch()))).error_code == 0


async def test_eligible_leader_replicas_decide_who_may_lead_again(cluster: Cluster, clients: Any) -> None:
    """min.insync.replicas=2, RF 3 (KIP-966): the replicas that leave an ISR already below the
    minimum stay eligible; a replica that left before it may not lead an empty-ISR partition."""
    client = await clients(1)
    await create(client, new_topic("elr", -1, -1, {0: [1, 2, 3]}, min_insync_replicas="2"))
    for node in (1, 2, 3):
        cluster.node(node).chaos.down()
    state = cluster.partition("elr", 0)
    assert state is not None and (state.leader, state.isr, sorted(state.elr)) == (-1, [], [2, 3])
    await cluster.node(1).chaos.up()  # left while the ISR was still [1, 2, 3]: not eligible
    assert (state.leader, state.isr) == (-1, [])
    # DescribeTopicPartitions shows what Metadata cannot: the eligible replicas and the last leader.
    assert await client_describe(cluster, 1, "elr") == (-1, [1, 2, 3], [], [2, 3], [3], [2, 3])
    await cluster.node(2).chaos.up()
    # 2 leads with ISR [2]; 1, up and caught up, joins at once: 2 in sync meet the minimum, the ELR empties.
    assert (state.leader, state.isr, state.elr) == (2, [2, 1], [])
    await cluster.node(3).chaos.up()
    assert (state.leader, state.isr, state.elr) == (2, [2, 1, 3], [])


async def client_describe(cluster: Cluster, node: int, topic: str) -> tuple[Any, ...]:
    """DescribeTopicPartitions of partition 0 from `node`: leader, replicas, ISR, ELR, last known ELR, offline."""
    client = await RawClient.connect(cluster.node(node).bootstrap)
    try:
        answer = await client.request(
            DescribeTopicPartitionsRequest[0](
                topics=[DescribeTopicPartitionsRequest.TopicRequest(name=topic)], response_partition_limit=10, cursor=None
            )
        )
    finally:
        await client.close()
    p = answer.topics[0].partitions[0]
    return (p.leader_id, p.replica_nodes, p.isr_nodes, p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas)


async def test_preferred_leaders_lead_again_after_the_balancing_interval(tmp_path: Path) -> None:
    async with Cluster(config(tmp_path, leader_imbalance_check_interval_seconds=1), brokers=3) as c:
        client = await RawClient.connect(c.node(3).bootstrap)
        await create(client, new_topic("balanced", -1, -1, {0: [1, 2]}))
        c.node(1).chaos.down()
        assert c.leader("balanced", 0) == 2
        await c.node(1).chaos.up()
        assert c.leader("balanced", 0) == 2  # back in sync, not leading yet
        await async_wait_until(lambda: c.leader("balanced", 0) == 1, 10, message="the preferred replica leads again")
        assert c.leader_epoch("balanced", 0) == 2
        await client.close()


async def test_unclean_leader_election_lets_any_live_replica_lead(cluster: Cluster, clients: Any) -> None:
    client = await clients(1)
    await create(client, new_topic("unclean", -1, -1, {0: [2, 3]}, unclean_leader_election_enable="true"))
    cluster.node(2).chaos.down()
    cluster.node(3).chaos.down()
    state = cluster.partition("unclean", 0)
    assert state is not None and state.leader == -1
    await cluster.node(2).chaos.up()  # not the last in sync, but the topic allows an unclean election
    assert (state.leader, state.isr) == (2, [2])


async def test_failover_reassigns_what_would_stay_offline(cluster: Cluster, clients: Any) -> None:
    client = await clients(1)
    await create(client, new_topic("solo", -1, -1, {0: [2], 1: [1]}))
    led = sum(1 for _, _, s in cluster.replicas.all(cluster.state.topics.topics.values()) if s.leader == 2)
    result = await cluster.chaos.apply("down", {"node": 2, "failover": True})
    assert result == {"down": "refuse", "moved": led}  # every leadership it had, "solo"-0 by reassignment
    parts = partitions_of(await metadata(client, "solo"), "solo")
    assert (parts[0].leader_id, parts[0].replica_nodes, parts[0].error_code) == (3, [3], 0)
    stored = cluster.state.topics.get("solo")
    assert stored is not None and stored.replicas == [[3], [1]]
    await cluster.chaos.apply("up", {"node": 2})


async def test_group_coordinators_move_and_go_offline_with_their_partition(tmp_path: Path) -> None:
    async with Cluster(config(tmp_path, offsets_partitions=1), brokers=3) as c:
        partition, coordinator = c.coordinator_of("g")
        replicas = c.partition(OFFSETS_TOPIC, partition).replicas  # type: ignore[union-attr]
        assert len(replicas) == 3 and coordinator == replicas[0]
        for node in replicas[:2]:
            c.node(node).chaos.down()
        await c.settled()
        client = await RawClient.connect(c.node(replicas[2]).bootstrap)
        found = await client.request(FindCoordinatorRequest[3](key="g", key_type=0))
        assert (found.error_code, found.node_id) == (0, replicas[2])
        c.node(replicas[2]).chaos.down()
        await client.close()
        await c.node(replicas[0]).chaos.up()  # not in the ISR when it left, nor eligible: still offline
        client = await RawClient.connect(c.node(replicas[0]).bootstrap)
        found = await client.request(FindCoordinatorRequest[3](key="g", key_type=0))
        assert found.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE  # KafkaApis: no live leader
        await c.node(replicas[2]).chaos.up()
        await c.settled()
        found = await client.request(FindCoordinatorRequest[3](key="g", key_type=0))
        assert (found.error_code, found.node_id) == (0, replicas[2])
        await client.close()


# -- what each node answers ------------------------------------------------------------------------


async def test_describe_cluster_lists_racks_and_fenced_brokers(cluster: Cluster, clients: Any) -> None:
    client = await clients(2)
    cluster.node(1).chaos.down()
    for version in (0, 1, 2):
        request = DescribeClusterRequest[version](include_cluster_authorized_operations=False)
        if version >= 1:
            request.endpoint_type = 1
        if version >= 2:
            request.include_fenced_brokers = False
        answer = await client.request(request)
        assert [(b.broker_id, b.rack) for b in answer.brokers] == [(2, "rack-b"), (3, "rack-c")]
        assert answer.controller_id == 2  # a live broker
    answer = await client.request(
        DescribeClusterRequest[2](include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=True)
    )
    assert [(b.broker_id, b.is_fenced) for b in answer.brokers] == [(1, True), (2, False), (3, False)]


async def test_describe_configs_reports_each_brokers_rack(cluster: Cluster, clients: Any) -> None:
    _R = DescribeConfigsRequest[4].DescribeConfigsResource
    for node, rack in RACKS.items():
        client = await clients(node)
        answer = await client.request(
            DescribeConfigsRequest[4](
                resources=[_R(resource_type=4, resource_name=str(node), configuration_keys=None)],
                include_synonyms=False,
                include_documentation=False,
            )
        )
        entries = {e.name: e.value for e in answer.results[0].configs}
        assert entries["broker.rack"] == rack
        assert (entries["default.replication.factor"], entries["offsets.topic.replication.factor"]) == ("1", "3")


async def test_kip951_produce_names_the_current_leader(cluster: Cluster, clients: Any) -> None:
    client = await clients(1)
    await create(client, new_topic("moved", -1, -1, {0: [1, 2]}))
    moved = cluster.move_leader("moved", 0, 2)
    assert (moved["leader"], moved["leader_epoch"]) == (2, 1)
    answer = await client.request(d.produce("moved", 0, d.batch(), version=11))
    part = d.produce_result(answer)
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (2, 1)
    assert [(e.node_id, e.port, e.rack) for e in answer.node_endpoints] == [(2, cluster.node(2).bound_port, "rack-b")]
    old = d.produce_result(await client.request(d.produce("moved", 0, d.batch(), version=9)))  # before v10: nothing more
    assert old.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and getattr(old, "current_leader", None) is None
    assert d.produce_result(await (await clients(2)).request(d.produce("moved", 0, d.batch(), version=11))).error_code == 0


async def test_kip951_fetch_names_the_current_leader_from_v16(cluster: Cluster, clients: Any) -> None:
    client = await clients(3)
    await create(client, new_topic("away", -1, -1, {0: [1, 2]}))
    topic_id = cluster.state.topics.get("away").topic_id  # type: ignore[union-attr]
    answer = await client.request(d.fetch([(topic_id, 0, 0)], version=16))
    part = answer.responses[0].partitions[0]
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER  # node 3 hosts no replica
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, 0)
    assert [(e.node_id, e.rack) for e in answer.node_endpoints] == [(1, "rack-a")]
    fenced = await (await clients(1)).request(_fetch_with_epoch(topic_id, 0, -5))
    fpart = fenced.responses[0].partitions[0]
    assert fpart.error_code == ErrorCode.FENCED_LEADER_EPOCH and fpart.current_leader.leader_id == 1
    answer = await client.request(d.fetch([(topic_id, 0, 0)], version=15))  # before v16: KafkaApis fills nothing
    assert answer.responses[0].partitions[0].current_leader is None and not answer.node_endpoints


def _fetch_with_epoch(topic_id: uuid.UUID, partition: int, epoch: int) -> Any:
    request = d.fetch([(topic_id, partition, 0)], version=16)
    request.topics[0].partitions[0].current_leader_epoch = epoch
    return request


async def test_a_follower_serves_consumers_from_fetch_v11(cluster: Cluster, clients: Any) -> None:
    leader_client = await clients(1)
    await create(leader_client, new_topic("follow", -1, -1, {0: [1, 2]}))
    assert d.produce_result(await leader_client.request(d.produce("follow", 0, d.batch(3)))).error_code == 0
    follower = await clients(2)
    served = (await follower.request(d.fetch([("follow", 0, 0)], version=11))).responses[0].partitions[0]
    assert (served.error_code, served.high_watermark, d.fetched_offsets(served)) == (0, 3, [0, 1, 2])
    old = (await follower.request(d.fetch([("follow", 0, 0)], version=10))).responses[0].partitions[0]
    assert old.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER  # no client metadata before v11: leader only
    listed = await follower.request(d.list_offsets("follow", 0, -1))
    assert listed.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_rack_aware_replica_selector_sends_consumers_to_their_rack(tmp_path: Path) -> None:
    async with Cluster(config(tmp_path, replica_selector="rack"), brokers=3) as c:
        leader = await RawClient.connect(c.node(1).bootstrap)
        await create(leader, new_topic("near", -1, -1, {0: [1, 2, 3]}))
        assert d.produce_result(await leader.request(d.produce("near", 0, d.batch(2)))).error_code == 0

        async def fetch(client: RawClient, rack: str, min_bytes: int = 1) -> Any:
            request = d.fetch([("near", 0, 0)], version=11, max_wait_ms=5000, min_bytes=min_bytes)
            request.rack_id = rack
            return (await client.request(request)).responses[0].partitions[0]

        started = time.monotonic()
        sent = await fetch(leader, "rack-c", min_bytes=1 << 20)  # answered at once, though min_bytes is not met
        assert time.monotonic() - started < 4
        assert (sent.error_code, sent.preferred_read_replica, sent.records, sent.high_watermark) == (0, 3, b"", 2)
        here = await fetch(leader, "rack-a")  # the leader's own rack: served by the leader
        assert (here.preferred_read_replica, d.fetched_offsets(here)) == (-1, [0, 1])
        elsewhere = await fetch(leader, "rack-z")
        assert elsewhere.preferred_read_replica == -1
        follower = await RawClient.connect(c.node(3).bootstrap)
        served = await fetch(follower, "rack-c")  # the follower serves it (no redirection off the leader)
        assert (served.preferred_read_replica, d.fetched_offsets(served)) == (-1, [0, 1])
        c.node(3).chaos.down()
        assert (await fetch(leader, "rack-c")).preferred_read_replica == -1  # out of the ISR: not chosen
        await leader.close()
        await follower.close()


async def test_a_lone_broker_has_a_rack_too(tmp_path: Path) -> None:
    from broker import Broker

    async with Broker(config(tmp_path, broker_rack="solo-rack")) as broker:
        client = await RawClient.connect(broker.bootstrap)
        await create(client, new_topic("single", 2, 1))
        answer = await metadata(client, "single")
        assert [(b.node_id, b.rack) for b in answer.brokers] == [(1, "solo-rack")]
        await client.close()
        assert broker.topics.racks_of("single", 1) == {"solo-rack"}
        stored = broker.topics.get("single")
        assert stored is not None and stored.replicas == [[1], [1]]
    async with Broker(config(tmp_path / "norack", broker_rack=None)) as broker:
        broker.topics.create("plain", 1)
        assert broker.topics.racks_of("plain", 0) == frozenset()


async def test_topics_created_while_a_node_is_down_lead_elsewhere(cluster: Cluster, clients: Any) -> None:
    """Kafka's placer gives fenced brokers replicas only when it must, never the lead; a new
    partition's ISR is its live replicas; none live is refused."""
    cluster.node(3).chaos.down()
    client = await clients(1)
    results = await create(client, new_topic("while-down", 4, 3), new_topic("only-down", -1, -1, {0: [3]}))
    assert results["while-down"].error_code == 0
    assert (results["only-down"].error_code, results["only-down"].error_message) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "All brokers specified in the manual partition assignment for partition 0 are fenced or in controlled shutdown.",
    )
    for p in partitions_of(await metadata(client, "while-down"), "while-down").values():
        assert p.leader_id in (1, 2) and sorted(p.replica_nodes) == [1, 2, 3] and sorted(p.isr_nodes) == sorted({1, 2})
        assert p.offline_replicas == [3]
    await cluster.node(3).chaos.up()
    for p in partitions_of(await metadata(client, "while-down"), "while-down").values():
        assert sorted(p.isr_nodes) == [1, 2, 3]


async def test_kafka_exporter_families_count_replicas_and_the_isr(cluster: Cluster, clients: Any) -> None:
    """kafka_exporter's partition families (broker/metrics/exporter.py) as it would export them from
    this cluster's Metadata: brokers up, leader, replicas, in-sync replicas, preferred, under-replicated."""
    from broker.metrics import exporter

    client = await clients(1)
    created = await create(client, new_topic("watched", -1, -1, {0: [2, 3, 1]}), new_topic("watched-alone", -1, -1, {0: [3]}))
    assert {t.error_code for t in created.values()} == {0}
    cluster.node(2).chaos.down()
    cluster.node(3).chaos.down()
    text = exporter.render(cluster.state)

    def value(name: str, partition: int, topic: str = "watched") -> str | None:
        prefix = f'{name}{{partition="{partition}",topic="{topic}"}} '
        return next((line[len(prefix) :] for line in text.splitlines() if line.startswith(prefix)), None)

    assert "kafka_brokers 1" in text.splitlines()
    assert [line for line in text.splitlines() if line.startswith("kafka_broker_info")] == [
        f'kafka_broker_info{{address="{cluster.node(1).bootstrap}",id="1"}} 1'
    ]
    assert [value(f"kafka_topic_partition_{k}", 0) for k in ("leader", "replicas", "in_sync_replica", "leader_is_preferred")] == [
        "1",
        "3",
        "1",
        "0",
    ]
    assert value("kafka_topic_partition_under_replicated_partition", 0) == "1"
    # An offline partition: no leader and no offsets (the exporter's Leader and GetOffset fail), 1 replica, 0 in sync.
    alone = "watched-alone"
    assert value("kafka_topic_partition_leader", 0, alone) is None and value("kafka_topic_partition_current_offset", 0, alone) is None
    assert (value("kafka_topic_partition_replicas", 0, alone), value("kafka_topic_partition_in_sync_replica", 0, alone)) == ("1", "0")
    assert value("kafka_topic_partition_current_offset", 0) == "0"
