"""LeaveGroup v0-v5 (LG-1..LG-6); v0-v2 are handled as one-member v3 requests."""

from __future__ import annotations

from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError
from broker.security import authorize as authz
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

LeaveGroupResponse = lazy_response(ApiKey.LEAVE_GROUP)

_Member = LeaveGroupResponse.MemberResponse


def _response(version: int, top: ErrorCode, members: list[tuple[str, str | None, ErrorCode]]) -> Any:
    if version < 3:
        # LG-6: the top-level error, else the first member error, else NONE.
        code = top if top is not ErrorCode.NONE else next((e for _, _, e in members if e is not ErrorCode.NONE), ErrorCode.NONE)
        return LeaveGroupResponse(version=version, throttle_time_ms=0, error_code=code)
    return LeaveGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=top,
        members=[_Member(member_id=m, group_instance_id=i, error_code=e) for m, i, e in members],
    )


def _identities(request: Any, version: int) -> list[tuple[str, str | None, str | None]]:
    if version < 3:
        return [(request.member_id, None, None)]  # LG-1
    return [(m.member_id, m.group_instance_id, m.reason if version >= 5 else None) for m in request.members]


def _error(request: Any, code: ErrorCode) -> Any:
    return _response(request.version, code, [])


@api(ApiKey.LEAVE_GROUP, 0, 5, error_response=_error)
def handle_leave_group(ctx: RequestContext, request: Any) -> Any:
    if ctx.broker.authorizer is not None and not authz.allowed(ctx, authz.Op.READ, authz.GROUP, request.group_id):
        return _error(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    version = ctx.api_version
    coordinator = ctx.broker.coordinator
    if not coordinator.active:
        return _response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE, [])
    if not request.group_id:
        return _response(version, ErrorCode.INVALID_GROUP_ID, [])
    members = _identities(request, version)
    try:
        shard = coordinator.shard_for(request.group_id)
    except CoordinatorError as exc:
        return _response(version, exc.code, [])
    top, results = shard.classic.leave(request.group_id, members)
    return _response(version, top, results)
