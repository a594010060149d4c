"""SyncGroup v0-v5 (SG-1..SG-7). Followers park until the leader's assignment is stored."""

from __future__ import annotations

import asyncio
from typing import Any

from broker.coordinator.classic import SyncResult
from broker.coordinator.rebalance import SyncRequest
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError, map_append_error
from broker.security import authorize as authz
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

SyncGroupResponse = lazy_response(ApiKey.SYNC_GROUP)


def encode(version: int, r: SyncResult) -> Any:
    return SyncGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=r.error,
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name,
        assignment=r.assignment,
    )


def _error(request: Any, code: ErrorCode) -> Any:
    return encode(request.version, SyncResult(code))


@api(ApiKey.SYNC_GROUP, 0, 5, error_response=_error)
def handle_sync_group(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return encode(version, SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))  # SG-1
    if ctx.broker.authorizer is not None and not authz.allowed(ctx, authz.Op.READ, authz.GROUP, request.group_id):
        return _error(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = ctx.broker.coordinator
    if not coordinator.active:
        return encode(version, SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    if not request.group_id:
        return encode(version, SyncResult(ErrorCode.INVALID_GROUP_ID))
    sync = SyncRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 3 else None,
        generation_id=request.generation_id,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    try:
        future = coordinator.shard_for(request.group_id).classic.sync(sync)
    except CoordinatorError as exc:
        return encode(version, SyncResult(map_append_error(exc.code)))
    if future.done():
        return encode(version, future.result())
    return _parked(version, future)


async def _parked(version: int, future: asyncio.Future[SyncResult]) -> Any:
    return encode(version, await asyncio.shield(future))
