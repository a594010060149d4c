"""AddPartitionsToTxn v0-v5, AddOffsetsToTxn v0-v4, EndTxn v0-v4, TxnOffsetCommit v0-v5.

The coordinator side is broker/txn/coordinator.py. This layer does what Kafka's KafkaApis
does around it: unknown topics or partitions in AddPartitionsToTxn get
UNKNOWN_TOPIC_OR_PARTITION and the rest OPERATION_NOT_ATTEMPTED (nothing is added); below v2
(AddPartitionsToTxn, AddOffsetsToTxn, EndTxn) PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH. AddPartitionsToTxn v4+ is the batched form Kafka's brokers use among
themselves (several transactional ids, `verify_only`); kaflet serves it to any client.

TxnOffsetCommit follows TX-1..TX-4: a null or empty group id is INVALID_GROUP_ID, unknown
partitions UNKNOWN_TOPIC_OR_PARTITION; the transaction coordinator verifies that the producer
is current and `__consumer_offsets`' partition of the group is in its transaction (from v5,
KIP-890 part 2, the commit adds that partition to the transaction itself) (TX-3:
INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE; a coordinator still
loading is COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE below v2); then the group
coordinator validates (TX-2) and writes the offsets as pending (TX-4).

EndTxn v5 (Transaction V2, KIP-890) is not served: see broker/txn/coordinator.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError, map_append_error
from broker.security import authorize as authz
from broker.topics.catalog import INTERNAL_TOPICS, OFFSETS_TOPIC
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

AddOffsetsToTxnResponse = lazy_response(ApiKey.ADD_OFFSETS_TO_TXN)
AddPartitionsToTxnResponse = lazy_response(ApiKey.ADD_PARTITIONS_TO_TXN)
EndTxnResponse = lazy_response(ApiKey.END_TXN)
TxnOffsetCommitResponse = lazy_response(ApiKey.TXN_OFFSET_COMMIT)

_TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_PartitionResult = _TopicResult.AddPartitionsToTxnPartitionResult
_TxnResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
_CommitTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_CommitPartition = _CommitTopic.TxnOffsetCommitResponsePartition


def _fenced(code: ErrorCode, version: int) -> ErrorCode:
    return ErrorCode.INVALID_PRODUCER_EPOCH if code is ErrorCode.PRODUCER_FENCED and version < 2 else code


async def _after(waits: list[Any], build: Callable[[ErrorCode | None], Any]) -> Any:
    try:
        await asyncio.gather(*waits)
    except Exception:
        return build(ErrorCode.NOT_COORDINATOR)  # a record could not be made durable
    return build(None)


def _respond(ctx: RequestContext, waits: list[Any], build: Callable[[ErrorCode | None], Any]) -> Any:
    return _after(waits, build) if waits else build(None)


# -- AddPartitionsToTxn -----------------------------------------------------------------


def _topic_results(partitions: list[tuple[str, int]], codes: dict[tuple[str, int], int]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(_PartitionResult(partition_index=p, partition_error_code=int(codes[(topic, p)])))
    return [_TopicResult(name=t, results_by_partition=parts) for t, parts in by_topic.items()]


def _requested(topics: Any) -> list[tuple[str, int]]:
    seen: dict[tuple[str, int], None] = {}
    for t in topics or ():
        for p in t.partitions or ():
            seen[(t.name, p)] = None
    return list(seen)


def _add_one(
    ctx: RequestContext, tid: str, pid: int, epoch: int, partitions: list[tuple[str, int]], verify_only: bool
) -> tuple[dict[tuple[str, int], int], list[Any]]:
    """One transaction of the request: per-partition codes and durability waits."""
    version = ctx.api_version
    topics = ctx.broker.topics
    unknown = set()
    denied: set[str] = set()
    if ctx.broker.authorizer is not None and version < 4:  # v4+ comes from brokers (CLUSTER_ACTION)
        if not authz.allowed(ctx, authz.Op.WRITE, authz.TRANSACTIONAL_ID, tid or ""):
            return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), []
        names = {t for t, _p in partitions if t not in INTERNAL_TOPICS}
        denied = names - authz.filter_allowed(ctx, authz.Op.WRITE, authz.TOPIC, names)
    for topic, p in partitions:
        if topic in denied:
            continue
        t = topics.get(topic)
        if t is None or not 0 <= p < t.partitions:
            unknown.add((topic, p))
    if unknown or denied:
        return {
            tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if tp[0] in denied
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in partitions
        }, []
    txn = ctx.broker.txn
    if not tid:
        return dict.fromkeys(partitions, ErrorCode.INVALID_REQUEST), []
    if txn is None:
        return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE), []
    if verify_only:
        codes = {}
        for topic, p in partitions:
            code = txn.verify(tid, pid, epoch, topic, p)
            codes[(topic, p)] = code
        return codes, []
    code, waits = txn.add_partitions(tid, pid, epoch, set(partitions))
    return dict.fromkeys(partitions, _fenced(code, version)), waits


def _add_partitions_error(request: Any, code: ErrorCode) -> Any:
    version = request.version
    if version >= 4:
        return AddPartitionsToTxnResponse(version=version, throttle_time_ms=0, error_code=code, results_by_transaction=[])
    partitions = _requested(request.v3_and_below_topics)
    return AddPartitionsToTxnResponse(
        version=version, throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(partitions, dict.fromkeys(partitions, code))
    )


@api(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5, error_response=_add_partitions_error)
def handle_add_partitions_to_txn(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if version >= 4 and not authz.cluster_allowed(ctx, authz.Op.CLUSTER_ACTION):
        return _add_partitions_error(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if version < 4:
        partitions = _requested(request.v3_and_below_topics)
        codes, waits = _add_one(
            ctx,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            partitions,
            False,
        )
        errors = [c for c in codes.values() if c]
        if errors:
            ctx.errors = errors

        def build(failure: ErrorCode | None) -> Any:
            final = codes if failure is None else dict.fromkeys(codes, failure)
            return AddPartitionsToTxnResponse(
                version=version, throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(partitions, final)
            )

        return _respond(ctx, waits, build)
    results: list[tuple[str, list[tuple[str, int]], dict[tuple[str, int], int]]] = []
    all_waits: list[Any] = []
    for t in request.transactions or ():
        partitions = _requested(t.topics)
        codes, waits = _add_one(ctx, t.transactional_id, t.producer_id, t.producer_epoch, partitions, bool(t.verify_only))
        results.append((t.transactional_id, partitions, codes))
        all_waits += waits

    def build_batched(failure: ErrorCode | None) -> Any:
        out = []
        for tid, partitions, codes in results:
            final = codes if failure is None else dict.fromkeys(codes, failure)
            out.append(_TxnResult(transactional_id=tid, topic_results=_topic_results(partitions, final)))
        return AddPartitionsToTxnResponse(version=version, throttle_time_ms=0, error_code=0, results_by_transaction=out)

    return _respond(ctx, all_waits, build_batched)


# -- AddOffsetsToTxn ----------------------------------------------------------------------


def _add_offsets_error(request: Any, code: ErrorCode) -> Any:
    return AddOffsetsToTxnResponse(version=request.version, throttle_time_ms=0, error_code=code)


@api(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, error_response=_add_offsets_error)
def handle_add_offsets_to_txn(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    txn = ctx.broker.txn
    checking = ctx.broker.authorizer is not None
    if checking and not authz.allowed(ctx, authz.Op.WRITE, authz.TRANSACTIONAL_ID, request.transactional_id or ""):
        code, waits = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, []
    elif checking and not authz.allowed(ctx, authz.Op.READ, authz.GROUP, request.group_id or ""):
        code, waits = ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    elif not request.transactional_id:
        code, waits = ErrorCode.INVALID_REQUEST, []
    elif txn is None:
        code, waits = ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    else:
        code, waits = txn.add_offsets(request.transactional_id, request.producer_id, request.producer_epoch, request.group_id or "")
        code = _fenced(code, version)
    if code:
        ctx.errors = [code]
    return _respond(ctx, waits, lambda failure: AddOffsetsToTxnResponse(version=version, throttle_time_ms=0, error_code=failure or code))


# -- EndTxn -------------------------------------------------------------------------------


def _end_txn_error(request: Any, code: ErrorCode) -> Any:
    return EndTxnResponse(version=request.version, throttle_time_ms=0, error_code=code)


@api(ApiKey.END_TXN, 0, 4, error_response=_end_txn_error)
def handle_end_txn(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    txn = ctx.broker.txn
    if ctx.broker.authorizer is not None and not authz.allowed(ctx, authz.Op.WRITE, authz.TRANSACTIONAL_ID, request.transactional_id or ""):
        code, waits = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, []
    elif not request.transactional_id:
        code, waits = ErrorCode.INVALID_REQUEST, []
    elif txn is None:
        code, waits = ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    else:
        code, waits = txn.end_txn(request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed))
        code = _fenced(code, version)
    if code:
        ctx.errors = [code]
    return _respond(ctx, waits, lambda failure: EndTxnResponse(version=version, throttle_time_ms=0, error_code=failure or code))


# -- TxnOffsetCommit ----------------------------------------------------------------------


def _commit_response(version: int, rows: list[tuple[str, list[tuple[int, int]]]]) -> Any:
    topics = [
        _CommitTopic(name=name, partitions=[_CommitPartition(partition_index=p, error_code=int(c)) for p, c in parts])
        for name, parts in rows
    ]
    return TxnOffsetCommitResponse(version=version, throttle_time_ms=0, topics=topics)


def _txn_commit_error(request: Any, code: ErrorCode) -> Any:
    rows = [(t.name, [(p.partition_index, code) for p in t.partitions or ()]) for t in request.topics or ()]
    return _commit_response(request.version, rows)


_UNAVAILABLE = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)


@api(ApiKey.TXN_OFFSET_COMMIT, 0, 5, error_response=_txn_commit_error)
def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    broker = ctx.broker
    denied: set[str] = set()
    if broker.authorizer is not None:  # WRITE on the transactional id, READ on the group, then each topic
        if not authz.allowed(ctx, authz.Op.WRITE, authz.TRANSACTIONAL_ID, request.transactional_id or ""):
            return _txn_commit_error(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not authz.allowed(ctx, authz.Op.READ, authz.GROUP, request.group_id or ""):
            return _txn_commit_error(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        names = {t.name for t in request.topics or ()}
        denied = names - authz.filter_allowed(ctx, authz.Op.READ, authz.TOPIC, names)
    rows: list[tuple[str, list[tuple[int, int]]]] = []
    commits: list[tuple[str, int, int, int, str | None]] = []
    slots: list[tuple[list[tuple[int, int]], int]] = []
    for t in request.topics or ():
        topic = broker.topics.get(t.name)
        limit = topic.partitions if topic is not None else 0
        out: list[tuple[int, int]] = []
        rows.append((t.name, out))
        for p in t.partitions or ():
            if t.name in denied:
                out.append((p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif 0 <= p.partition_index < limit:
                slots.append((out, len(out)))
                leader_epoch = p.committed_leader_epoch if version >= 2 else -1
                commits.append((t.name, p.partition_index, p.committed_offset, leader_epoch, p.committed_metadata))
                out.append((p.partition_index, 0))
            else:
                out.append((p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))  # TX-1 (OC-2)

    def fill(codes: list[ErrorCode] | ErrorCode) -> Any:
        for i, (out, index) in enumerate(slots):
            code = codes if isinstance(codes, ErrorCode) else codes[i]
            out[index] = (out[index][0], code)
        errors = [c for _n, parts in rows for _p, c in parts if c]
        if errors:
            ctx.errors = errors
        return _commit_response(version, rows)

    group_id = request.group_id
    if not group_id:
        return fill(ErrorCode.INVALID_GROUP_ID)  # TX-1
    if not commits:
        return fill([])
    txn = broker.txn
    groups = broker.coordinator
    if txn is None or groups is None:
        return fill(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    member_id = getattr(request, "member_id", "") if version >= 3 else ""
    instance_id = getattr(request, "group_instance_id", None) if version >= 3 else None
    generation = request.generation_id if version >= 3 else -1
    try:
        shard = groups.shard_for(group_id)
    except CoordinatorError as exc:
        return fill(exc.code)

    def write() -> Any:
        try:
            codes, waiter = shard.commit_txn_offsets(
                group_id, request.producer_id, request.producer_epoch, generation, member_id, instance_id, commits
            )
        except CoordinatorError as exc:
            return fill(map_append_error(exc.code))
        if waiter is None:
            return fill(codes)
        return _after([waiter], lambda failure: fill(failure or codes))

    if version >= 5:
        # KIP-890 part 2: from v5 the commit itself adds the group's `__consumer_offsets`
        # partition to the transaction (Kafka verifies with ADD_PARTITION), no AddOffsetsToTxn needed.
        code, waits = txn.add_offsets(request.transactional_id, request.producer_id, request.producer_epoch, group_id)
        if code is ErrorCode.PRODUCER_FENCED:
            code = ErrorCode.INVALID_PRODUCER_EPOCH  # as Kafka's AddPartitionsToTxnManager reports it
    else:
        code = txn.verify(request.transactional_id, request.producer_id, request.producer_epoch, OFFSETS_TOPIC, shard.partition)  # TX-3
        if code is ErrorCode.INVALID_TXN_STATE and version == 4:
            code = ErrorCode.TRANSACTION_ABORTABLE  # KIP-890 part 1: v4 knows the abortable error (Kafka's GENERIC_ERROR_SUPPORTED)
        waits = []
    if code is not ErrorCode.NONE:
        if code in _UNAVAILABLE or code is ErrorCode.CONCURRENT_TRANSACTIONS:
            code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if version >= 2 else ErrorCode.COORDINATOR_NOT_AVAILABLE
        return fill(code)
    if not waits:
        return write()

    async def added() -> Any:
        try:
            await asyncio.gather(*waits)
        except Exception:
            return fill(ErrorCode.NOT_COORDINATOR)  # the transaction's record could not be made durable
        result = write()
        return await result if asyncio.iscoroutine(result) else result

    return added()
