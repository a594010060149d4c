"""ListOffsets v1-v8: earliest (-2), latest (-1), max timestamp (-3, v7+), earliest local (-4,
v8+) and lookup by timestamp through the time index, as Kafka's ReplicaManager.fetchOffset.

Latest is the high watermark, or the last stable offset for READ_COMMITTED (the same here
until transactions exist). A timestamp lookup that finds nothing, or finds an offset at or
past the last fetchable one, answers offset -1 and timestamp -1 with no error.

Version 0, the old offsets-before-a-time form, is not served, as in Kafka 4 (KIP-896).
"""

from __future__ import annotations

from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

ListOffsetsResponse = lazy_response(ApiKey.LIST_OFFSETS)

_Topic = ListOffsetsResponse.ListOffsetsTopicResponse
_Partition = _Topic.ListOffsetsPartitionResponse

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4
_MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8}


def _part(index: int, code: int = 0, timestamp: int = -1, offset: int = -1, epoch: int = -1) -> Any:
    return _Partition(partition_index=index, error_code=code, timestamp=timestamp, offset=offset, leader_epoch=epoch)


def _error(request: Any, code: ErrorCode) -> Any:
    topics = [_Topic(name=t.name, partitions=[_part(p.partition_index, code) for p in t.partitions]) for t in request.topics]
    return ListOffsetsResponse(version=request.version, throttle_time_ms=0, topics=topics)


@api(ApiKey.LIST_OFFSETS, 1, 8, error_response=_error)
def handle_list_offsets(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    read_committed = version >= 2 and request.isolation_level == 1
    client = request.replica_id == -1  # consumers; -2 is a debugging replica, >= 0 a follower
    seen: set[tuple[str, int]] = set()
    duplicates = set()
    for t in request.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if key in seen:
                duplicates.add(key)
            seen.add(key)
    topics_mgr = ctx.broker.topics
    logs = ctx.broker.logs
    out = []
    described = authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, (t.name for t in request.topics))
    for t in request.topics:
        parts = []
        topic = topics_mgr.get(t.name)
        for p in t.partitions:
            index = p.partition_index
            ts = p.timestamp
            if t.name not in described:  # DESCRIBE on the topic first, as KafkaApis partitions them
                parts.append(_part(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if (t.name, index) in duplicates:
                parts.append(_part(index, ErrorCode.INVALID_REQUEST))
                continue
            if ts < 0 and version < _MIN_VERSION.get(ts, 1 << 15):
                parts.append(_part(index, ErrorCode.UNSUPPORTED_VERSION))
                continue
            log = logs.get(t.name, index) if topic is not None else None
            if log is None:
                parts.append(_part(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            code, current = ctx.broker.partition_check(t.name, index, getattr(p, "current_leader_epoch", -1))
            if code:
                parts.append(_part(index, code))
                continue
            if not client:
                last_fetchable = log.log_end_offset
            else:
                last_fetchable = log.last_stable_offset if read_committed else log.high_watermark
            epoch = current if version >= 4 else -1
            if ts == LATEST:
                parts.append(_part(index, 0, -1, last_fetchable, epoch))
            elif ts in (EARLIEST, EARLIEST_LOCAL):
                parts.append(_part(index, 0, -1, log.log_start_offset, epoch))
            else:
                found = log.max_timestamp_offset() if ts == MAX_TIMESTAMP else log.offset_for_timestamp(ts)
                if found is None or found[1] >= last_fetchable:
                    parts.append(_part(index))
                else:
                    parts.append(_part(index, 0, found[0], found[1], epoch))
        out.append(_Topic(name=t.name, partitions=parts))
    return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=out)
