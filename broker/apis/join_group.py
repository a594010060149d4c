"""JoinGroup v0-v9 (JG-1..JG-19). The response may park until the join phase completes.

The bound on a member's protocol metadata (issue 11): Kafka has no explicit one. It holds
whatever fits in a request (socket.request.max.bytes), and the group's metadata record, which
carries every member's metadata for the chosen protocol, must fit the offsets topic's
max.message.bytes; a member over it fails the leader's SyncGroup with UNKNOWN_SERVER_ERROR
(a too-large record, GE-3) and the group rebalances again, forever. kaflet refuses such a
member at JoinGroup with that same error, before the group holds its metadata.
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker.coordinator.classic import JoinResult
from broker.coordinator.rebalance import JoinRequest
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError, map_append_error
from broker.security import authorize as authz
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

JoinGroupResponse = lazy_response(ApiKey.JOIN_GROUP)

_Member = JoinGroupResponse.JoinGroupResponseMember


def encode(version: int, r: JoinResult) -> Any:
    """JG-18: below v7 a null protocol name is sent as ""; from v7 an empty one as null."""
    protocol_name = r.protocol_name
    if version < 7:
        protocol_name = protocol_name or ""
    elif protocol_name == "":
        protocol_name = None
    return JoinGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=r.error,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        protocol_name=protocol_name,
        leader=r.leader,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=[_Member(member_id=m, group_instance_id=i, metadata=meta) for m, i, meta in r.members],
    )


def _error(request: Any, code: ErrorCode) -> Any:
    return encode(request.version, JoinResult(code))


def _protocol_set(protocols: Any) -> list[tuple[str, bytes]]:
    """A member's protocols as a set of names in the order given, each with its first metadata.
    Kafka keeps a duplicate (ImplicitLinkedHashMultiCollection) and counts it twice, so a lone
    member listing `[range, range]` supports no candidate and its group never completes the
    join; kaflet counts each name once instead (docs/decisions.md)."""
    seen: dict[str, bytes] = {}
    for p in protocols:
        if p.name not in seen:
            seen[p.name] = bytes(p.metadata)
    return list(seen.items())


@api(ApiKey.JOIN_GROUP, 0, 9, error_response=_error)
def handle_join_group(ctx: RequestContext, request: Any) -> Any:
    if ctx.broker.authorizer is not None and not authz.allowed(ctx, authz.Op.READ, authz.GROUP, request.group_id):
        return _error(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    version = ctx.api_version
    broker = ctx.broker
    coordinator = broker.coordinator
    member_id = request.member_id
    if not coordinator.active:
        return encode(version, JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
    if not request.group_id:
        return encode(version, JoinResult(ErrorCode.INVALID_GROUP_ID, member_id=member_id))
    session = request.session_timeout_ms
    if not broker.config.group_min_session_timeout_ms <= session <= broker.config.group_max_session_timeout_ms:
        return encode(version, JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id))  # JG-1
    limit = coordinator.max_batch_bytes
    if any(len(p.metadata) > limit for p in request.protocols):
        # No group metadata record could hold this member: MESSAGE_TOO_LARGE, mapped by GE-3.
        return encode(version, JoinResult(map_append_error(ErrorCode.MESSAGE_TOO_LARGE)))
    join = JoinRequest(
        group_id=request.group_id,
        member_id=member_id,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        session_timeout_ms=session,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else session,  # JG-2
        protocol_type=request.protocol_type,
        protocols=_protocol_set(request.protocols),
        reason=request.reason if version >= 8 else None,
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
        api_version=version,
    )
    try:
        future = coordinator.shard_for(request.group_id).classic.join(join)
    except CoordinatorError as exc:
        # Errors of the coordinator operation carry no member id (Kafka's handleOperationException).
        return encode(version, JoinResult(map_append_error(exc.code)))
    if future.done():
        return encode(version, future.result())
    return _parked(version, future)


async def _parked(version: int, future: asyncio.Future[JoinResult]) -> Any:
    # shield: a client that disconnects must not cancel the member's join future.
    return encode(version, await asyncio.shield(future))
