"""Heartbeat v0-v4 (HB-1..HB-4); a loading shard is answered NONE (GE-2)."""

from __future__ import annotations

from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError
from broker.security import authorize as authz
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

HeartbeatResponse = lazy_response(ApiKey.HEARTBEAT)


def _response(version: int, code: ErrorCode) -> Any:
    return HeartbeatResponse(version=version, throttle_time_ms=0, error_code=code)


def _error(request: Any, code: ErrorCode) -> Any:
    return _response(request.version, code)


@api(ApiKey.HEARTBEAT, 0, 4, error_response=_error)
def handle_heartbeat(ctx: RequestContext, request: Any) -> Any:
    if ctx.broker.authorizer is not None and not authz.allowed(ctx, authz.Op.READ, authz.GROUP, request.group_id):
        return _error(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    version = ctx.api_version
    coordinator = ctx.broker.coordinator
    if not coordinator.active:
        return _response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not request.group_id:
        return _response(version, ErrorCode.INVALID_GROUP_ID)
    try:
        shard = coordinator.shard_for(request.group_id)
    except CoordinatorError as exc:
        if exc.code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return _response(version, ErrorCode.NONE)  # GE-2: "blindly respond"
        return _response(version, exc.code)
    instance_id = request.group_instance_id if version >= 3 else None
    return _response(version, shard.classic.heartbeat(request.group_id, request.member_id, instance_id, request.generation_id))
