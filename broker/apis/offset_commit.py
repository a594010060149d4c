"""OffsetCommit v0-v9 (OC-1..OC-8).

v0 is treated as v1 with generation -1 and an empty member id (OC-1). Topics and partitions
unknown to the broker are answered by this layer and never reach the coordinator (OC-2).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from kafka.protocol.consumer import OffsetCommitResponse

from broker.context import RequestContext
from broker.coordinator.errors import CoordinatorError, map_append_error
from broker.coordinator.shard import PartitionCommit
from broker.registry import api
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

_Topic = OffsetCommitResponse.OffsetCommitResponseTopic
_Partition = _Topic.OffsetCommitResponsePartition


def _response(version: int, results: dict[str, list[tuple[int, int]]]) -> Any:
    topics = [
        _Topic(name=name, partitions=[_Partition(partition_index=p, error_code=e) for p, e in parts]) for name, parts in results.items()
    ]
    return OffsetCommitResponse(version=version, throttle_time_ms=0, topics=topics)


def _error(request: Any, code: ErrorCode) -> Any:
    results: dict[str, list[tuple[int, int]]] = {}
    for topic in request.topics:
        results.setdefault(topic.name, []).extend((p.partition_index, code) for p in topic.partitions)
    return _response(request.version, results)


@api(ApiKey.OFFSET_COMMIT, 0, 9, error_response=_error)
def handle_offset_commit(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    broker = ctx.broker
    topics = broker.topics
    results: dict[str, list[tuple[int, int]]] = {}
    order: list[tuple[str, int]] = []  # where each coordinator result goes
    commits: list[PartitionCommit] = []
    for topic in request.topics:
        name = topic.name
        slot = results.setdefault(name, [])
        known = topics.get(name)
        for p in topic.partitions:
            if known is None or not 0 <= p.partition_index < known.partitions:
                slot.append((p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))  # OC-2
                continue
            order.append((name, len(slot)))
            slot.append((p.partition_index, ErrorCode.NONE))
            commits.append(
                PartitionCommit(
                    name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch if version >= 6 else -1,
                    p.committed_metadata,
                    p.commit_timestamp if version == 1 else -1,
                )
            )
    if not commits:
        return _response(version, results)

    def fill(codes: list[ErrorCode] | ErrorCode) -> Any:
        for i, (name, index) in enumerate(order):
            code = codes if isinstance(codes, ErrorCode) else codes[i]
            slot = results[name]
            slot[index] = (slot[index][0], code)
        return _response(version, results)

    group_id = request.group_id
    if group_id is None:
        return fill(ErrorCode.INVALID_GROUP_ID)  # GE-4: "" is a legal group here
    generation = request.generation_id_or_member_epoch if version >= 1 else -1
    member_id = request.member_id if version >= 1 else ""
    instance_id = request.group_instance_id if version >= 7 else None
    retention = request.retention_time_ms if 2 <= version <= 4 else -1
    try:
        shard = broker.coordinator.shard_for(group_id)
        codes, waiter = shard.commit_offsets(group_id, generation, member_id, instance_id, retention, version, commits)
    except CoordinatorError as exc:
        return fill(map_append_error(exc.code))
    if waiter is None:
        return fill(codes)
    return _after(waiter, fill, codes)


async def _after(waiter: Awaitable[Any], fill: Any, codes: list[ErrorCode]) -> Any:
    try:
        await waiter
    except Exception:
        return fill(ErrorCode.NOT_COORDINATOR)  # the append could not be made durable (GE-3)
    return fill(codes)
