"""Several brokers in one process (broker/cluster/cluster.py) over the wire: Metadata lists them
all, leaders and coordinators are spread, a request sent to the wrong broker gets Kafka's error,
and leadership and coordinators move."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kafka.protocol.consumer import HeartbeatRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from broker.cluster.chaos import ChaosError
from broker.cluster.cluster import OFFSETS_TOPIC, Cluster
from broker.config import Config
from protocol.errors import ErrorCode
from tests.support import data as d
from tests.support.raw_client import RawClient


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    config = Config(port=0, data_dir=str(tmp_path / "data"), metrics=False, offsets_partitions=6, transaction_state_partitions=3)
    async with Cluster(config, brokers=3) as c:
        c.state.topics.create("t", 6, replicas=c.state.topics.placement.place(6, 3))  # every node a replica
        yield c


async def connect(cluster: Cluster, node_id: int) -> RawClient:
    return await RawClient.connect(cluster.node(node_id).bootstrap)


async def test_metadata_lists_every_broker_and_spreads_leaders(cluster: Cluster) -> None:
    clients = [await connect(cluster, n) for n in cluster.node_ids]
    answers = [await c.request(MetadataRequest[12](topics=None, allow_auto_topic_creation=False)) for c in clients]
    for answer in answers:  # every node tells the same story
        assert [(b.node_id, b.port) for b in answer.brokers] == [(n.config.node_id, n.bound_port) for n in cluster.nodes]
        assert answer.controller_id == 1
    topics = {t.name: t for t in answers[0].topics}
    leaders = {p.partition_index: p.leader_id for p in topics["t"].partitions}
    assert set(leaders.values()) == {1, 2, 3}
    assert all(leaders[p] == cluster.leader("t", p) for p in leaders)
    assert {p.leader_id for p in topics[OFFSETS_TOPIC].partitions} == {1, 2, 3}
    assert all(sorted(p.replica_nodes) == [1, 2, 3] and p.replica_nodes[0] == p.leader_id for p in topics["t"].partitions)
    for c in clients:
        await c.close()


async def test_produce_to_a_follower_gets_not_leader_or_follower(cluster: Cluster) -> None:
    leader = cluster.leader("t", 0)
    follower = next(n for n in cluster.node_ids if n != leader)
    to_follower, to_leader = await connect(cluster, follower), await connect(cluster, leader)
    answer = await to_follower.request(d.produce("t", 0, d.batch()))
    assert d.produce_result(answer).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert d.produce_result(await to_leader.request(d.produce("t", 0, d.batch()))).error_code == 0
    fetched = await to_follower.request(d.fetch([("t", 0, 0)], version=10))  # v11+: a follower serves consumers
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    await to_follower.close()
    await to_leader.close()


async def test_group_requests_to_another_broker_get_not_coordinator(cluster: Cluster) -> None:
    partition, owner = cluster.coordinator_of("g1")
    other = next(n for n in cluster.node_ids if n != owner)
    client = await connect(cluster, other)
    found = await client.request(FindCoordinatorRequest[3](key="g1", key_type=0))
    assert (found.error_code, found.node_id, found.port) == (0, owner, cluster.node(owner).bound_port)
    beat = HeartbeatRequest[4](group_id="g1", generation_id=1, member_id="m", group_instance_id=None)
    assert (await client.request(beat)).error_code == ErrorCode.NOT_COORDINATOR
    right = await connect(cluster, owner)
    assert (await right.request(beat)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    await cluster.move_coordinator(partition, other)
    assert (await right.request(beat)).error_code == ErrorCode.NOT_COORDINATOR
    assert (await client.request(beat)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    found = await client.request(FindCoordinatorRequest[3](key="g1", key_type=0))
    assert found.node_id == other
    await client.close()
    await right.close()


async def test_leadership_moves_and_its_epoch_bumps(cluster: Cluster) -> None:
    old = cluster.leader("t", 1)
    client = await connect(cluster, old)
    for _ in range(3):
        assert d.produce_result(await client.request(d.produce("t", 1, d.batch()))).error_code == 0
    moved = cluster.move_leader("t", 1)
    new = moved["leader"]
    assert new != old and moved["leader_epoch"] == 1 and cluster.leader_epoch("t", 1) == 1
    assert d.produce_result(await client.request(d.produce("t", 1, d.batch()))).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    stale = await client.request(d.offset_for_leader_epoch("t", 1, 0, current=0))
    assert stale.topics[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    leader = await connect(cluster, new)
    assert d.produce_result(await leader.request(d.produce("t", 1, d.batch()))).error_code == 0
    # Kafka's epoch cache: epoch 0 ended where epoch 1 began (offset 3); epoch 1 ends at the log end.
    answer = await leader.request(d.offset_for_leader_epoch("t", 1, 0, current=1))
    part = answer.topics[0].partitions[0]
    assert (part.error_code, part.leader_epoch, part.end_offset) == (0, 0, 3)
    part = (await leader.request(d.offset_for_leader_epoch("t", 1, 1, current=1))).topics[0].partitions[0]
    assert (part.leader_epoch, part.end_offset) == (1, 4)
    meta = await leader.request(
        MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(name="t")], allow_auto_topic_creation=False)
    )
    p1 = next(p for p in meta.topics[0].partitions if p.partition_index == 1)
    assert (p1.leader_id, p1.leader_epoch) == (new, 1)
    await client.close()
    await leader.close()


async def test_control_entry_moves_and_acts_per_node(cluster: Cluster) -> None:
    moved = await cluster.chaos.apply("move_leader", {"topic": "t", "partition": 2, "node": 3})
    assert moved["leader"] == 3
    moved = await cluster.chaos.apply("move_coordinator", {"group": "g2"})
    assert moved["topic"] == OFFSETS_TOPIC and moved["leader"] == cluster.coordinator_of("g2")[1]
    await cluster.chaos.apply("latency", {"ms": 5, "node": 2})
    state = await cluster.chaos.apply("state", {})
    assert state["nodes"]["2"]["latency_ms"] == 5 and state["nodes"]["1"]["latency_ms"] == 0
    assert {(m["topic"], m["partition"]) for m in state["moved_leaders"]} >= {("t", 2)}
    await cluster.chaos.apply("down", {"node": 3})
    assert cluster.node(3).faults.down == "refuse"
    with pytest.raises(ChaosError):
        await cluster.chaos.apply("move_leader", {"topic": "nope", "partition": 0})
    with pytest.raises(ChaosError):
        await cluster.chaos.apply("latency", {"ms": 5, "node": 9})
    await cluster.chaos.apply("clear", {})
    assert cluster.node(3).faults.down is None and cluster.node(2).faults.latency_ms == 0


async def test_one_broker_cluster_is_a_broker(tmp_path: Path) -> None:
    async with Cluster(Config(port=0, data_dir=str(tmp_path / "d"), metrics=False), brokers=1) as c:
        client = await RawClient.connect(c.bootstrap)
        answer = await client.request(MetadataRequest[12](topics=None, allow_auto_topic_creation=False))
        assert [b.node_id for b in answer.brokers] == [1]
        # The only node leads every partition: the produce creates the topic and is appended.
        produced = d.produce_result(await client.request(d.produce("x", 0, d.batch())))
        assert (produced.error_code, produced.base_offset) == (0, 0)
        await client.close()


async def test_transaction_coordinator_requests_elsewhere_get_not_coordinator(cluster: Cluster) -> None:
    txn = cluster.state.txn
    assert txn is not None
    owner = cluster.leader(txn.topic_name, txn.partition_for("tx-1"))
    other = next(n for n in cluster.node_ids if n != owner)
    wrong, right = await connect(cluster, other), await connect(cluster, owner)
    found = await wrong.request(FindCoordinatorRequest[3](key="tx-1", key_type=1))
    assert (found.error_code, found.node_id) == (0, owner)
    assert (await wrong.request(d.init_producer_id("tx-1"))).error_code == ErrorCode.NOT_COORDINATOR
    assert (await right.request(d.init_producer_id("tx-1"))).error_code == 0
    await wrong.close()
    await right.close()
