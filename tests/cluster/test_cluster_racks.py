"""KIP-848 groups in a cluster with racks: a reassignment (`move-leader --to` a node that is not a
replica, `down --failover`) changes the racks of a partition's replicas, which Kafka 4.4 hashes into
the subscribed topics' metadata: the group epoch of a group subscribed to it bumps (KH-8)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from broker.cluster.cluster import Cluster
from broker.config import Config
from tests.support.consumer_groups import NONE, CgMember, converge, describe_one
from tests.support.raw_client import RawClient


@pytest.fixture
async def cluster(make_config: Callable[..., Config]) -> AsyncIterator[Cluster]:
    config = make_config(offsets_partitions=1, transaction_state_partitions=1, broker_rack="rack-a,rack-b,rack-c")
    async with Cluster(config, brokers=3) as c:
        yield c


async def test_kh_8_reassignments_that_change_replica_racks_bump_the_group_epoch(cluster: Cluster) -> None:
    _, coordinator = cluster.coordinator_of("g-racks")
    first, second = (n for n in cluster.node_ids if n != coordinator)
    cluster.state.topics.create("racked", 1, replicas=[[first]])
    client = await RawClient.connect(cluster.node(coordinator).bootstrap)
    member = CgMember(client, "g-racks", ["racked"])
    assert (await member.join()).error_code == NONE
    await converge([member])
    epoch = (await describe_one(client, "g-racks")).group_epoch

    # move-leader --to a node that is not a replica: it takes the leader's place, in another rack.
    cluster.move_leader("racked", 0, second)
    assert cluster.racks_of("racked", 0) == frozenset({cluster.racks[second]})
    await converge([member])
    assert (await describe_one(client, "g-racks")).group_epoch == epoch + 1

    # down --failover of the only replica: the partition is reassigned, to another rack again.
    await cluster.chaos.apply("down", {"node": second, "failover": True})
    assert cluster.racks_of("racked", 0) != frozenset({cluster.racks[second]})
    await converge([member])
    assert (await describe_one(client, "g-racks")).group_epoch == epoch + 2

    # The node back up changes no replica: no new epoch.
    await cluster.chaos.apply("up", {"node": second})
    await converge([member])
    assert (await describe_one(client, "g-racks")).group_epoch == epoch + 2
    await client.close()
