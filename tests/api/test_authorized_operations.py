"""Authorized operations over the wire (broker/security/authorized_ops.py): with no authorizer,
every operation the resource type supports, as Kafka 4.4 answers (pinned here from its
AclEntry.supportedOperations; tests/differential/test_reference_authorized_ops.py compares live);
with an authorizer, what it allows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import DescribeClusterRequest, DescribeGroupsRequest
from kafka.protocol.metadata import MetadataRequest

from broker import Broker
from tests.support import groups as g
from tests.support.consumer_groups import describe, heartbeat
from tests.support.coordinator import wait_ready
from tests.support.raw_client import RawClient

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
)  # fmt: skip
GROUP = {READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS}
TOPIC = {READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS}
CLUSTER = {CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE}


def bits(ops: set[int]) -> int:
    return sum(1 << op for op in ops)


async def _ready(broker: Broker, raw: Callable[..., Any]) -> RawClient:
    broker.topics.create("t", 1)
    client: RawClient = await raw()
    await wait_ready(client)
    assert await g.commit(client, "classic", {("t", 0): 1}) == {("t", 0): 0}
    joined = await heartbeat(client, "modern", "m-1", topics=["t"], rebalance_timeout_ms=30_000, owned={})
    assert joined.error_code == 0
    return client


async def _all(client: RawClient) -> dict[str, Any]:
    groups = await client.request(DescribeGroupsRequest[5](groups=["classic", "nobody"], include_authorized_operations=True))
    consumer = await describe(client, "modern", "nobody", include_ops=True)
    cluster = await client.request(DescribeClusterRequest[1](include_cluster_authorized_operations=True, endpoint_type=1))
    topics = [MetadataRequest.MetadataRequestTopic(name=n, topic_id=None) for n in ("t", "absent", "bad/name")]
    meta = await client.request(
        MetadataRequest[10](
            topics=topics,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=True,
            include_topic_authorized_operations=True,
        )
    )
    return {
        "DescribeGroups": {d.group_id: (d.error_code, d.authorized_operations) for d in groups.groups},
        "ConsumerGroupDescribe": {d.group_id: (d.error_code, d.authorized_operations) for d in consumer.groups},
        "DescribeCluster": cluster.authorized_operations,
        "Metadata cluster": meta.authorized_operations,
        "Metadata topics": {t.name: (t.error_code, t.authorized_operations) for t in meta.topics},
    }


async def test_without_an_authorizer_every_supported_operation(broker: Broker, raw: Callable[..., Any]) -> None:
    client = await _ready(broker, raw)
    assert await _all(client) == {
        "DescribeGroups": {"classic": (0, GROUP), "nobody": (0, GROUP)},  # an unknown group is Dead, without error
        "ConsumerGroupDescribe": {"modern": (0, bits(GROUP)), "nobody": (69, -(2**31))},  # GROUP_ID_NOT_FOUND: none
        "DescribeCluster": CLUSTER,
        "Metadata cluster": CLUSTER,
        "Metadata topics": {"t": (0, TOPIC), "absent": (3, TOPIC), "bad/name": (17, TOPIC)},  # error entries too
    }
