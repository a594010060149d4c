"""OffsetForLeaderEpoch v2-v4: the end offset of a leader epoch (consumers validate positions).

Every partition here has one leader epoch, 0, which began at the log start offset (Kafka's
leader epoch cache holds one entry, (0, log start), for a partition led by one broker since
its creation). So, as LeaderEpochFileCache.endOffsetFor answers: epoch 0 ends at the log end
offset; an undefined (-1) or later epoch is unknown (-1, -1); an earlier one ends where epoch
0 starts.
"""

from __future__ import annotations

from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode
from storage.log import LEADER_EPOCH

OffsetForLeaderEpochResponse = lazy_response(ApiKey.OFFSET_FOR_LEADER_EPOCH)

_Topic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_Partition = _Topic.EpochEndOffset
UNDEFINED_EPOCH = -1


def _part(index: int, code: int = 0, epoch: int = -1, end_offset: int = -1) -> Any:
    return _Partition(error_code=code, partition=index, leader_epoch=epoch, end_offset=end_offset)


def _error(request: Any, code: ErrorCode) -> Any:
    topics = [_Topic(topic=t.topic, partitions=[_part(p.partition, code) for p in t.partitions]) for t in request.topics]
    return OffsetForLeaderEpochResponse(version=request.version, throttle_time_ms=0, topics=topics)


def _end_offset(ctx: RequestContext, topic: str, partition: int, wanted: int, epoch: int, log: Any) -> Any:
    """Kafka's leader epoch cache lookup: the largest epoch <= `wanted` and where the next one starts."""
    if wanted == epoch:
        return _part(partition, 0, epoch, log.log_end_offset)
    if wanted == UNDEFINED_EPOCH or wanted > epoch:
        return _part(partition)
    cluster = ctx.broker.cluster
    history = cluster.epoch_history(topic, partition) if cluster is not None else [(LEADER_EPOCH, 0)]
    found = [i for i, (e, _start) in enumerate(history) if e <= wanted]
    if not found:
        return _part(partition, 0, wanted, log.log_start_offset)
    i = found[-1]
    return _part(partition, 0, history[i][0], max(history[i + 1][1], log.log_start_offset))


@api(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, error_response=_error)
def handle_offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    logs = ctx.broker.logs
    topics_mgr = ctx.broker.topics
    out = []
    described = None  # CLUSTER_ACTION covers every topic, else DESCRIBE on each (KafkaApis)
    if ctx.broker.authorizer is not None and not authz.cluster_allowed(ctx, authz.Op.CLUSTER_ACTION, log_denied=False):
        described = authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, (t.topic for t in request.topics))
    for t in request.topics:
        parts = []
        known = topics_mgr.get(t.topic) is not None
        for p in t.partitions:
            log = logs.get(t.topic, p.partition) if known else None
            current = p.current_leader_epoch
            if described is not None and t.topic not in described:
                parts.append(_part(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif log is None:
                parts.append(_part(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            elif (code_epoch := ctx.broker.partition_check(t.topic, p.partition, current))[0]:
                parts.append(_part(p.partition, code_epoch[0]))
            else:
                parts.append(_end_offset(ctx, t.topic, p.partition, p.leader_epoch, code_epoch[1], log))
        out.append(_Topic(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(version=ctx.api_version, throttle_time_ms=0, topics=out)
