"""OffsetDelete v0 (OD-1..OD-3)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError, map_append_error
from broker.security import authorize as authz
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

OffsetDeleteResponse = lazy_response(ApiKey.OFFSET_DELETE)

_Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
_Partition = _Topic.OffsetDeleteResponsePartition


def _response(error: ErrorCode, results: list[tuple[str, list[tuple[int, int]]]]) -> Any:
    topics = [_Topic(name=name, partitions=[_Partition(partition_index=p, error_code=e) for p, e in parts]) for name, parts in results]
    return OffsetDeleteResponse(version=0, error_code=error, throttle_time_ms=0, topics=topics)


def _error(request: Any, code: ErrorCode) -> Any:
    return _response(code, [])


@api(ApiKey.OFFSET_DELETE, 0, 0, error_response=_error)
def handle_offset_delete(ctx: RequestContext, request: Any) -> Any:
    group_id = request.group_id
    denied: set[str] = set()
    if ctx.broker.authorizer is not None:  # DELETE on the group, then READ on each topic
        if not authz.allowed(ctx, authz.Op.DELETE, authz.GROUP, group_id or ""):
            return _response(ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
        names = {t.name for t in request.topics}
        denied = names - authz.filter_allowed(ctx, authz.Op.READ, authz.TOPIC, names)
    if not group_id:
        return _response(ErrorCode.INVALID_GROUP_ID, [])  # GE-4: null or ""
    topics = ctx.broker.topics
    unknown: dict[str, list[tuple[int, int]]] = {}
    wanted: list[tuple[str, list[int]]] = []
    for t in request.topics:
        known = topics.get(t.name)
        valid = []
        for p in t.partitions:
            if t.name in denied:
                unknown.setdefault(t.name, []).append((p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif known is None or not 0 <= p.partition_index < known.partitions:
                unknown.setdefault(t.name, []).append((p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))  # OD-3
            else:
                valid.append(p.partition_index)
        if valid:
            wanted.append((t.name, valid))
    try:
        shard = ctx.broker.coordinator.shard_for(group_id)
        results, waiter = shard.delete_offsets(group_id, wanted)
    except CoordinatorError as exc:
        return _response(map_append_error(exc.code), [])  # a top-level error carries no partitions (OD-1)

    def build() -> Any:
        merged: dict[str, list[tuple[int, int]]] = {name: list(parts) for name, parts in results}
        for name, parts in unknown.items():
            merged.setdefault(name, []).extend(parts)
        return _response(ErrorCode.NONE, list(merged.items()))

    if waiter is None:
        return build()
    return _after(waiter, build)


async def _after(waiter: Awaitable[Any], build: Any) -> Any:
    try:
        await waiter
    except Exception:
        return _response(ErrorCode.NOT_COORDINATOR, [])
    return build()
