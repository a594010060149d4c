"""CreateTopics v2-v7 (v0 and v1 are not served, as in Kafka 4), checked the way Kafka's KRaft
controller checks them.

Per topic, in Kafka's order: a name used twice in the request (INVALID_REQUEST, reported
once, after the others), the name's legality, collisions and existence, the configs
(INVALID_CONFIG), then either the manual assignment or the partition count and
replication factor. With validate_only nothing is created but the answer is the same,
including the configs (v5+) and a topic id (v7) that is never used, as Kafka does.

Replicas are placed by the broker's placement (broker/topics/placement.py): a lone broker is
every replica; `kaflet serve --brokers N` takes replication factors up to N and manual
assignments over all its nodes, placed and checked as Kafka's controller does.

kaflet decisions where Kafka differs or is silent:
- Kafka lets a client create __consumer_offsets or __transaction_state while they do not
  exist yet. kaflet pins their partition counts (the coordinators hash onto them), so
  creating them is refused with INVALID_REQUEST, worded like Kafka's refusal of
  __cluster_metadata. Once they exist the answer is TOPIC_ALREADY_EXISTS, as in Kafka.
- Topics of one request are checked against each other as well as against existing
  topics: Kafka would create both "a.b" and "a_b" in one request although they collide.
- timeout_ms is not used: creation completes before the answer is sent.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from broker.config import topic_configs
from broker.config.types import ConfigError
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.topics.catalog import INTERNAL_TOPICS, TopicError
from broker.topics.placement import (
    MAX_RECORDS_PER_OPERATION,
    PlacementError,
    RecordBudget,
    TooManyRecords,
    check_manual_assignment,
)
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

CreateTopicsResponse = lazy_response(ApiKey.CREATE_TOPICS)

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
_Result = CreateTopicsResponse.CreatableTopicResult
_ResultConfig = _Result.CreatableTopicConfigs


@dataclass(slots=True)
class _Plan:
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]
    replicas: list[list[int]]


def _result(name: str, code: ErrorCode, message: str | None) -> Any:
    return _Result(
        name=name,
        topic_id=None,
        error_code=code,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        configs=[],
    )


def _error(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    """Kafka's CreateTopicsRequest.getErrorResponse: every requested topic gets the error."""
    return CreateTopicsResponse(
        version=request.version, throttle_time_ms=0, topics=[_result(t.name, code, message) for t in request.topics or []]
    )


def _check_name(ctx: RequestContext, name: str, pending: dict[str, str]) -> None:
    """Legality, collisions and existence, against existing topics and earlier ones of this request."""
    ctx.broker.topics.check_new(name, 1)
    if "." in name or "_" in name:
        collider = pending.get(name.replace(".", "_"))
        if collider is not None:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {collider}")
    if name in INTERNAL_TOPICS:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"Creation of internal topic {name} is prohibited.")


def _plan(ctx: RequestContext, topic: Any) -> _Plan:
    """Everything Kafka's controller checks after the name; raises ConfigError or PlacementError."""
    config = ctx.broker.config
    placement = ctx.broker.topics.placement
    configs = topic_configs.validate_new_configs(((c.name, c.value) for c in topic.configs or []), config)
    if topic.assignments:
        if topic.replication_factor != -1:
            raise PlacementError(
                ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but replication factor was not set to -1."
            )
        if topic.num_partitions != -1:
            raise PlacementError(
                ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions was not set to -1."
            )
        replicas: dict[int, list[int]] = {}
        expected: int | None = None
        registered = placement.registered()
        for assignment in topic.assignments:
            if assignment.partition_index in replicas:
                raise PlacementError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Found multiple manual partition assignments for partition {assignment.partition_index}",
                )
            broker_ids = list(assignment.broker_ids or [])
            check_manual_assignment(broker_ids, expected, registered)
            expected = len(broker_ids)
            placement.assignment_isr(broker_ids, assignment.partition_index, manual=True)
            replicas[assignment.partition_index] = broker_ids
        if any(i not in replicas for i in range(len(replicas))):
            raise PlacementError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")
        ordered = [replicas[i] for i in range(len(replicas))]
        return _Plan(topic.name, len(ordered), len(ordered[0]), configs, ordered)
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise PlacementError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value."
        )
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise PlacementError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    partitions = config.default_partitions if topic.num_partitions == -1 else topic.num_partitions
    replication_factor = placement.default_replication_factor if topic.replication_factor == -1 else topic.replication_factor
    if partitions > MAX_RECORDS_PER_OPERATION:  # more than the record budget holds: checked, never placed
        placement.place(0, replication_factor)
        return _Plan(topic.name, partitions, replication_factor, configs, [])
    placed = placement.place(partitions, replication_factor)
    for p, ids in enumerate(placed):
        placement.assignment_isr(ids, p, manual=False)
    return _Plan(topic.name, partitions, replication_factor, configs, placed)


def _success(ctx: RequestContext, plan: _Plan, topic_id: uuid.UUID) -> Any:
    configs = [
        _ResultConfig(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source, is_sensitive=e.sensitive)
        for e in topic_configs.describe(plan.configs, ctx.broker.config)
    ]
    return _Result(
        name=plan.name,
        topic_id=topic_id,
        error_code=ErrorCode.NONE,
        error_message=None,
        num_partitions=plan.partitions,
        replication_factor=plan.replication_factor,
        configs=configs,
    )


@api(ApiKey.CREATE_TOPICS, 2, 7, error_response=_error)
def handle_create_topics(ctx: RequestContext, request: Any) -> Any:
    requested = list(request.topics or [])
    validate_only = bool(request.validate_only) if ctx.api_version >= 1 else False
    counts = Counter(t.name for t in requested)
    duplicates = [name for name in dict.fromkeys(t.name for t in requested) if counts[name] > 1]

    # With an authorizer: CREATE on the cluster covers every topic, else each needs CREATE on itself
    # (TOPIC_AUTHORIZATION_FAILED "Authorization failed.", answered after the others, as ControllerApis).
    denied: list[str] = []
    if ctx.broker.authorizer is not None and not authz.cluster_allowed(ctx, authz.Op.CREATE, log_denied=False):
        wanted = [t.name for t in requested if counts[t.name] == 1 and t.name != CLUSTER_METADATA_TOPIC]
        creatable = authz.filter_allowed(ctx, authz.Op.CREATE, authz.TOPIC, wanted)
        denied = [n for n in wanted if n not in creatable]
        requested = [t for t in requested if t.name not in denied]
    results: list[Any] = []
    pending: dict[str, str] = {}  # collision key -> name, for topics accepted earlier in this request
    budget = RecordBudget()
    cluster_metadata = False
    for topic in requested:
        name = topic.name
        if counts[name] > 1:
            continue
        if name == CLUSTER_METADATA_TOPIC:
            cluster_metadata = True
            continue
        try:
            _check_name(ctx, name, pending)
            plan = _plan(ctx, topic)
            budget.spend(1 + len(plan.configs) + plan.partitions)
        except (TopicError, PlacementError) as exc:
            results.append(_result(name, exc.code, exc.message))
            continue
        except ConfigError as exc:
            results.append(_result(name, ErrorCode.INVALID_CONFIG, str(exc)))
            continue
        except TooManyRecords as exc:
            return _error(request, ErrorCode.POLICY_VIOLATION, str(exc))
        pending[name.replace(".", "_")] = name
        results.append(plan)

    plans = [e for e in results if isinstance(e, _Plan)]
    # One durable write of the catalog for the whole request (not one per topic).
    made = (
        {}
        if validate_only
        else dict(
            zip(
                (id(p) for p in plans),
                ctx.broker.topics.create_many([(p.name, p.partitions, p.configs, False, p.replicas) for p in plans]),
                strict=True,
            )
        )
    )
    answers: list[Any] = []
    for entry in results:
        if not isinstance(entry, _Plan):
            answers.append(entry)
        elif validate_only:
            answers.append(_success(ctx, entry, uuid.uuid4()))
        else:
            created = made[id(entry)]
            if isinstance(created, TopicError):  # e.g. KAFKA_STORAGE_ERROR on a full disk
                answers.append(_result(entry.name, created.code, created.message))
                continue
            ctx.log.info(
                "topic created",
                topic=created.name,
                topic_id=str(created.topic_id),
                partitions=created.partitions,
                replication_factor=entry.replication_factor,
                configs=created.configs,
            )
            answers.append(_success(ctx, entry, created.topic_id))
    answers.extend(_result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") for name in duplicates)
    answers.extend(_result(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.") for name in denied)
    if cluster_metadata:
        answers.append(
            _result(
                CLUSTER_METADATA_TOPIC, ErrorCode.INVALID_REQUEST, f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."
            )
        )
    return CreateTopicsResponse(version=ctx.api_version, throttle_time_ms=0, topics=answers)
