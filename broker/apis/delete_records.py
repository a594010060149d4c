"""DeleteRecords v0-v2: advance partitions' log start offsets (Kafka's deleteRecordsOnLeader).

Offset -1 means the high watermark. Errors: UNKNOWN_TOPIC_OR_PARTITION; INVALID_TOPIC_EXCEPTION
for internal topics unless the client id is `__admin_client`; POLICY_VIOLATION when the
topic's cleanup.policy does not include delete; OFFSET_OUT_OF_RANGE below 0 or above the high
watermark. low_watermark is the new log start offset, -1 on error.
"""

from __future__ import annotations

from typing import Any

from broker.apis.produce import ADMIN_CLIENT_ID
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.topics.catalog import INTERNAL_TOPICS
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode
from storage.errors import LogError

DeleteRecordsResponse = lazy_response(ApiKey.DELETE_RECORDS)

_Topic = DeleteRecordsResponse.DeleteRecordsTopicResult
_Partition = _Topic.DeleteRecordsPartitionResult
HIGH_WATERMARK = -1


def _part(index: int, code: int = 0, low_watermark: int = -1) -> Any:
    return _Partition(partition_index=index, low_watermark=low_watermark, error_code=code)


def _error(request: Any, code: ErrorCode) -> Any:
    topics = [_Topic(name=t.name, partitions=[_part(p.partition_index, code) for p in t.partitions]) for t in request.topics]
    return DeleteRecordsResponse(version=request.version, throttle_time_ms=0, topics=topics)


@api(ApiKey.DELETE_RECORDS, 0, 2, error_response=_error)
def handle_delete_records(ctx: RequestContext, request: Any) -> Any:
    logs = ctx.broker.logs
    topics_mgr = ctx.broker.topics
    internal_allowed = ctx.client_id == ADMIN_CLIENT_ID
    out = []
    deletable = authz.filter_allowed(ctx, authz.Op.DELETE, authz.TOPIC, (t.name for t in request.topics))
    for t in request.topics:
        parts = []
        known = topics_mgr.get(t.name) is not None
        for p in t.partitions:
            log = logs.get(t.name, p.partition_index) if known else None
            if t.name not in deletable:  # DELETE on the topic, before anything else (KafkaApis)
                parts.append(_part(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif log is None:
                parts.append(_part(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            elif t.name in INTERNAL_TOPICS and not internal_allowed:
                parts.append(_part(p.partition_index, ErrorCode.INVALID_TOPIC_EXCEPTION))
            elif not log.config.delete:
                parts.append(_part(p.partition_index, ErrorCode.POLICY_VIOLATION))
            else:
                offset = log.high_watermark if p.offset == HIGH_WATERMARK else p.offset
                try:
                    parts.append(_part(p.partition_index, 0, log.delete_records(offset)))
                except LogError as exc:
                    parts.append(_part(p.partition_index, exc.code))
        out.append(_Topic(name=t.name, partitions=parts))
    return DeleteRecordsResponse(version=ctx.api_version, throttle_time_ms=0, topics=out)
