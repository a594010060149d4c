"""DescribeTopicPartitions v0 (KIP-966): partitions with their leaders, replicas, ISR, eligible
leader replicas (ELR) and last known ELR, paged by a cursor. Kafka's admin client describes
topics with it when the broker serves it (kafka-topics --describe shows the ELR).

As Kafka's DescribeTopicPartitionsRequestHandler: no topics named means every topic the
principal may DESCRIBE (silently filtered) from the cursor's on; named topics without DESCRIBE
are answered TOPIC_AUTHORIZATION_FAILED after the others; a cursor naming a topic not in the
list, or a negative partition, fails the request with INVALID_REQUEST. Topics come sorted by
name, at most min(ResponsePartitionLimit, 2000) partitions (at least 1) per answer, with a
NextCursor where the answer stopped. An unknown topic is UNKNOWN_TOPIC_OR_PARTITION (an illegal
name INVALID_TOPIC_EXCEPTION), left out when every topic was asked for.

A lone broker leads every partition; in a cluster each partition is as the controller holds it
(broker/cluster/replicas.py), the replicas of fenced nodes listed offline, leader -1 without one.
"""

from __future__ import annotations

from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.topics.catalog import INTERNAL_TOPICS, Topic, name_error
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

DescribeTopicPartitionsResponse = lazy_response(ApiKey.DESCRIBE_TOPIC_PARTITIONS)

_Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
_Partition = _Topic.DescribeTopicPartitionsResponsePartition
_Cursor = DescribeTopicPartitionsResponse.Cursor
# Kafka's max.request.partition.size.limit: the most partitions one answer holds.
MAX_PARTITIONS = 2000
_NO_OPERATIONS = -2147483648


def _error(request: Any, code: ErrorCode) -> Any:
    """DescribeTopicPartitionsRequest.getErrorResponse: every named topic gets the error."""
    topics = [_topic_error(code, t.name) for t in request.topics or []]
    return DescribeTopicPartitionsResponse(version=request.version, throttle_time_ms=0, topics=topics, next_cursor=None)


def _topic_error(code: ErrorCode, name: str, internal: bool = False) -> Any:
    return _Topic(
        error_code=code,
        name=name,
        topic_id=None,
        is_internal=internal,
        partitions=[],
        topic_authorized_operations=_NO_OPERATIONS,
    )


def _partitions(ctx: RequestContext, topic: Topic, start: int, count: int) -> list[Any]:
    cluster = ctx.broker.cluster
    end = min(topic.partitions, start + count)
    if cluster is None:
        node = ctx.broker.config.node_id
        return [
            _Partition(
                error_code=0,
                partition_index=p,
                leader_id=node,
                leader_epoch=0,
                replica_nodes=[node],
                isr_nodes=[node],
                eligible_leader_replicas=[],
                last_known_elr=[],
                offline_replicas=[],
            )
            for p in range(start, end)
        ]
    out = []
    for p in range(start, end):
        state = cluster.replicas.get(topic, p)
        out.append(
            _Partition(
                error_code=0,
                partition_index=p,
                leader_id=state.leader if cluster.alive(state.leader) else -1,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=list(state.isr),
                eligible_leader_replicas=list(state.elr),
                last_known_elr=list(state.last_known_elr),
                offline_replicas=[r for r in state.replicas if not cluster.alive(r)],
            )
        )
    return out


def _operations(ctx: RequestContext, name: str) -> int:
    return sum(1 << op for op in authz.operations_or_all(ctx, authz.TOPIC, name))


@api(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0, error_response=_error)
def handle_describe_topic_partitions(ctx: RequestContext, request: Any) -> Any:
    topics_mgr = ctx.broker.topics
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    every_topic = not request.topics
    if every_topic:
        names = {n for n in topics_mgr.names() if n >= cursor_topic}
    else:
        names = {t.name for t in request.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            return _error(request, ErrorCode.INVALID_REQUEST)
    if cursor is not None and cursor.partition_index < 0:
        return _error(request, ErrorCode.INVALID_REQUEST)
    allowed = authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, names)
    denied = [] if every_topic else [_topic_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, n) for n in names if n not in allowed]
    remaining = max(min(MAX_PARTITIONS, request.response_partition_limit), 1)
    answers: list[Any] = []
    next_cursor = None
    for name in sorted(allowed):
        if remaining <= 0:
            next_cursor = _Cursor(topic_name=name, partition_index=0)
            break
        topic = topics_mgr.get(name)
        if topic is None:
            if not every_topic:
                code = ErrorCode.INVALID_TOPIC_EXCEPTION if name_error(name) is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                entry = _topic_error(code, name, name in INTERNAL_TOPICS)
                entry.topic_authorized_operations = _operations(ctx, name)  # Kafka sets them on every entry it found
                answers.append(entry)
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        partitions = _partitions(ctx, topic, start, remaining)
        answers.append(
            _Topic(
                error_code=0,
                name=name,
                topic_id=topic.topic_id,
                is_internal=name in INTERNAL_TOPICS,
                partitions=partitions,
                topic_authorized_operations=_operations(ctx, name),
            )
        )
        if start + len(partitions) < topic.partitions:
            next_cursor = _Cursor(topic_name=name, partition_index=start + len(partitions))
            break
        remaining -= len(partitions)
    ctx.errors = [t.error_code for t in answers + denied if t.error_code] or None
    return DescribeTopicPartitionsResponse(version=ctx.api_version, throttle_time_ms=0, topics=answers + denied, next_cursor=next_cursor)
