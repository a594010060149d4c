"""StreamsGroupHeartbeat v0-v1 (KIP-1071): KS-1..KS-4 here, in Kafka 4.4's order of checks
(KafkaApis, then GroupCoordinatorService); the rest is the shard's
(broker/coordinator/streams/manager.py). After the shard's answer, the internal topics it found
missing are created here, as KafkaApis hands them to its AutoTopicCreationManager (KS-13).
"""

from __future__ import annotations

from typing import Any

from broker.apis.heartbeat_answers import coordinator_error, when_durable
from broker.config import topic_configs
from broker.config.types import ConfigError
from broker.coordinator.streams.manager import StreamsHeartbeat, StreamsHeartbeatResult
from broker.coordinator.streams.topics import InternalTopic, Status
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError
from broker.security import authorize as authz
from broker.topics.catalog import TopicError, name_error
from broker.topics.placement import PlacementError
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

StreamsGroupHeartbeatResponse = lazy_response(ApiKey.STREAMS_GROUP_HEARTBEAT)
_Status = StreamsGroupHeartbeatResponse.Status
_TaskIds = StreamsGroupHeartbeatResponse.TaskIds
_EndpointToPartitions = StreamsGroupHeartbeatResponse.EndpointToPartitions
_Endpoint = _EndpointToPartitions.Endpoint
_TopicPartition = _EndpointToPartitions.TopicPartition

# Kafka's Topic.INTERNAL_TOPICS: a topology must not name them (KS-3).
KAFKA_INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")


class InvalidRequest(Exception):
    """INVALID_REQUEST, with this message."""


def _response(version: int, code: ErrorCode, message: str | None = None, result: StreamsHeartbeatResult | None = None) -> Any:
    r = result or StreamsHeartbeatResult("", 0)

    def tasks(t: dict[str, list[int]] | None) -> Any:
        return None if t is None else [_TaskIds(subtopology_id=s, partitions=ps) for s, ps in t.items()]

    endpoints = None
    if r.partitions_by_user_endpoint is not None:
        endpoints = [
            _EndpointToPartitions(
                user_endpoint=_Endpoint(host=host, port=port),
                active_partitions=[_TopicPartition(topic=t, partitions=ps) for t, ps in active],
                standby_partitions=[_TopicPartition(topic=t, partitions=ps) for t, ps in standby],
            )
            for (host, port), active, standby in r.partitions_by_user_endpoint
        ]
    fields: dict[str, Any] = dict(
        version=version,
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        member_id=r.member_id,
        member_epoch=r.member_epoch,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
        task_offset_interval_ms=r.task_offset_interval_ms,
        status=[_Status(status_code=c, status_detail=d) for c, d in r.status],
        active_tasks=tasks(r.active_tasks),
        standby_tasks=tasks(r.standby_tasks),
        warmup_tasks=tasks(r.warmup_tasks),
        endpoint_information_epoch=r.endpoint_information_epoch,
        partitions_by_user_endpoint=endpoints,
    )
    if version >= 1:
        fields["acceptable_recovery_lag"] = r.acceptable_recovery_lag
        fields["topology_description_required"] = False
    else:
        # AcceptableRecoveryLagLegacy: what an int32 holds of the lag (0 on error answers, as Kafka's default).
        fields["acceptable_recovery_lag_legacy"] = max(min(r.acceptable_recovery_lag, 2**31 - 1), 0) if result is not None else 0
    return StreamsGroupHeartbeatResponse(**fields)


def _error(request: Any, code: ErrorCode) -> Any:
    return _response(request.version, code)


def _failed(ctx: RequestContext, code: ErrorCode, message: str | None = None) -> Any:
    return _response(ctx.api_version, code, message)


def _blank(text: str | None) -> bool:
    return text is not None and text.strip() == ""


def required_topics(topology: Any) -> list[str]:
    """Source, repartition sink, repartition source and changelog topics, each once, in that order per sub-topology."""
    out: dict[str, None] = {}
    for s in topology.subtopologies:
        for name in [*s.source_topics, *s.repartition_sink_topics, *(t.name for t in s.repartition_source_topics)]:
            out[name] = None
        for t in s.state_changelog_topics:
            out[t.name] = None
    return list(out)


def validate(request: Any) -> None:
    """GroupCoordinatorService: unsupported features, then throwIfStreamsGroupHeartbeatRequestIsInvalid (KS-4)."""
    topology = request.topology
    if topology is not None:
        for s in topology.subtopologies:
            if s.source_topic_regex:
                raise InvalidRequest("Regular expressions for source topics are not supported yet.")
    if _blank(request.member_id):
        raise InvalidRequest("MemberId can't be empty.")
    if _blank(request.group_id):
        raise InvalidRequest("GroupId can't be empty.")
    if _blank(request.instance_id):
        raise InvalidRequest("InstanceId can't be empty.")
    if _blank(request.rack_id):
        raise InvalidRequest("RackId can't be empty.")
    epoch = request.member_epoch
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise InvalidRequest("RebalanceTimeoutMs must be provided in first request.")
        if request.active_tasks:
            raise InvalidRequest("ActiveTasks must be empty when (re-)joining.")
        if request.standby_tasks:
            raise InvalidRequest("StandbyTasks must be empty when (re-)joining.")
        if request.warmup_tasks:
            raise InvalidRequest("WarmupTasks must be empty when (re-)joining.")
        if topology is None:
            raise InvalidRequest("Topology must be non-null when (re-)joining.")
        for s in topology.subtopologies:
            for t in s.state_changelog_topics:
                if t.partitions != 0:
                    raise _InvalidTopology(
                        f"Changelog topic {t.name} must have an undefined partition count, but it is set to {t.partitions}."
                    )
    elif epoch == -2:
        if request.instance_id is None:
            raise InvalidRequest("InstanceId can't be null.")
    elif epoch < -2:
        raise InvalidRequest(f"MemberEpoch is {epoch}, but must be greater than or equal to -2.")
    tasks = (request.active_tasks, request.standby_tasks, request.warmup_tasks)
    if any(t is not None for t in tasks) and any(t is None for t in tasks):
        raise InvalidRequest("If one task-type is non-null, all must be non-null.")
    if epoch != 0 and topology is not None:
        raise InvalidRequest("Topology can only be provided when (re-)joining.")


class _InvalidTopology(Exception):
    """STREAMS_INVALID_TOPOLOGY from the request's own checks."""


@api(ApiKey.STREAMS_GROUP_HEARTBEAT, 0, 1, error_response=_error)
def handle_streams_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    if not broker.config.streams_protocol_enabled:
        return _failed(ctx, ErrorCode.UNSUPPORTED_VERSION)  # KS-1
    checking = broker.authorizer is not None
    if checking and not authz.allowed(ctx, authz.Op.READ, authz.GROUP, request.group_id or ""):
        return _failed(ctx, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if request.topology is not None:  # KS-3: KafkaApis' checks of the topology's topic names
        needed = required_topics(request.topology)
        prohibited = [t for t in needed if t in KAFKA_INTERNAL_TOPICS]
        if prohibited:
            return _failed(
                ctx,
                ErrorCode.STREAMS_INVALID_TOPOLOGY,
                f"Use of Kafka internal topics {','.join(prohibited)} in a Kafka Streams topology is prohibited.",
            )
        invalid = [t for t in needed if name_error(t) is not None]
        if invalid:
            return _failed(ctx, ErrorCode.STREAMS_INVALID_TOPOLOGY, f"Topic names {','.join(invalid)} are not valid topic names.")
        if checking and needed and len(authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, needed)) < len(set(needed)):
            return _failed(ctx, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    coordinator = broker.coordinator
    if not coordinator.active:
        return _failed(ctx, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    try:
        validate(request)
    except InvalidRequest as exc:
        return _failed(ctx, ErrorCode.INVALID_REQUEST, str(exc))
    except _InvalidTopology as exc:
        return _failed(ctx, ErrorCode.STREAMS_INVALID_TOPOLOGY, str(exc))
    try:
        shard = coordinator.shard_for(request.group_id)
    except CoordinatorError as exc:
        return _failed(ctx, exc.code, exc.code.message)
    endpoint = request.user_endpoint
    req = StreamsHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        endpoint_information_epoch=request.endpoint_information_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        topology=request.topology,
        active_tasks=request.active_tasks,
        standby_tasks=request.standby_tasks,
        warmup_tasks=request.warmup_tasks,
        process_id=request.process_id,
        user_endpoint=(endpoint.host, endpoint.port) if endpoint is not None else None,
        client_tags=[(kv.key, kv.value) for kv in request.client_tags] if request.client_tags is not None else None,
        task_offsets=request.task_offsets,
        task_end_offsets=request.task_end_offsets,
        shutdown_application=bool(request.shutdown_application),
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
        api_version=ctx.api_version,
    )
    coordinator.stats.streams_heartbeats += 1
    try:
        result, waiter = shard.streams.heartbeat(req)
    except CoordinatorError as exc:
        code, message = coordinator_error(exc)
        if code is ErrorCode.UNKNOWN_SERVER_ERROR:
            return _failed(ctx, code)  # Kafka answers unexpected failures without a message
        return _failed(ctx, code, message)
    if result.topics_to_create:
        _create_internal_topics(ctx, request.group_id, result)
    response = _response(ctx.api_version, ErrorCode.NONE, None, result)
    return when_durable(response, waiter, lambda: _failed(ctx, ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR.message))


def _create_internal_topics(ctx: RequestContext, group_id: str, result: StreamsHeartbeatResult) -> None:
    """KS-13: create the missing internal topics with the configs the topology gives them (KafkaApis:
    CREATE on the cluster, or on each topic, else the status says who may not). kaflet creates them
    at once, so a creation that fails is reported in this answer's MISSING_INTERNAL_TOPICS status."""
    topics = result.topics_to_create
    names = list(topics)
    if ctx.broker.authorizer is not None and not authz.cluster_allowed(ctx, authz.Op.CREATE, log_denied=False):
        allowed = authz.filter_allowed(ctx, authz.Op.CREATE, authz.TOPIC, names)
        unauthorized = [n for n in names if n not in allowed]
        if unauthorized:
            _add_detail(result, f"Unauthorized to CREATE on topics {', '.join(unauthorized)}.")
            return
    failures: dict[str, str] = {}
    for name in names:
        error = _create(ctx, topics[name])
        if error is not None:
            failures[name] = error
    if failures:
        shown = ", ".join(f"{t} ({e})" for t, e in list(failures.items())[:3])
        if len(failures) > 3:
            shown += f" and {len(failures) - 3} more"
        _add_detail(result, f"Creation failed: {shown}.")
        ctx.log.warning("internal topics of a streams group could not be created", group=group_id, failures=failures)


def _add_detail(result: StreamsHeartbeatResult, detail: str) -> None:
    for i, (code, text) in enumerate(result.status):
        if code == Status.MISSING_INTERNAL_TOPICS:
            result.status[i] = (code, f"{text}; {detail}")
            return
    result.status.append((Status.MISSING_INTERNAL_TOPICS, detail))


def _create(ctx: RequestContext, topic: InternalTopic) -> str | None:
    """Create one internal topic as CreateTopics would; the error's text, or None."""
    topics = ctx.broker.topics
    if topics.get(topic.name) is not None:
        return None  # created meanwhile (by the app itself, or another member's heartbeat)
    try:
        topics.check_new(topic.name, topic.partitions)
        configs = topic_configs.validate_new_configs(topic.configs.items(), ctx.broker.config)
        # 0 or -1 (Streams' replication.factor default): the broker's default.replication.factor
        asked = topic.replication_factor or 0  # None when the topology names none
        replication_factor = asked if asked > 0 else topics.placement.default_replication_factor
        replicas = topics.placement.place(topic.partitions, replication_factor)
        created = topics.create(topic.name, topic.partitions, configs, replicas=replicas)
    except (TopicError, PlacementError) as exc:
        return exc.message
    except ConfigError as exc:
        return str(exc)
    ctx.log.info(
        "streams internal topic created",
        topic=created.name,
        topic_id=str(created.topic_id),
        partitions=created.partitions,
        configs=created.configs,
    )
    return None


__all__ = ["handle_streams_group_heartbeat", "required_topics", "validate"]
