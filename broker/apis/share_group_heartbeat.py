"""ShareGroupHeartbeat v1 (KIP-932): a share group member joins (epoch 0), heartbeats, and leaves
(epoch -1); the answer carries its epoch, the heartbeat interval and, when it changed, its
assignment.

KafkaApis and GroupCoordinatorService check, in this order: share groups enabled, READ on the
group, a member id (1 to 36 characters), DESCRIBE on the subscribed topics, the coordinator
running, then the request's shape (MemberId, GroupId and RackId not blank, SubscribedTopicNames
set when joining, an epoch of at least -1); everything else is the group coordinator's shard
(broker/coordinator/share/manager.py).
"""

from __future__ import annotations

from typing import Any

from broker.apis.heartbeat_answers import coordinator_error, when_durable
from broker.apis.share_common import share_groups_disabled
from broker.coordinator.share.manager import ShareHeartbeat
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError
from broker.security import authorize as authz
from broker.share.acknowledgements import member_id_valid
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

ShareGroupHeartbeatResponse = lazy_response(ApiKey.SHARE_GROUP_HEARTBEAT)
_Assignment = ShareGroupHeartbeatResponse.Assignment
_TopicPartitions = _Assignment.TopicPartitions


def _response(version: int, code: ErrorCode, message: str | None = None, **fields: Any) -> Any:
    assignment = fields.get("assignment")
    return ShareGroupHeartbeatResponse(
        version=version,
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        member_id=fields.get("member_id"),
        member_epoch=fields.get("member_epoch", 0),
        heartbeat_interval_ms=fields.get("heartbeat_interval_ms", 0),
        assignment=None
        if assignment is None
        else _Assignment(
            topic_partitions=[
                _TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda kv: kv[0].bytes)
            ]
        ),
    )


def _error(request: Any, code: ErrorCode) -> Any:
    """ShareGroupHeartbeatRequest.getErrorResponse: the code alone."""
    return _response(request.version, code)


def _blank(text: str | None) -> bool:
    return text is not None and text.strip() == ""


def validate(request: Any) -> str | None:
    """throwIfShareGroupHeartbeatRequestIsInvalid: the INVALID_REQUEST message, or None."""
    if _blank(request.member_id):
        return "MemberId can't be empty."
    if _blank(request.group_id):
        return "GroupId can't be empty."
    if _blank(request.rack_id):
        return "RackId can't be empty."
    if request.member_epoch == 0:
        if not request.subscribed_topic_names:
            return "SubscribedTopicNames must be set in first request."
    elif request.member_epoch < -1:
        return "MemberEpoch is invalid."
    return None


@api(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1, error_response=_error)
def handle_share_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    broker = ctx.broker
    if share_groups_disabled(broker):
        return _error(request, ErrorCode.UNSUPPORTED_VERSION)
    if not authz.allowed(ctx, authz.Op.READ, authz.GROUP, request.group_id or ""):
        return _error(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not member_id_valid(request.member_id):
        return _error(request, ErrorCode.INVALID_REQUEST)
    subscribed = set(request.subscribed_topic_names or ())
    if subscribed and len(authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, subscribed)) < len(subscribed):
        return _response(version, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    coordinator = broker.coordinator
    if not coordinator.active:
        return _response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    invalid = validate(request)
    if invalid is not None:
        return _response(version, ErrorCode.INVALID_REQUEST, invalid)
    try:
        shard = coordinator.shard_for(request.group_id)
        result, waiter = shard.share.heartbeat(
            ShareHeartbeat(
                group_id=request.group_id,
                member_id=request.member_id,
                member_epoch=request.member_epoch,
                rack_id=request.rack_id,
                subscribed_topic_names=list(request.subscribed_topic_names) if request.subscribed_topic_names is not None else None,
                client_id=ctx.client_id or "",
                client_host=ctx.client_host,
            )
        )
    except CoordinatorError as exc:
        return _response(version, *coordinator_error(exc))
    response = _response(
        version,
        ErrorCode.NONE,
        None,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=result.assignment,
    )
    return when_durable(response, waiter, lambda: _response(version, ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR.message))
