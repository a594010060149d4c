"""OffsetFetch v1-v9 (OF-1..OF-8): v8+ batches groups; null topics mean every partition.

v0 is not served, as in Kafka 4 (OF-1). For v1, which carries no top-level error, a group
error is put on every requested partition (the legacy behaviour OF-7 recommends).
"""

from __future__ import annotations

from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError
from broker.security import authorize as authz
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

OffsetFetchResponse = lazy_response(ApiKey.OFFSET_FETCH)

_OldTopic = OffsetFetchResponse.OffsetFetchResponseTopic
_OldPartition = _OldTopic.OffsetFetchResponsePartition
_Group = OffsetFetchResponse.OffsetFetchResponseGroup
_Topics = _Group.OffsetFetchResponseTopics
_Partitions = _Topics.OffsetFetchResponsePartitions

Rows = list[tuple[str, list[tuple[int, int, int, str, ErrorCode]]]]


def _fetch_group(
    ctx: RequestContext,
    group_id: str | None,
    topics: list[tuple[str, list[int]]] | None,
    require_stable: bool,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> tuple[ErrorCode, Rows]:
    if group_id is None:
        return ErrorCode.INVALID_GROUP_ID, []
    denied: list[tuple[str, list[int]]] = []
    checking = ctx.broker.authorizer is not None
    if checking:  # DESCRIBE on the group, then on each topic (KafkaApis' order)
        if not authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, group_id):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
        if topics is not None:
            described = authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, (name for name, _p in topics))
            denied = [t for t in topics if t[0] not in described]
            topics = [t for t in topics if t[0] in described]
    try:
        shard = ctx.broker.coordinator.shard_for(group_id)
        rows = shard.fetch_offsets(group_id, topics, require_stable, member_id, member_epoch)
    except CoordinatorError as exc:
        return exc.code, []
    if checking:
        if topics is None:  # every committed topic: those without DESCRIBE are left out
            rows = [r for r in rows if authz.allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, r[0])]
        rows = rows + [(name, [(p, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in parts]) for name, parts in denied]
    return ErrorCode.NONE, rows


def _requested(topics: Any) -> list[tuple[str, list[int]]] | None:
    if topics is None:
        return None
    return [(t.name, list(t.partition_indexes)) for t in topics]


def _error(request: Any, code: ErrorCode) -> Any:
    version = request.version
    if version >= 8:
        return OffsetFetchResponse(
            version=version, throttle_time_ms=0, groups=[_Group(group_id=g.group_id, topics=[], error_code=code) for g in request.groups]
        )
    return _old_response(version, code, [(t.name, [(p, -1, -1, "", code) for p in t.partition_indexes]) for t in request.topics or []])


def _old_response(version: int, error: ErrorCode, rows: Rows) -> Any:
    topics = [
        _OldTopic(
            name=name,
            partitions=[
                _OldPartition(partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m, error_code=err)
                for p, o, e, m, err in parts
            ],
        )
        for name, parts in rows
    ]
    return OffsetFetchResponse(version=version, throttle_time_ms=0, topics=topics, error_code=error)


@api(ApiKey.OFFSET_FETCH, 1, 9, error_response=_error)
def handle_offset_fetch(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if version >= 8:
        groups = []
        for g in request.groups:
            member_id, member_epoch = (g.member_id, g.member_epoch) if version >= 9 else (None, -1)
            error, rows = _fetch_group(ctx, g.group_id, _requested(g.topics), request.require_stable, member_id, member_epoch)
            topics = [
                _Topics(
                    name=name,
                    partitions=[
                        _Partitions(partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m, error_code=err)
                        for p, o, e, m, err in parts
                    ],
                )
                for name, parts in rows
            ]
            groups.append(_Group(group_id=g.group_id, topics=topics if error is ErrorCode.NONE else [], error_code=error))
        return OffsetFetchResponse(version=version, throttle_time_ms=0, groups=groups)
    requested = _requested(request.topics) if version >= 2 else _requested(request.topics or [])
    error, rows = _fetch_group(ctx, request.group_id, requested, version >= 7 and request.require_stable)
    if error is not ErrorCode.NONE:
        if version >= 2:
            return _old_response(version, error, [])
        # v1 has no top-level error: every requested partition carries it (OF-7).
        return _old_response(version, error, [(name, [(p, -1, -1, "", error) for p in parts]) for name, parts in requested or []])
    return _old_response(version, ErrorCode.NONE, rows)
