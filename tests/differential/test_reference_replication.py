"""Replication on one node against Apache Kafka 4.4 (the reference broker is a single KRaft
node): the same CreateTopics and CreatePartitions requests with replication factors and manual
assignments it cannot hold, and the same DescribeTopicPartitions requests (cursors, limits,
unknown and illegal names), answered alike. What only a cluster shows (ISRs shrinking, leaders
moving, ELR, KIP-951) is read from Kafka's code: docs/cluster.md says where."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest, DescribeTopicPartitionsRequest

from broker import Broker
from tests.support.raw_client import RawClient

_T = CreateTopicsRequest.CreatableTopic
_A = _T.CreatableReplicaAssignment
_P = CreatePartitionsRequest.CreatePartitionsTopic
_PA = _P.CreatePartitionsAssignment
_DT = DescribeTopicPartitionsRequest.TopicRequest
_DC = DescribeTopicPartitionsRequest.Cursor
PREFIX = "repl-"


def _new(name: str, partitions: int, rf: int, assignments: dict[int, list[int]] | None = None) -> Any:
    return _T(
        name=PREFIX + name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=[_A(partition_index=p, broker_ids=b) for p, b in (assignments or {}).items()],
        configs=[],
    )


async def _creations(client: RawClient, node: int) -> list[tuple[str, int, str | None]]:
    topics = [
        _new("rf3", 1, 3),
        _new("rf0", 1, 0),
        _new("manual-unknown", -1, -1, {0: [node, node + 7]}),
        _new("manual-twice", -1, -1, {0: [node, node]}),
        _new("manual-empty", -1, -1, {0: []}),
        _new("manual-gap", -1, -1, {1: [node]}),
        _new("manual-ok", -1, -1, {0: [node], 1: [node]}),
        _new("paged", 5, 1),
    ]
    resp = await client.request(CreateTopicsRequest[7](topics=topics, timeout_ms=10000, validate_only=False))
    return sorted((t.name, t.error_code, t.error_message) for t in resp.topics)


async def _growth(client: RawClient, node: int) -> list[tuple[str, int, str | None]]:
    grow = [
        _P(name=PREFIX + "manual-ok", count=3, assignments=[_PA(broker_ids=[node, node + 7])]),
        _P(name=PREFIX + "paged", count=6, assignments=[_PA(broker_ids=[node + 7])]),
    ]
    resp = await client.request(CreatePartitionsRequest[3](topics=grow, timeout_ms=10000, validate_only=True))
    return sorted((t.name, t.error_code, t.error_message) for t in resp.results)


def _view(resp: Any, node: int) -> Any:
    """The answer with what differs by nature (ids, the node id, operations bits) normalized."""
    topics = []
    for t in resp.topics:
        parts = [
            (
                p.partition_index,
                p.error_code,
                p.leader_id == node,
                p.leader_epoch,
                [r == node for r in p.replica_nodes],
                [r == node for r in p.isr_nodes],
                p.eligible_leader_replicas,
                p.last_known_elr,
                p.offline_replicas,
            )
            for p in t.partitions
        ]
        topics.append((t.name, t.error_code, t.topic_id is not None, t.is_internal, parts, t.topic_authorized_operations))
    cursor = None if resp.next_cursor is None else (resp.next_cursor.topic_name, resp.next_cursor.partition_index)
    return topics, cursor


async def _describes(client: RawClient, node: int) -> list[Any]:
    requests = [
        DescribeTopicPartitionsRequest[0](
            topics=[_DT(name=PREFIX + "paged"), _DT(name=PREFIX + "nope"), _DT(name="bad name!")],
            response_partition_limit=2000,
            cursor=None,
        ),
        DescribeTopicPartitionsRequest[0](
            topics=[_DT(name=PREFIX + "paged"), _DT(name=PREFIX + "manual-ok")], response_partition_limit=3, cursor=None
        ),
        DescribeTopicPartitionsRequest[0](
            topics=[_DT(name=PREFIX + "paged"), _DT(name=PREFIX + "manual-ok")],
            response_partition_limit=3,
            cursor=_DC(topic_name=PREFIX + "paged", partition_index=1),
        ),
        DescribeTopicPartitionsRequest[0](topics=[_DT(name=PREFIX + "paged")], response_partition_limit=0, cursor=None),
        DescribeTopicPartitionsRequest[0](
            topics=[_DT(name=PREFIX + "paged")], response_partition_limit=10, cursor=_DC(topic_name=PREFIX + "zzz", partition_index=0)
        ),
        DescribeTopicPartitionsRequest[0](
            topics=[_DT(name=PREFIX + "paged")], response_partition_limit=10, cursor=_DC(topic_name=PREFIX + "paged", partition_index=-1)
        ),
    ]
    return [_view(await client.request(r), node) for r in requests]


async def _wait_for_leaders(client: RawClient) -> None:
    """Kafka creates partitions asynchronously: wait until every created one has its leader."""
    deadline = time.monotonic() + 30
    while True:
        resp = await client.request(
            DescribeTopicPartitionsRequest[0](
                topics=[_DT(name=PREFIX + "paged"), _DT(name=PREFIX + "manual-ok")], response_partition_limit=100, cursor=None
            )
        )
        if all(p.leader_id >= 0 for t in resp.topics for p in t.partitions) and sum(len(t.partitions) for t in resp.topics) == 7:
            return
        assert time.monotonic() < deadline, "the reference broker's partitions have no leader"
        await asyncio.sleep(0.1)


async def test_replication_requests_are_answered_as_kafka_answers_them(
    kafka_reference: Any, broker: Broker, raw: Callable[..., Any]
) -> None:
    reference = await RawClient.connect(kafka_reference.bootstrap)
    ours: RawClient = await raw()
    kafka_node = 1  # the reference broker's node.id (tests/support/kafka_reference.py), as kaflet's default
    try:
        theirs = {"create": await _creations(reference, kafka_node)}
        await _wait_for_leaders(reference)
        theirs["grow"] = await _growth(reference, kafka_node)
        theirs["describe"] = await _describes(reference, kafka_node)
        mine = {"create": await _creations(ours, broker.config.node_id)}
        mine["grow"] = await _growth(ours, broker.config.node_id)
        mine["describe"] = await _describes(ours, broker.config.node_id)
    finally:
        await reference.close()
    assert mine == theirs
