"""DescribeShareGroupOffsets v0-v1, AlterShareGroupOffsets v0 and DeleteShareGroupOffsets v0
(KIP-932; v1 of Describe adds the lag, KIP-1226).

A share group's "offset" on a partition is its share-partition start offset, kept by the share
coordinator; the group coordinator knows which of the group's partitions have share state
(broker/coordinator/share/manager.py). The checks and answers follow KafkaApis and
GroupCoordinatorService:

- Describe: per group, DESCRIBE on the group; no topics (null) describes every partition with
  state, an empty list none; a topic that does not exist is answered with start offset -1, one the
  principal may not describe with TOPIC_AUTHORIZATION_FAILED. The lag is the partition's high
  watermark minus the start offset minus the records at or past it already acknowledged or
  archived (-1 where the state has no such count). The group need not exist.
- Alter: READ on the group, READ on each topic; the group must be empty (or not exist yet, and
  then it is made); each partition's state is initialized again at its new start offset.
- Delete: DELETE on the group, READ on each topic; the group must exist and be empty; a topic's
  share state is deleted (a topic without state: UNKNOWN_TOPIC_OR_PARTITION, "There is no offset
  information to delete.").
"""

from __future__ import annotations

import uuid
from typing import Any

from broker.apis.share_common import share_groups_disabled
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError, map_append_error
from broker.security import authorize as authz
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

DescribeResponse = lazy_response(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
AlterResponse = lazy_response(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
DeleteResponse = lazy_response(ApiKey.DELETE_SHARE_GROUP_OFFSETS)

_DGroup = DescribeResponse.DescribeShareGroupOffsetsResponseGroup
_DTopic = _DGroup.DescribeShareGroupOffsetsResponseTopic
_DPartition = _DTopic.DescribeShareGroupOffsetsResponsePartition
_ATopic = AlterResponse.AlterShareGroupOffsetsResponseTopic
_APartition = _ATopic.AlterShareGroupOffsetsResponsePartition
_XTopic = DeleteResponse.DeleteShareGroupOffsetsResponseTopic

ZERO = uuid.UUID(int=0)


def _routing_error(exc: CoordinatorError) -> tuple[ErrorCode, str | None]:
    """CoordinatorOperationExceptionHelper.handleOperationException."""
    code = map_append_error(exc.code)
    if code is not exc.code or code is ErrorCode.UNKNOWN_SERVER_ERROR:
        return code, None
    message = exc.args[0] if exc.args and exc.args[0] != exc.code.name else code.message
    return code, message


# -- DescribeShareGroupOffsets --------------------------------------------------------------


def _describe_group_error(group_id: str, code: ErrorCode, message: str | None) -> Any:
    return _DGroup(group_id=group_id, topics=[], error_code=code, error_message=message)


def _describe_error(request: Any, code: ErrorCode) -> Any:
    return DescribeResponse(
        version=request.version, throttle_time_ms=0, groups=[_describe_group_error(g.group_id, code, code.message) for g in request.groups]
    )


def _summaries(ctx: RequestContext, group_id: str, topics: list[tuple[str, uuid.UUID, list[int]]]) -> list[Any]:
    """readShareGroupStateSummary + computeShareGroupLagAndBuildResponse."""
    broker = ctx.broker
    persister = broker.share_coordinator
    out = []
    for name, topic_id, partitions in topics:
        parts = []
        for p in partitions:
            result, _ = persister.read_summary(group_id, topic_id, p)
            ok = result.error is ErrorCode.NONE
            if ok and result.start_offset != -1 and result.delivery_complete_count != -1:
                plog = broker.logs.get(name, p)
                if plog is None:
                    parts.append(
                        _DPartition(
                            partition_index=p,
                            start_offset=0,
                            leader_epoch=0,
                            lag=-1,
                            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            error_message=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message,
                        )
                    )
                    continue
                lag = plog.high_watermark - result.start_offset - result.delivery_complete_count
                parts.append(
                    _DPartition(
                        partition_index=p,
                        start_offset=result.start_offset,
                        leader_epoch=result.leader_epoch,
                        lag=lag,
                        error_code=0,
                        error_message=None,
                    )
                )
            else:
                parts.append(
                    _DPartition(
                        partition_index=p,
                        start_offset=result.start_offset if ok else -1,
                        leader_epoch=result.leader_epoch if ok else 0,
                        lag=-1,
                        error_code=0,
                        error_message=None,
                    )
                )
        out.append(_DTopic(topic_name=name, topic_id=topic_id, partitions=parts))
    return out


def _describe_one(ctx: RequestContext, g: Any) -> Any:
    broker = ctx.broker
    group_id = g.group_id
    if not authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, group_id or ""):
        return _describe_group_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    coordinator = broker.coordinator
    if g.topics is None:  # every partition with share state
        if not coordinator.active or broker.share_coordinator is None:
            return _describe_group_error(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE.message)
        try:
            shard = coordinator.shard_for(group_id)
        except CoordinatorError as exc:
            code, message = _routing_error(exc)
            return _describe_group_error(group_id, code, code.message if message is None else message)
        topics = []
        for topic_id, partitions in shard.share.initialized_partitions(group_id).items():
            topic = broker.topics.get_by_id(topic_id)
            if topic is not None:
                topics.append((topic.name, topic_id, sorted(partitions)))
        readable = authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, [n for n, _, _ in topics])
        return _DGroup(
            group_id=group_id, topics=_summaries(ctx, group_id, [t for t in topics if t[0] in readable]), error_code=0, error_message=None
        )
    if not g.topics:
        return _DGroup(group_id=group_id, topics=[], error_code=0, error_message=None)
    readable = authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, [t.topic_name for t in g.topics])
    if not coordinator.active or broker.share_coordinator is None:
        return _describe_group_error(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE.message)
    known: list[tuple[str, uuid.UUID, list[int]]] = []
    missing = []
    for t in g.topics:
        if t.topic_name not in readable:
            continue
        topic = broker.topics.get(t.topic_name)
        if topic is None:
            missing.append(
                _DTopic(
                    topic_name=t.topic_name,
                    topic_id=ZERO,
                    partitions=[
                        _DPartition(partition_index=p, start_offset=-1, leader_epoch=0, lag=-1, error_code=0, error_message=None)
                        for p in t.partitions
                    ],
                )
            )
        else:
            known.append((t.topic_name, topic.topic_id, list(t.partitions)))
    denied = [
        _DTopic(
            topic_name=t.topic_name,
            topic_id=ZERO,
            partitions=[
                _DPartition(
                    partition_index=p,
                    start_offset=-1,
                    leader_epoch=0,
                    lag=-1,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message=ErrorCode.TOPIC_AUTHORIZATION_FAILED.message,
                )
                for p in t.partitions
            ],
        )
        for t in g.topics
        if t.topic_name not in readable
    ]
    return _DGroup(group_id=group_id, topics=_summaries(ctx, group_id, known) + missing + denied, error_code=0, error_message=None)


@api(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1, error_response=_describe_error)
def handle_describe_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    disabled = share_groups_disabled(ctx.broker)
    groups = [
        _describe_group_error(g.group_id, ErrorCode.UNSUPPORTED_VERSION, None) if disabled else _describe_one(ctx, g)
        for g in request.groups
    ]
    return DescribeResponse(version=ctx.api_version, throttle_time_ms=0, groups=groups)


# -- AlterShareGroupOffsets -----------------------------------------------------------------


def _alter_error(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    return AlterResponse(
        version=request.version,
        throttle_time_ms=0,
        error_code=code,
        error_message=message if message is not None else code.message,
        responses=[],
    )


@api(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0, error_response=lambda req, code: _alter_error(req, code))
def handle_alter_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    if share_groups_disabled(broker):
        return _alter_error(request, ErrorCode.UNSUPPORTED_VERSION)
    group_id = request.group_id
    if not authz.allowed(ctx, authz.Op.READ, authz.GROUP, group_id or ""):
        return _alter_error(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics: dict[str, Any] = {}  # AlterShareGroupOffsetsResponse.Builder: topics in order of first mention

    def topic_entry(name: str, topic_id: uuid.UUID | None) -> Any:
        entry = topics.get(name)
        if entry is None:
            entry = topics[name] = _ATopic(topic_name=name, topic_id=topic_id or ZERO, partitions=[])
        return entry

    authorized = []
    for t in request.topics:
        topic = broker.topics.get(t.topic_name)
        error = None
        if not authz.allowed(ctx, authz.Op.READ, authz.TOPIC, t.topic_name):
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if error is not None:
            entry = topic_entry(t.topic_name, topic.topic_id if topic is not None else None)
            entry.partitions += [
                _APartition(partition_index=p.partition_index, error_code=error, error_message=error.message) for p in t.partitions
            ]
        else:
            authorized.append((t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions]))
    coordinator = broker.coordinator
    if not coordinator.active or broker.share_coordinator is None:
        return _alter_error(request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not group_id:
        return _alter_error(request, ErrorCode.INVALID_GROUP_ID)
    try:
        shard = coordinator.shard_for(group_id)
        results, initialize, records, group_epoch = shard.share.alter_offsets(group_id, authorized)
        shard.write(records)
    except CoordinatorError as exc:
        code, message = _routing_error(exc)
        return _alter_error(request, code, message)
    failed: dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]] = {}
    done: dict[uuid.UUID, set[int]] = {}
    for topic_id, p, start in initialize:
        result, _ = broker.share_coordinator.initialize(group_id, topic_id, p, group_epoch, start)
        if result.error is ErrorCode.NONE:
            done.setdefault(topic_id, set()).add(p)
        else:
            failed[(topic_id, p)] = (result.error, result.message)
    if done and not failed:
        try:
            coordinator.runtime.write(group_id, lambda s, g, m: s.share._mark_initialized(g, m), group_id, done)
        except CoordinatorError:
            pass
        shard.share.state_changed(group_id)
        ctx.log.info("share group offsets altered", group=group_id, partitions={str(t): sorted(ps) for t, ps in done.items()})
    for name, topic_id, parts in results:
        entry = topic_entry(name, topic_id)
        for p, code in parts:
            err = failed.get((topic_id, p)) if topic_id is not None else None
            if err is not None:
                entry.partitions.append(_APartition(partition_index=p, error_code=err[0], error_message=err[1]))
            else:
                entry.partitions.append(
                    _APartition(partition_index=p, error_code=code, error_message=None if code is ErrorCode.NONE else code.message)
                )
    return AlterResponse(version=ctx.api_version, throttle_time_ms=0, error_code=0, error_message=None, responses=list(topics.values()))


# -- DeleteShareGroupOffsets ----------------------------------------------------------------


def _delete_error(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    return DeleteResponse(
        version=request.version,
        throttle_time_ms=0,
        error_code=code,
        error_message=message if message is not None else code.message,
        responses=[],
    )


@api(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0, error_response=lambda req, code: _delete_error(req, code))
def handle_delete_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    if share_groups_disabled(broker):
        return _delete_error(request, ErrorCode.UNSUPPORTED_VERSION)
    group_id = request.group_id
    if not authz.allowed(ctx, authz.Op.DELETE, authz.GROUP, group_id or ""):
        return _delete_error(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = []
    names = []
    for t in request.topics:
        if not authz.allowed(ctx, authz.Op.READ, authz.TOPIC, t.topic_name):
            denied.append(
                _XTopic(
                    topic_name=t.topic_name,
                    topic_id=ZERO,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message=ErrorCode.TOPIC_AUTHORIZATION_FAILED.message,
                )
            )
        else:
            names.append(t.topic_name)
    coordinator = broker.coordinator
    if not coordinator.active or broker.share_coordinator is None:
        return _delete_error(request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not group_id:
        return _delete_error(request, ErrorCode.INVALID_GROUP_ID)
    try:
        shard = coordinator.shard_for(group_id)
        group = shard.share_groups.get(group_id)
        if group is None:
            other = group_id in shard.groups or group_id in shard.consumer_groups
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} {'is not a share group' if other else 'not found'}.")
        if group.members:
            raise CoordinatorError(ErrorCode.NON_EMPTY_GROUP, ErrorCode.NON_EMPTY_GROUP.message)
        to_delete, errors, records = shard.share.delete_offsets(group_id, names)
        shard.write(records)
    except CoordinatorError as exc:
        code, message = _routing_error(exc)
        return _delete_error(request, code, message)
    error_topics = [_XTopic(topic_name=n, topic_id=t or ZERO, error_code=c, error_message=m) for n, t, c, m in errors]
    succeeded: dict[uuid.UUID, str] = {}
    for topic_id, partitions in to_delete:
        topic = broker.topics.get_by_id(topic_id)
        name = topic.name if topic is not None else None
        bad = None
        for p in partitions:
            result, _ = broker.share_coordinator.delete(group_id, topic_id, p)
            if result.error is not ErrorCode.NONE:
                bad = result.error
        if bad is not None:
            error_topics.append(_XTopic(topic_name=name, topic_id=topic_id, error_code=bad, error_message=bad.message))
        else:
            succeeded[topic_id] = name or ""
    done = []
    if succeeded:
        try:
            result, _waiter = coordinator.runtime.write(
                group_id, lambda s, g, m: s.share.complete_delete_offsets(g, m), group_id, succeeded
            )
            done = [_XTopic(topic_name=n, topic_id=t, error_code=0, error_message=None) for t, n in result]
        except CoordinatorError as exc:
            code, message = _routing_error(exc)
            return _delete_error(request, code, message)
        shard.share.state_changed(group_id)
        ctx.log.info("share group offsets deleted", group=group_id, topics=sorted(succeeded.values()))
    return DeleteResponse(
        version=ctx.api_version, throttle_time_ms=0, error_code=0, error_message=None, responses=denied + done + error_topics
    )
