"""DescribeGroups v0-v6, ListGroups v0-v5, DeleteGroups v0-v2 (DG-1..DG-2, LI-1..LI-4, DL-1..DL-3; KS-28
for streams groups)."""

from __future__ import annotations

from typing import Any

from broker.coordinator.describe_order import CoordinatorOrder, coordinator_partition_order, delete_order, hashset_order
from broker.coordinator.list_order import coordinator_partitions
from broker.coordinator.streams.group import StreamsGroupState
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError, map_append_error
from broker.security import authorize as authz
from broker.security.acls import ResourceType, all_operations
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

DeleteGroupsResponse = lazy_response(ApiKey.DELETE_GROUPS)
DescribeGroupsResponse = lazy_response(ApiKey.DESCRIBE_GROUPS)
ListGroupsResponse = lazy_response(ApiKey.LIST_GROUPS)

_Described = DescribeGroupsResponse.DescribedGroup
_Member = _Described.DescribedGroupMember
_Listed = ListGroupsResponse.ListedGroup
_Deleted = DeleteGroupsResponse.DeletableGroupResult

# What an authorizer-less Kafka reports for a group: every operation a GROUP supports.
GROUP_OPERATIONS = all_operations(ResourceType.GROUP)
GROUP_TYPES = ("classic", "consumer", "share", "streams")


def _failed(code: ErrorCode, group_id: str | None) -> Any:
    """A DescribeGroups answer for a group that could not be described."""
    return _Described(
        error_code=code, group_id=group_id, group_state="", protocol_type="", protocol_data="", members=[], authorized_operations=None
    )


def _describe_error(request: Any, code: ErrorCode) -> Any:
    groups = [_failed(code, g) for g in request.groups]
    return DescribeGroupsResponse(version=request.version, throttle_time_ms=0, groups=groups)


@api(ApiKey.DESCRIBE_GROUPS, 0, 6, error_response=_describe_error)
def handle_describe_groups(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    include_ops = version >= 3 and request.include_authorized_operations
    described: CoordinatorOrder[Any] = CoordinatorOrder(ctx.broker.coordinator)
    checking = ctx.broker.authorizer is not None
    denied = []  # answered first, as KafkaApis adds them before the coordinator's results
    for group_id in request.groups:
        if checking and not authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, group_id or ""):
            denied.append(_failed(ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id))
            continue
        if not ctx.broker.coordinator.active:  # GE-5: checked before the group id, so a null id too
            described.refused(_failed(ErrorCode.COORDINATOR_NOT_AVAILABLE, group_id))
            continue
        if group_id is None:
            described.refused(_failed(ErrorCode.INVALID_GROUP_ID, None))
            continue
        try:
            shard = ctx.broker.coordinator.shard_for(group_id)
            d = shard.describe_group(group_id)
        except CoordinatorError as exc:
            described.routed(group_id, _failed(exc.code, group_id))
            continue
        if version >= 6 and d.state == "Dead":
            # v6 (KIP-1043): a group that is not a classic one is an error, with Kafka's message;
            # before v6 it is described as Dead without one.
            kind = (
                "is not a classic group"
                if group_id in shard.consumer_groups or group_id in shard.streams_groups or group_id in shard.share_groups
                else "not found"
            )
            described.routed(
                group_id,
                _Described(
                    error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                    error_message=f"Group {group_id} {kind}.",
                    group_id=group_id,
                    group_state="Dead",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                    authorized_operations=None,
                ),
            )
            continue
        members = [
            _Member(member_id=m, group_instance_id=i, client_id=c, client_host=h, member_metadata=meta, member_assignment=a)
            for m, i, c, h, meta, a in d.members
        ]
        described.routed(
            group_id,
            _Described(
                error_code=d.error,
                group_id=group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol_data,
                members=members,
                authorized_operations=_group_ops(ctx, group_id, d.error) if include_ops else None,
            ),
        )
    return DescribeGroupsResponse(version=version, throttle_time_ms=0, groups=denied + described.answers())


def _group_ops(ctx: RequestContext, group_id: str, error: int) -> Any:
    """The group's authorized operations: from the authorizer when there is one (only for a group
    described without error, as Kafka), else what an authorizer-less Kafka reports."""
    if error:
        return None
    if ctx.broker.authorizer is None:
        return set(GROUP_OPERATIONS)
    return set(authz.operations_or_all(ctx, authz.GROUP, group_id))


def _list_error(request: Any, code: ErrorCode) -> Any:
    return ListGroupsResponse(version=request.version, throttle_time_ms=0, error_code=code, groups=[])


@api(ApiKey.LIST_GROUPS, 0, 5, error_response=_list_error)
def handle_list_groups(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    coordinator = ctx.broker.coordinator
    if not coordinator.active:
        return _list_error(request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if coordinator.any_loading():
        return _list_error(request, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)  # LI-1
    states = {s.strip().lower() for s in (request.states_filter or [])} if version >= 4 else set()
    types = {t.strip().lower() for t in (request.types_filter or [])} if version >= 5 else set()
    shards = {shard.partition: shard for shard in coordinator.active_shards()}
    listed = []
    for partition in coordinator_partitions(coordinator.topic_name, coordinator.num_partitions):  # LI-4
        shard = shards.get(partition)
        if shard is None:
            continue
        classic, consumer, streams, share = shard.groups, shard.consumer_groups, shard.streams_groups, shard.share_groups
        for group_id in shard.group_table.order():  # every type of group, interleaved
            group: Any = classic.get(group_id)
            if group is not None:
                kind, protocol_type, state = "classic", group.protocol_type or "", group.state.value
            elif (group := consumer.get(group_id)) is not None:  # LI-2: KIP-848 groups
                kind = protocol_type = "consumer"
                state = group.state
            elif (group := streams.get(group_id)) is not None:  # KS-28: KIP-1071 groups
                kind = protocol_type = "streams"
                state = group.state
            elif (group := share.get(group_id)) is not None:  # KIP-932 share groups
                kind = protocol_type = "share"
                state = group.state
            else:
                continue  # not reached: the table holds exactly the ids of the four dicts
            if types and kind not in types:
                continue
            if states and (StreamsGroupState.lower(state) if kind == "streams" else state.lower()) not in states:
                continue
            listed.append(_Listed(group_id=group_id, protocol_type=protocol_type, group_state=state, group_type=kind))
    if ctx.broker.authorizer is not None and not authz.cluster_allowed(ctx, authz.Op.DESCRIBE, log_denied=False):
        # Without DESCRIBE on the cluster, only the groups the principal may describe.
        listed = [g for g in listed if authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, g.group_id, log_denied=False)]
    return ListGroupsResponse(version=version, throttle_time_ms=0, error_code=0, groups=listed)


def _delete_error(request: Any, code: ErrorCode) -> Any:
    return DeleteGroupsResponse(
        version=request.version,
        throttle_time_ms=0,
        results=[_Deleted(group_id=g, error_code=code) for g in dict.fromkeys(request.groups_names)],
    )


@api(ApiKey.DELETE_GROUPS, 0, 2, error_response=_delete_error)
def handle_delete_groups(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    coordinator = ctx.broker.coordinator
    authorized: list[str | None] = []
    denied: list[str | None] = []
    checking = ctx.broker.authorizer is not None
    for group_id in dict.fromkeys(request.groups_names):  # DL-1: duplicates once, order kept
        if checking and not authz.allowed(ctx, authz.Op.DELETE, authz.GROUP, group_id or ""):
            denied.append(group_id)  # answered after the others, as KafkaApis does
        else:
            authorized.append(group_id)

    def build(results: list[tuple[str | None, ErrorCode]]) -> Any:
        return DeleteGroupsResponse(
            version=version,
            throttle_time_ms=0,
            results=[_Deleted(group_id=g, error_code=c) for g, c in results]
            + [_Deleted(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in denied],
        )

    if not coordinator.active:  # GE-5: before any group id is looked at, a null one too
        return build([(g, ErrorCode.COORDINATOR_NOT_AVAILABLE) for g in authorized])
    results: dict[str | None, ErrorCode] = {g: ErrorCode.INVALID_GROUP_ID for g in authorized if g is None}
    by_partition: dict[int, list[str]] = {}
    for group_id in authorized:
        if group_id is not None:
            by_partition.setdefault(coordinator.partition_for(group_id), []).append(group_id)
    ordered: list[str] = []  # the routed ids in Kafka's order (describe_order.delete_order)
    waiters = []
    for p in coordinator_partition_order(coordinator.topic_name, by_partition):
        group_ids = by_partition[p]
        try:
            shard = coordinator.shard_for(group_ids[0])
            outcome, waiter = shard.delete_groups(hashset_order(group_ids))
        except CoordinatorError as exc:
            code = map_append_error(exc.code)  # routing errors pass unchanged
            results.update((g, code) for g in group_ids)
            ordered += delete_order(group_ids, share_failed=group_ids)  # every one failed at its share state
            continue
        results.update(outcome)
        failed = {g for g, c in outcome if c is not ErrorCode.NONE and g in shard.share_groups}
        ordered += delete_order(group_ids, share_failed=failed)
        if waiter is not None:
            waiters.append((waiter, group_ids))

    def answers() -> list[tuple[str | None, ErrorCode]]:
        return [(g, c) for g, c in results.items() if g is None] + [(g, results[g]) for g in ordered]

    if not waiters:
        return build(answers())

    async def finish() -> Any:
        for waiter, group_ids in waiters:
            try:
                await waiter
            except Exception:
                for g in group_ids:
                    if results[g] is ErrorCode.NONE:
                        results[g] = ErrorCode.NOT_COORDINATOR
        return build(answers())

    return finish()
