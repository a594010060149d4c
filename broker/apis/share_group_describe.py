"""ShareGroupDescribe v1 (KIP-932): share groups, their epochs, assignor and members with their
subscriptions and assignments.

KafkaApis' order: share groups enabled (else every group UNSUPPORTED_VERSION), DESCRIBE on each
group (denied groups are answered first), then each group from its coordinator shard: an empty
id is INVALID_GROUP_ID, an unknown one or one of another type GROUP_ID_NOT_FOUND with Kafka's
message. With an authorizer, a group whose assignment names a topic the principal may not
describe is answered TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from broker.apis.share_common import share_groups_disabled
from broker.coordinator.describe_order import coordinator_partition_order
from broker.coordinator.share import assignor
from broker.coordinator.share.group import ShareGroup
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError
from broker.security import authorize as authz
from broker.security.acls import ResourceType, all_operations
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

ShareGroupDescribeResponse = lazy_response(ApiKey.SHARE_GROUP_DESCRIBE)
_Described = ShareGroupDescribeResponse.DescribedGroup
_Member = _Described.Member
_Assignment = _Member.Assignment
_Topic = _Assignment.TopicPartitions

INT32_MIN = -(2**31)
GROUP_OPERATIONS_BITS = sum(1 << op for op in all_operations(ResourceType.GROUP))


def _error_group(group_id: str, code: ErrorCode, message: str | None = None) -> Any:
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


def _error(request: Any, code: ErrorCode) -> Any:
    """ShareGroupDescribeRequest.getErrorResponse: every group with the code, no message."""
    return ShareGroupDescribeResponse(
        version=request.version, throttle_time_ms=0, groups=[_error_group(g or "", code) for g in request.group_ids]
    )


def describe_group(broker: Any, group: ShareGroup) -> Any:
    """ShareGroup.asDescribedGroup."""
    topics = broker.topics
    members = []
    for m in group.members.values():
        parts = []
        for topic_id, ps in sorted(m.assigned.items(), key=lambda kv: kv[0].bytes):
            topic = topics.get_by_id(topic_id)
            if topic is not None:
                parts.append(_Topic(topic_id=topic_id, topic_name=topic.name, partitions=sorted(ps)))
        members.append(
            _Member(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=sorted(m.subscribed_topic_names),
                assignment=_Assignment(topic_partitions=parts),
            )
        )
    return _Described(
        error_code=ErrorCode.NONE,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=assignor.NAME,
        members=members,
        authorized_operations=INT32_MIN,
    )


@api(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1, error_response=_error)
def handle_share_group_describe(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    if share_groups_disabled(broker):
        return _error(request, ErrorCode.UNSUPPORTED_VERSION)
    coordinator = broker.coordinator
    denied = []
    invalid = []  # answered before the others, as GroupCoordinatorService completes them first
    by_partition: dict[int, list[Any]] = {}  # the others, grouped by coordinator partition
    for group_id in request.group_ids:
        if not authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, group_id or ""):
            denied.append(_error_group(group_id or "", ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        if not coordinator.active:
            invalid.append(_error_group(group_id or "", ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE.message))
            continue
        if not group_id:
            invalid.append(_error_group("", ErrorCode.INVALID_GROUP_ID))
            continue
        described = by_partition.setdefault(coordinator.partition_for(group_id), [])
        try:
            shard = coordinator.shard_for(group_id)
        except CoordinatorError as exc:
            described.append(_error_group(group_id, exc.code, exc.code.message))
            continue
        group = shard.share_groups.get(group_id)
        if group is None:
            other = group_id in shard.groups or group_id in shard.consumer_groups or shard.share._other_type(group_id)
            described.append(
                _error_group(
                    group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} {'is not a share group' if other else 'not found'}."
                )
            )
            continue
        d = describe_group(broker, group)
        if request.include_authorized_operations:
            ops = authz.operations(ctx, authz.GROUP, group_id)
            d.authorized_operations = GROUP_OPERATIONS_BITS if ops is None else sum(1 << op for op in ops)
        described.append(d)
    order = coordinator_partition_order(coordinator.topic_name, by_partition)
    groups = denied + invalid + [g for p in order for g in by_partition[p]]
    if broker.authorizer is not None:
        names = {t.topic_name for g in groups for m in g.members for t in m.assignment.topic_partitions}
        allowed = authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, names)
        groups = [
            _error_group(
                g.group_id,
                ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                "The group has described topic(s) that the client is not authorized to describe.",
            )
            if any(t.topic_name not in allowed for m in g.members for t in m.assignment.topic_partitions)
            else g
            for g in groups
        ]
    return ShareGroupDescribeResponse(version=ctx.api_version, throttle_time_ms=0, groups=groups)
