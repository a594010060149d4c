"""CreatePartitions v0-v3: grow a topic's partition count, as Kafka's controller does.

A name given twice gets INVALID_REQUEST (once, answered first, as ControllerApis does); an
unknown topic UNKNOWN_TOPIC_OR_PARTITION; a count that is not an increase
INVALID_PARTITIONS; assignments must number exactly the new partitions, each as many registered
brokers as the topic's replication factor (that of its first partition); without assignments
the new partitions are placed as Kafka's controller places them (broker/topics/placement.py).
validate_only checks everything and changes nothing.

kaflet decision: the partition counts of __consumer_offsets and __transaction_state are
pinned (the coordinators hash group and transactional ids onto them, and the data dir
records the count), so growing them is refused with POLICY_VIOLATION. Kafka would accept
it and silently move every group to another coordinator partition.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.topics.catalog import INTERNAL_TOPICS, TopicError
from broker.topics.placement import MAX_RECORDS_PER_OPERATION, PlacementError, RecordBudget, TooManyRecords, check_manual_assignment
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

CreatePartitionsResponse = lazy_response(ApiKey.CREATE_PARTITIONS)

_Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def _error(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    """Kafka's CreatePartitionsRequest.getErrorResponse: every requested topic gets the error."""
    results = [_Result(name=t.name, error_code=code, error_message=message) for t in request.topics or []]
    return CreatePartitionsResponse(version=request.version, throttle_time_ms=0, results=results)


def _check(ctx: RequestContext, wanted: Any) -> tuple[int, list[list[int]]]:
    """The current partition count and the new partitions' replicas if `wanted` can be applied;
    raises PlacementError otherwise."""
    topics = ctx.broker.topics
    topic = topics.get(wanted.name)
    if topic is None:
        raise PlacementError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)  # Kafka sends no message here
    current = topic.partitions
    if wanted.count == current:
        raise PlacementError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if wanted.count < current:
        raise PlacementError(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic {wanted.name} currently has {current} partition(s); {wanted.count} would not be an increase.",
        )
    if wanted.name in INTERNAL_TOPICS:
        raise PlacementError(
            ErrorCode.POLICY_VIOLATION,
            f"The partition count of internal topic {wanted.name} is fixed; kaflet does not add partitions to it.",
        )
    additional = wanted.count - current
    if wanted.assignments is not None and len(wanted.assignments) != additional:
        raise PlacementError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but only {len(wanted.assignments)} assignment(s) were specified.",
        )
    if additional > MAX_RECORDS_PER_OPERATION:  # more than the record budget holds: never placed
        return current, []
    placement = topics.placement
    replication_factor = len(topics.replicas_of(topic, 0))
    if wanted.assignments is None:
        replicas = placement.place(additional, replication_factor)
        for i, ids in enumerate(replicas):
            placement.assignment_isr(ids, current + i, manual=False)
        return current, replicas
    registered = placement.registered()
    replicas = []
    for i, assignment in enumerate(wanted.assignments):
        ids = list(assignment.broker_ids or [])
        check_manual_assignment(ids, replication_factor, registered)
        placement.assignment_isr(ids, current + i, manual=True)
        replicas.append(ids)
    return current, replicas


@api(ApiKey.CREATE_PARTITIONS, 0, 3, error_response=_error)
def handle_create_partitions(ctx: RequestContext, request: Any) -> Any:
    requested = list(request.topics or [])
    counts = Counter(t.name for t in requested)
    results = [
        _Result(name=name, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name.")
        for name in dict.fromkeys(t.name for t in requested)
        if counts[name] > 1
    ]
    alterable = None
    if ctx.broker.authorizer is not None:  # ALTER on each topic (TOPIC_AUTHORIZATION_FAILED, no message)
        alterable = authz.filter_allowed(ctx, authz.Op.ALTER, authz.TOPIC, (t.name for t in requested if counts[t.name] == 1))
    budget = RecordBudget()
    accepted: list[tuple[Any, int, list[list[int]]]] = []
    outcome: list[Any] = []
    for wanted in requested:
        if counts[wanted.name] > 1:
            continue
        if alterable is not None and wanted.name not in alterable:
            results.append(_Result(name=wanted.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None))
            continue
        try:
            current, replicas = _check(ctx, wanted)
            budget.spend(wanted.count - current)
        except PlacementError as exc:
            outcome.append(_Result(name=wanted.name, error_code=exc.code, error_message=exc.message))
            continue
        except TooManyRecords as exc:
            return _error(request, ErrorCode.POLICY_VIOLATION, str(exc))
        accepted.append((wanted, current, replicas))
        outcome.append(_Result(name=wanted.name, error_code=ErrorCode.NONE, error_message=None))
    if not request.validate_only:
        for wanted, current, replicas in accepted:
            try:
                ctx.broker.topics.add_partitions(wanted.name, wanted.count, replicas)
            except TopicError as exc:  # KAFKA_STORAGE_ERROR on a full disk
                i = next(i for i, r in enumerate(outcome) if r.name == wanted.name)
                outcome[i] = _Result(name=wanted.name, error_code=exc.code, error_message=exc.message)
                continue
            ctx.log.info("partitions added", topic=wanted.name, partitions=wanted.count, previous=current)
    return CreatePartitionsResponse(version=ctx.api_version, throttle_time_ms=0, results=results + outcome)
