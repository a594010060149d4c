"""DescribeTransactions v0, ListTransactions v0-v2 and DescribeProducers v0 (KIP-664).

As Kafka's TransactionStateManager answers them: ListTransactions reports every loaded
transactional id except Dead ones, filtered by state names (unknown names are echoed in
UnknownStateFilters), producer ids, DurationFilter (v1+: running longer than that many ms,
-1 for any; an id with no transaction started passes, as in Kafka) and TransactionalIdPattern
(v2+: a regular expression the whole id must match, null or empty for any,
INVALID_REGULAR_EXPRESSION when it does not compile); while a shard loads the answer is
COORDINATOR_LOAD_IN_PROGRESS.
DescribeTransactions answers per id (TRANSACTIONAL_ID_NOT_FOUND for unknown ones).
DescribeProducers lists each partition's producers with their epoch, last sequence and
timestamp, and the first offset of their open transaction (-1 for none); the coordinator
epoch of a producer's last marker is not tracked (always -1; kaflet's markers carry epoch 0).
"""

from __future__ import annotations

import re
from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError
from broker.security import authorize as authz
from broker.txn.metadata import STATE_NAMES, STATES_BY_NAME, TxnState
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

DescribeProducersResponse = lazy_response(ApiKey.DESCRIBE_PRODUCERS)
DescribeTransactionsResponse = lazy_response(ApiKey.DESCRIBE_TRANSACTIONS)
ListTransactionsResponse = lazy_response(ApiKey.LIST_TRANSACTIONS)

_Listed = ListTransactionsResponse.TransactionState
_Described = DescribeTransactionsResponse.TransactionState
_TopicData = _Described.TopicData
_PTopic = DescribeProducersResponse.TopicResponse
_PPartition = _PTopic.PartitionResponse
_PState = _PPartition.ProducerState


def _list_error(request: Any, code: ErrorCode) -> Any:
    return ListTransactionsResponse(
        version=request.version, throttle_time_ms=0, error_code=code, unknown_state_filters=[], transaction_states=[]
    )


@api(ApiKey.LIST_TRANSACTIONS, 0, 2, error_response=_list_error)
def handle_list_transactions(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    txn = ctx.broker.txn
    if txn is None or not txn.active:
        return _list_error(request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if txn.any_loading():
        return _list_error(request, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    wanted: set[TxnState] = set()
    unknown: list[str] = []
    for name in request.state_filters or ():
        state = STATES_BY_NAME.get(name)
        if state is None:
            unknown.append(name)
        else:
            wanted.add(state)
    pids = set(request.producer_id_filters or ())
    duration = request.duration_filter if version >= 1 else -1
    pattern_text = request.transactional_id_pattern if version >= 2 else None
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error:
        return _list_error(request, ErrorCode.INVALID_REGULAR_EXPRESSION)
    now = txn.now_ms()
    states = []
    for shard in txn.active_shards():
        for tid, meta in shard.txns.items():
            if meta.state is TxnState.DEAD:
                continue
            if (request.state_filters and meta.state not in wanted) or (pids and meta.producer_id not in pids):
                continue
            # As Kafka: a transaction that never started (start -1, e.g. Empty) passes any filter.
            if duration >= 0 and now - meta.start_ms <= duration:
                continue
            if pattern is not None and not pattern.fullmatch(tid):
                continue
            states.append(_Listed(transactional_id=tid, producer_id=meta.producer_id, transaction_state=STATE_NAMES[meta.state]))
    if ctx.broker.authorizer is not None:  # only the transactional ids the principal may describe
        states = [t for t in states if authz.allowed(ctx, authz.Op.DESCRIBE, authz.TRANSACTIONAL_ID, t.transactional_id)]
    return ListTransactionsResponse(
        version=version, throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=states
    )


def _describe_error(request: Any, code: ErrorCode) -> Any:
    return DescribeTransactionsResponse(
        version=request.version, throttle_time_ms=0, transaction_states=[_empty(tid, code) for tid in request.transactional_ids or ()]
    )


def _empty(tid: str, code: ErrorCode) -> Any:
    # Kafka sets only the id and the error: every other field keeps its schema default, 0.
    return _Described(
        error_code=code,
        transactional_id=tid,
        transaction_state="",
        transaction_timeout_ms=0,
        transaction_start_time_ms=0,
        producer_id=0,
        producer_epoch=0,
        topics=[],
    )


@api(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, error_response=_describe_error)
def handle_describe_transactions(ctx: RequestContext, request: Any) -> Any:
    txn = ctx.broker.txn
    out = []
    checking = ctx.broker.authorizer is not None
    for tid in request.transactional_ids or ():
        if checking and not authz.allowed(ctx, authz.Op.DESCRIBE, authz.TRANSACTIONAL_ID, tid):
            out.append(_empty(tid, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        if txn is None:
            out.append(_empty(tid, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            continue
        try:
            shard = txn.shard_for(tid)
        except CoordinatorError as exc:
            out.append(_empty(tid, exc.code))
            continue
        meta = shard.txns.get(tid)
        if meta is None or meta.state is TxnState.DEAD:
            out.append(_empty(tid, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(meta.partitions):
            if not checking or authz.allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, topic):  # others left out
                by_topic.setdefault(topic, []).append(p)
        out.append(
            _Described(
                error_code=0,
                transactional_id=tid,
                transaction_state=STATE_NAMES[meta.state],
                transaction_timeout_ms=meta.timeout_ms,
                transaction_start_time_ms=meta.start_ms,
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                topics=[_TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()],
            )
        )
    return DescribeTransactionsResponse(version=ctx.api_version, throttle_time_ms=0, transaction_states=out)


def _producers_error(request: Any, code: ErrorCode) -> Any:
    topics = [
        _PTopic(
            name=t.name,
            partitions=[
                _PPartition(partition_index=p, error_code=code, error_message=None, active_producers=[]) for p in t.partition_indexes
            ],
        )
        for t in request.topics or ()
    ]
    return DescribeProducersResponse(version=request.version, throttle_time_ms=0, topics=topics)


@api(ApiKey.DESCRIBE_PRODUCERS, 0, 0, error_response=_producers_error)
def handle_describe_producers(ctx: RequestContext, request: Any) -> Any:
    logs = ctx.broker.logs
    topics = []
    readable = authz.filter_allowed(ctx, authz.Op.READ, authz.TOPIC, (t.name for t in request.topics or ()))
    for t in request.topics or ():
        parts = []
        for p in t.partition_indexes or ():
            plog = logs.get(t.name, p)
            if t.name not in readable:  # READ on the topic (KafkaApis.handleDescribeProducersRequest)
                parts.append(
                    _PPartition(partition_index=p, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None, active_producers=[])
                )
                continue
            if plog is None or plog.closed:
                parts.append(
                    _PPartition(partition_index=p, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=None, active_producers=[])
                )
                continue
            state = plog.producers
            producers = [
                _PState(
                    producer_id=pid,
                    producer_epoch=entry.epoch,
                    last_sequence=entry.last_seq,
                    last_timestamp=entry.last_timestamp,
                    coordinator_epoch=-1,
                    current_txn_start_offset=state.ongoing.get(pid, -1),
                )
                for pid, entry in sorted(state.producers.items())
            ]
            parts.append(_PPartition(partition_index=p, error_code=0, error_message=None, active_producers=producers))
        topics.append(_PTopic(name=t.name, partitions=parts))
    return DescribeProducersResponse(version=ctx.api_version, throttle_time_ms=0, topics=topics)
