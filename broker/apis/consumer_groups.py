"""ConsumerGroupHeartbeat v0-v1 (KH-1..KH-16) and ConsumerGroupDescribe v0-v1 (KD-1): KIP-848.

KH-2 is checked here, before the request is routed to its shard (Kafka 4.0 does the same);
everything else is the shard's (broker/coordinator/consumer/manager.py). A regular expression the
broker has not compiled yet is compiled in the background thread first (compiling a large one takes
milliseconds the event loop owes every other client); the shard then checks it where Kafka does.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from broker.coordinator.consumer import regex as regexes
from broker.coordinator.consumer.group import ConsumerGroup, Partitions
from broker.coordinator.consumer.manager import LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, HeartbeatRequest
from broker.coordinator.describe_order import CoordinatorOrder
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError, map_append_error
from broker.runtime.executor import run_in_background
from broker.security import authorize as authz
from broker.security.acls import ResourceType, all_operations
from protocol import kip848_codec
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

ConsumerGroupDescribeResponse = lazy_response(ApiKey.CONSUMER_GROUP_DESCRIBE)
ConsumerGroupHeartbeatResponse = lazy_response(ApiKey.CONSUMER_GROUP_HEARTBEAT)

_Described = ConsumerGroupDescribeResponse.DescribedGroup
_Member = _Described.Member
_Assignment = _Member.Assignment
_Topic = _Assignment.TopicPartitions

INT32_MIN = -(2**31)
# What an authorizer-less Kafka reports for a group: every operation a GROUP supports, as int32 bits.
GROUP_OPERATIONS_BITS = sum(1 << op for op in all_operations(ResourceType.GROUP))
NO_TOPIC_ID = uuid.UUID(int=0)


def _hb_response(version: int, code: ErrorCode, message: str | None = None, **fields: Any) -> bytes:
    """The encoded response body (kip848_codec writes what the schema codec would)."""
    assignment = fields.get("assignment")
    return kip848_codec.encode_response(
        int(code),
        message,
        fields.get("member_id"),
        fields.get("member_epoch", 0),
        fields.get("heartbeat_interval_ms", 0),
        None if assignment is None else sorted(((t, sorted(ps)) for t, ps in assignment.items()), key=lambda kv: kv[0].bytes),
    )


def _hb_error(request: Any, code: ErrorCode) -> Any:
    return ConsumerGroupHeartbeatResponse(
        version=request.version,
        throttle_time_ms=0,
        error_code=code,
        error_message=code.message,
        member_id=None,
        member_epoch=0,
        heartbeat_interval_ms=0,
        assignment=None,
    )


def _failed(ctx: RequestContext, code: ErrorCode, message: str | None) -> bytes:
    ctx.errors = [int(code)]  # the answer's error, for the request metrics (the body is encoded here)
    return _hb_response(ctx.api_version, code, message)


def _blank(text: str | None) -> bool:
    return text is not None and text.strip() == ""


def validate_heartbeat(request: Any, version: int, assignor_names: list[str]) -> tuple[ErrorCode, str] | None:
    """KH-2, in Kafka 4.4's order (GroupCoordinatorService): the member id first (required from
    v1, KIP-1082, and at any version to heartbeat or leave), then the group, instance and rack
    ids, then what the epoch asks for; KIP-848's regex from v1."""
    epoch = request.member_epoch
    regex = request.subscribed_topic_regex if version >= 1 else None
    invalid = ErrorCode.INVALID_REQUEST
    if (version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and request.member_id.strip() == "":
        return invalid, "MemberId can't be empty."
    if _blank(request.group_id):
        return invalid, "GroupId can't be empty."
    if _blank(request.instance_id):
        return invalid, "InstanceId can't be empty."
    if _blank(request.rack_id):
        return invalid, "RackId can't be empty."
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            return invalid, "RebalanceTimeoutMs must be provided in first request."
        if request.topic_partitions is None or request.topic_partitions:
            return invalid, "TopicPartitions must be empty when (re-)joining."
        if request.subscribed_topic_names is None and regex is None:
            return invalid, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            return invalid, "InstanceId can't be null."
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return invalid, "MemberEpoch is invalid."
    if request.server_assignor is not None and request.server_assignor not in assignor_names:
        return (
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: {', '.join(assignor_names)}.",
        )
    return None


def _compile_quietly(regex: str) -> None:
    try:
        regexes.compile_regex(regex)
    except regexes.InvalidRegex:
        pass  # cached as invalid: the shard answers INVALID_REGULAR_EXPRESSION where Kafka checks it


@api(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, error_response=_hb_error, decoder=kip848_codec.decode_request)
def handle_consumer_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if not ctx.broker.config.consumer_protocol_enabled:
        return _failed(ctx, ErrorCode.UNSUPPORTED_VERSION, ErrorCode.UNSUPPORTED_VERSION.message)  # KH-1
    if ctx.broker.authorizer is not None:  # READ on the group, then DESCRIBE on each subscribed topic
        if not authz.allowed(ctx, authz.Op.READ, authz.GROUP, request.group_id or ""):
            return _failed(ctx, ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED.message)
        subscribed = set(request.subscribed_topic_names or ())
        if subscribed and len(authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, subscribed)) < len(subscribed):
            return _failed(ctx, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    coordinator = ctx.broker.coordinator
    if not coordinator.active:
        return _failed(ctx, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE.message)
    if (
        request.member_epoch > 0
        and request.instance_id is None
        and request.rack_id is None
        and request.rebalance_timeout_ms == -1
        and request.subscribed_topic_names is None
        and request.subscribed_topic_regex is None
        and request.server_assignor is None
        and request.member_id.strip()
        and request.group_id.strip()
    ):
        # The steady heartbeat of a reconciled member: KH-2 has nothing to check beyond the ids.
        try:
            shard = coordinator.shard_for(request.group_id)
        except CoordinatorError as exc:
            return _failed(ctx, exc.code, exc.code.message)
        steady = shard.consumer.steady(request.group_id, request.member_id, request.member_epoch, ctx.client_id or "", ctx.client_host)
        if steady is not None:
            coordinator.stats.consumer_heartbeats += 1
            return kip848_codec.encode_response(0, None, steady.member_id, steady.member_epoch, steady.heartbeat_interval_ms, None)
    names = ctx.broker.config.group_consumer_assignors.split(",")
    invalid = validate_heartbeat(request, version, names)
    if invalid is not None:
        return _failed(ctx, invalid[0], invalid[1])
    owned = None
    if request.topic_partitions is not None:
        owned = [(tp.topic_id or NO_TOPIC_ID, list(tp.partitions)) for tp in request.topic_partitions]
    describable: Callable[[set[str]], set[str]] | None = None
    if ctx.broker.authorizer is not None:  # Kafka keeps the topics of a resolved regex the member may describe
        describable = lambda names: set(authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, names))  # noqa: E731

    req = HeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=list(request.subscribed_topic_names) if request.subscribed_topic_names is not None else None,
        subscribed_topic_regex=request.subscribed_topic_regex if version >= 1 else None,
        server_assignor=request.server_assignor,
        topic_partitions=owned,
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
        api_version=version,
        describable=describable,
    )
    regex = req.subscribed_topic_regex
    if regex and regexes.cached(regex) is None:

        async def compiled_first() -> Any:
            await run_in_background(lambda: _compile_quietly(regex))
            answer = _heartbeat(ctx, coordinator, req)
            return await answer if not isinstance(answer, bytes) else answer

        return compiled_first()
    return _heartbeat(ctx, coordinator, req)


def _heartbeat(ctx: RequestContext, coordinator: Any, req: HeartbeatRequest) -> Any:
    """The request's way through its shard, once its expression (if any) is compiled."""
    try:
        shard = coordinator.shard_for(req.group_id)
    except CoordinatorError as exc:
        return _failed(ctx, exc.code, exc.code.message)
    coordinator.stats.consumer_heartbeats += 1
    try:
        result, waiter = shard.consumer.heartbeat(req)
    except CoordinatorError as exc:
        code = map_append_error(exc.code)
        message = exc.args[0] if exc.args and exc.args[0] != exc.code.name and code is exc.code else code.message
        return _failed(ctx, code, message)
    response = _hb_response(
        ctx.api_version,
        ErrorCode.NONE,
        None,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=result.assignment,
    )
    if waiter is None:
        return response

    async def durable() -> Any:
        try:
            await waiter
        except Exception:
            return _failed(ctx, ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR.message)
        return response

    return durable()


# -- ConsumerGroupDescribe ------------------------------------------------------------------


def _describe_error(request: Any, code: ErrorCode) -> Any:
    return ConsumerGroupDescribeResponse(
        version=request.version,
        throttle_time_ms=0,
        groups=[_error_group(g or "", code, code.message) for g in request.group_ids],
    )


def _error_group(group_id: str, code: ErrorCode, message: str | None) -> Any:
    return _Described(
        error_code=code,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=[],
        authorized_operations=INT32_MIN,
    )


def describe_group(broker: Any, group: ConsumerGroup, include_ops: bool, default_assignor: str) -> Any:
    """KD-1: one described consumer group."""
    topics = broker.topics

    def assignment(parts: Partitions) -> Any:
        out = []
        for topic_id, ps in sorted(parts.items(), key=lambda kv: kv[0].bytes):
            topic = topics.get_by_id(topic_id)
            if topic is not None:
                out.append(_Topic(topic_id=topic_id, topic_name=topic.name, partitions=sorted(ps)))
        return _Assignment(topic_partitions=out)

    members = [
        _Member(
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex or "",  # Kafka: "" for no regex
            assignment=assignment(m.assigned),
            target_assignment=assignment(group.target.get(m.member_id, {})),
            member_type=0 if m.uses_classic_protocol else 1,
        )
        for m in group.members.values()
    ]
    return _Described(
        error_code=ErrorCode.NONE,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.preferred_assignor(default_assignor),
        members=members,
        authorized_operations=GROUP_OPERATIONS_BITS if include_ops else INT32_MIN,
    )


@api(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, error_response=_describe_error)
def handle_consumer_group_describe(ctx: RequestContext, request: Any) -> Any:
    if not ctx.broker.config.consumer_protocol_enabled:
        return _describe_error(request, ErrorCode.UNSUPPORTED_VERSION)  # KH-1
    coordinator = ctx.broker.coordinator
    default = ctx.broker.config.group_consumer_assignors.split(",")[0]
    described: CoordinatorOrder[Any] = CoordinatorOrder(coordinator)
    checking = ctx.broker.authorizer is not None
    denied = []  # answered first, as KafkaApis adds them before the coordinator's results
    for group_id in request.group_ids:  # one answer per requested id, a repeated one too (as Kafka)
        if checking and not authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, group_id or ""):
            denied.append(_error_group(group_id or "", ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
            continue
        if not coordinator.active:  # GE-5: checked before the group id, so a blank id too; no message
            described.refused(_error_group(group_id or "", ErrorCode.COORDINATOR_NOT_AVAILABLE, None))
            continue
        if not group_id:
            described.refused(_error_group("", ErrorCode.INVALID_GROUP_ID, None))  # Kafka sets no message here
            continue
        try:
            shard = coordinator.shard_for(group_id)
        except CoordinatorError as exc:
            described.routed(group_id, _error_group(group_id, exc.code, exc.code.message))
            continue
        group = shard.consumer_groups.get(group_id)
        if group is None:
            other = group_id in shard.groups or group_id in shard.streams_groups
            message = f"Group {group_id} is not a consumer group." if other else f"Group {group_id} not found."
            described.routed(group_id, _error_group(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message))
            continue
        described.routed(group_id, describe_group(ctx.broker, group, request.include_authorized_operations, default))
    groups = described.answers()  # in Kafka's order: by coordinator partition
    if checking:
        groups = [_authorized_view(ctx, d, request.include_authorized_operations) for d in groups]
    return ConsumerGroupDescribeResponse(version=ctx.api_version, throttle_time_ms=0, groups=denied + groups)


def _authorized_view(ctx: RequestContext, d: Any, include_ops: bool) -> Any:
    """With an authorizer: the group's operations from it, and TOPIC_AUTHORIZATION_FAILED for a
    group whose (target) assignment names a topic the principal may not describe (KafkaApis)."""
    if d.error_code:
        return d
    if include_ops:
        d.authorized_operations = sum(1 << op for op in authz.operations_or_all(ctx, authz.GROUP, d.group_id))
    names = {t.topic_name for m in d.members for a in (m.assignment, m.target_assignment) for t in a.topic_partitions}
    if names and len(authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, names)) < len(names):
        return _error_group(
            d.group_id,
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "The group has described topic(s) that the client is not authorized to describe.",
        )
    return d


__all__ = ["handle_consumer_group_describe", "handle_consumer_group_heartbeat", "validate_heartbeat"]
