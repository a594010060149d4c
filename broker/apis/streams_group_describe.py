"""StreamsGroupDescribe v0-v1 (KIP-1071, KS-26): each group's epochs, state, topology (configured
when it is ready: partition counts decided; else as the members sent it), members with their
current and target assignments and reported task offsets. Groups come back in Kafka's order:
invalid ids first, then by coordinator partition in Java HashMap order (GroupCoordinatorService).
"""

from __future__ import annotations

from typing import Any

from broker.coordinator.describe_order import coordinator_partition_order
from broker.coordinator.streams.group import StreamsGroup
from broker.coordinator.streams.javaorder import hashmap_order
from broker.coordinator.streams.member import StreamsMember
from broker.coordinator.streams.tasks import EMPTY_TASKS
from broker.coordinator.streams.topics import describe_configured
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError
from broker.security import authorize as authz
from broker.security.acls import ResourceType, all_operations
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

StreamsGroupDescribeResponse = lazy_response(ApiKey.STREAMS_GROUP_DESCRIBE)
_Group = StreamsGroupDescribeResponse.DescribedGroup
_Topology = _Group.Topology
_Subtopology = _Topology.Subtopology
_TopicInfo = _Subtopology.TopicInfo
_ConfigKeyValue = _TopicInfo.KeyValue
_Member = _Group.Member
_Assignment = _Member.Assignment
_TaskIds = _Assignment.TaskIds
_TaskOffset = _Member.TaskOffset
_KeyValue = _Member.KeyValue
_Endpoint = _Member.Endpoint

INT32_MIN = -(2**31)
TOPOLOGY_DESCRIPTION_NOT_STORED = 1  # StreamsGroupTopologyDescriptionStatus: 0 not requested, 1 not stored, 2 error, 3 available
GROUP_OPERATIONS_BITS = sum(1 << op for op in all_operations(ResourceType.GROUP))


def _described(version: int, group_id: str, code: ErrorCode, message: str | None = None, **fields: Any) -> Any:
    values: dict[str, Any] = dict(
        error_code=code,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        topology=None,
        members=[],
        authorized_operations=INT32_MIN,
    )
    if version >= 1:
        values.update(topology_description=None, topology_description_status=0, assignor_name=None)
    values.update(fields)
    return _Group(**values)


def _error(request: Any, code: ErrorCode) -> Any:
    return StreamsGroupDescribeResponse(
        version=request.version, throttle_time_ms=0, groups=[_described(request.version, g or "", code) for g in request.group_ids]
    )


def _task_ids(tasks: dict[str, Any]) -> list[Any]:
    return [_TaskIds(subtopology_id=s, partitions=sorted(tasks[s])) for s in sorted(tasks)]


def _offsets(offsets: dict[str, dict[int, int]]) -> list[Any]:
    return [_TaskOffset(subtopology_id=s, partition=p, offset=offsets[s][p]) for s in sorted(offsets) for p in sorted(offsets[s])]


def _topic_info(name: str, partitions: int, replication_factor: int, configs: list[tuple[str, str]]) -> Any:
    return _TopicInfo(
        name=name,
        partitions=partitions,
        replication_factor=replication_factor,
        topic_configs=[_ConfigKeyValue(key=k, value=v) for k, v in configs],
    )


def describe_topology(group: StreamsGroup) -> Any:
    """The configured topology when it is ready (partition counts decided), else the topology as
    sent; the configured topology as of the group's last write, as Kafka reads it at the committed offset."""
    configured = group.described_topology
    if configured is not None and configured.is_ready and configured.subtopologies is not None:
        subtopologies = []
        for sid, s in configured.subtopologies.items():
            d = describe_configured(s)
            subtopologies.append(
                _Subtopology(
                    subtopology_id=sid,
                    source_topics=d["source_topics"],
                    repartition_sink_topics=d["repartition_sink_topics"],
                    state_changelog_topics=[_topic_info(*i) for i in d["state_changelog_topics"]],  # type: ignore[union-attr]
                    repartition_source_topics=[_topic_info(*i) for i in d["repartition_source_topics"]],  # type: ignore[union-attr]
                )
            )
        return _Topology(epoch=configured.topology_epoch, subtopologies=subtopologies)
    topology = group.topology
    if topology is None:
        return None
    subtopologies = []
    for sid in sorted(topology.subtopologies):
        s = topology.subtopologies[sid]
        subtopologies.append(
            _Subtopology(
                subtopology_id=sid,
                source_topics=sorted(s.source_topics),
                repartition_sink_topics=sorted(s.repartition_sink_topics),
                state_changelog_topics=[
                    _topic_info(t.name, t.partitions, t.replication_factor, list(t.topic_configs))
                    for t in sorted(s.state_changelog_topics, key=lambda t: t.name)
                ],
                repartition_source_topics=[
                    _topic_info(t.name, t.partitions, t.replication_factor, list(t.topic_configs))
                    for t in sorted(s.repartition_source_topics, key=lambda t: t.name)
                ],
            )
        )
    return _Topology(epoch=topology.epoch, subtopologies=subtopologies)


def describe_member(group: StreamsGroup, m: StreamsMember) -> Any:
    target = group.target.get(m.member_id)
    offsets = group.task_offsets.get(m.member_id)
    return _Member(
        member_id=m.member_id,
        member_epoch=m.member_epoch,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        client_id=m.client_id,
        client_host=m.client_host,
        topology_epoch=m.topology_epoch,
        process_id=m.process_id,
        user_endpoint=_Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]) if m.user_endpoint is not None else None,
        client_tags=[_KeyValue(key=k, value=v) for k, v in ((k, m.client_tags[k]) for k in hashmap_order(m.client_tags))],
        task_offsets=_offsets(offsets.offsets) if offsets is not None else [],
        task_end_offsets=_offsets(offsets.end_offsets) if offsets is not None else [],
        assignment=_Assignment(
            active_tasks=_task_ids(m.assigned.active),
            standby_tasks=_task_ids(m.assigned.standby),
            warmup_tasks=_task_ids(m.assigned.warmup),
        ),
        target_assignment=_Assignment(
            active_tasks=_task_ids((target or EMPTY_TASKS).active),
            standby_tasks=_task_ids((target or EMPTY_TASKS).standby),
            warmup_tasks=_task_ids((target or EMPTY_TASKS).warmup),
        ),
        is_classic=False,
    )


def describe_group(version: int, group: StreamsGroup, assignor: str) -> Any:
    """StreamsGroup.asDescribedGroup."""
    fields: dict[str, Any] = dict(
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        topology=describe_topology(group),
        members=[describe_member(group, m) for m in group.members.values()],
    )
    if version >= 1:
        fields["assignor_name"] = assignor
    return _described(version, group.group_id, ErrorCode.NONE, None, **fields)


@api(ApiKey.STREAMS_GROUP_DESCRIBE, 0, 1, error_response=_error)
def handle_streams_group_describe(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    broker = ctx.broker
    if not broker.config.streams_protocol_enabled:
        return _error(request, ErrorCode.UNSUPPORTED_VERSION)  # KS-1
    checking = broker.authorizer is not None
    denied = []  # answered first, as KafkaApis adds them before the coordinator's results
    authorized = []
    for group_id in request.group_ids:
        if checking and not authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, group_id or ""):
            denied.append(_described(version, group_id or "", ErrorCode.GROUP_AUTHORIZATION_FAILED))
        else:
            authorized.append(group_id)
    coordinator = broker.coordinator
    if not coordinator.active:
        results = [_described(version, g or "", ErrorCode.COORDINATOR_NOT_AVAILABLE) for g in authorized]
        return StreamsGroupDescribeResponse(version=version, throttle_time_ms=0, groups=denied + results)
    invalid = [_described(version, "", ErrorCode.INVALID_GROUP_ID) for g in authorized if not g]
    by_partition: dict[int, list[str]] = {}
    for g in authorized:
        if g:
            by_partition.setdefault(coordinator.partition_for(g), []).append(g)
    results = list(invalid)
    for p in coordinator_partition_order(coordinator.topic_name, by_partition):
        group_ids = by_partition[p]
        try:
            shard = coordinator.shard_for(group_ids[0])
        except CoordinatorError as exc:
            results += [_described(version, g, exc.code) for g in group_ids]
            continue
        for group_id in group_ids:
            try:
                group = shard.streams.describe_or_throw(group_id)
            except CoordinatorError as exc:
                results.append(_described(version, group_id, exc.code, exc.args[0]))
                continue
            results.append(describe_group(version, group, shard.streams.assignor_name(group_id)))
    if version >= 1 and request.include_topology_description:
        # No topology description plugin (API 93 is not served): each described group's is NOT_STORED.
        for d in results:
            if d.error_code == ErrorCode.NONE:
                d.topology_description_status = TOPOLOGY_DESCRIPTION_NOT_STORED
    for d in results:
        if d.error_code == ErrorCode.NONE and request.include_authorized_operations:
            ops = authz.operations_or_all(ctx, authz.GROUP, d.group_id) if checking else None
            d.authorized_operations = sum(1 << op for op in ops) if ops is not None else GROUP_OPERATIONS_BITS
    groups = denied + results
    if checking:
        groups = [_topics_authorized(ctx, version, d) for d in groups]
    return StreamsGroupDescribeResponse(version=version, throttle_time_ms=0, groups=groups)


def _topics_authorized(ctx: RequestContext, version: int, d: Any) -> Any:
    """With an authorizer: TOPIC_AUTHORIZATION_FAILED for a group whose topology names a topic the
    principal may not describe (KafkaApis)."""
    if d.topology is None or not d.topology.subtopologies:
        return d
    names = set()
    for s in d.topology.subtopologies:
        names.update(s.source_topics)
        names.update(s.repartition_sink_topics)
        names.update(t.name for t in s.repartition_source_topics)
        names.update(t.name for t in s.state_changelog_topics)
    if len(authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, names)) < len(names):
        return _described(
            version,
            d.group_id,
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "The described group uses topics that the client is not authorized to describe.",
        )
    return d


__all__ = ["describe_group", "handle_streams_group_describe"]
