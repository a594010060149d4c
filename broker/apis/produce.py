"""Produce v3-v11: each partition's single v2 batch is validated, appended as stored bytes and
acknowledged once it is in the log file (and fsynced first under `--fsync always`).

Checks run in Kafka's order: transactional records need a transactional id; unknown topic or
partition; the request-level batch rules of ProduceRequest.validateRecords (one batch, magic
2, zstd from v7); required acks; internal topics (only `__admin_client` may write them); then
the log's own rules (storage.validation) and idempotent-producer sequence checks. A rejected
batch appends nothing. With acks=0 nothing is sent back, and an error closes the connection
so the client notices (as Kafka does).

A transactional batch is verified with the transaction coordinator before it is appended, as
Kafka's partition leaders do (KIP-890 part 1, transaction.partition.verification.enable):
the producer id and epoch must be the transactional id's current ones
(INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING) and the partition must be in its
ongoing transaction (INVALID_TXN_STATE); a coordinator that cannot answer yet (loading,
markers in flight) is NOT_ENOUGH_REPLICAS, which producers retry.

In a cluster (`--brokers N`) a partition is written on its leader only: elsewhere it is
NOT_LEADER_OR_FOLLOWER, which from v10 carries KIP-951's CurrentLeader (the leader's id and epoch)
and the response NodeEndpoints (its address), so the client retries there without a Metadata
round trip. With acks=all, an ISR smaller than min.insync.replicas (at most the replication
factor) is NOT_ENOUGH_REPLICAS, nothing appended, as Kafka's Partition.appendRecordsToLeader.

Unlike Kafka, an unknown topic is auto-created here when the broker allows it (Kafka answers
UNKNOWN_TOPIC_OR_PARTITION and lets the client's next Metadata request create it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from broker.network.connection import CloseConnection
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.security.listeners import listener_name
from broker.topics.catalog import INTERNAL_TOPICS
from protocol import produce_codec
from protocol.apis import ApiKey, request_class
from protocol.encode import I16, I32, I64, NO_TAGS, array_len, string
from protocol.errors import ErrorCode
from protocol.leader_discovery import Endpoint, leader_id_and_epoch, node_endpoints, tagged
from protocol.nullability import checker
from protocol.records import COMPRESSION_MASK, LOG_OVERHEAD, MAGIC_OFFSET, TRANSACTIONAL_BIT
from storage.errors import LogError, RecordErrors
from storage.validation import validate_client_batch

ADMIN_CLIENT_ID = "__admin_client"
_RECORD_OVERHEAD_V0 = 14  # Kafka's smallest legal record size field
_ZSTD = 4
_FLEXIBLE_FROM = 9


@dataclass(slots=True)
class PartitionResult:
    index: int
    error: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: list[tuple[int, str]] = field(default_factory=list)
    error_message: str | None = None
    current_leader: tuple[int, int] | None = None  # KIP-951 (v10+): leader id and epoch


def encode_response(version: int, topics: list[tuple[str, list[PartitionResult]]], endpoints: list[Endpoint] | None = None) -> bytes:
    """ProduceResponse v3-v11 bytes (from v10 with KIP-951's CurrentLeader and NodeEndpoints)."""
    flex = version >= _FLEXIBLE_FROM
    out = [array_len(len(topics), flex)]
    for name, parts in topics:
        out.append(string(name, flex))
        out.append(array_len(len(parts), flex))
        for p in parts:
            out.append(I32.pack(p.index) + I16.pack(p.error) + I64.pack(p.base_offset) + I64.pack(p.log_append_time_ms))
            if version >= 5:
                out.append(I64.pack(p.log_start_offset))
            if version >= 8:
                out.append(array_len(len(p.record_errors), flex))
                for batch_index, message in p.record_errors:
                    out.append(I32.pack(batch_index) + string(message, flex))
                    if flex:
                        out.append(NO_TAGS)
                out.append(string(p.error_message, flex))
            if flex:
                leader = p.current_leader if version >= 10 else None
                out.append(NO_TAGS if leader is None else tagged([(0, leader_id_and_epoch(*leader))]))
        if flex:
            out.append(NO_TAGS)
    out.append(I32.pack(0))  # throttle_time_ms
    if flex:
        out.append(tagged([(0, node_endpoints(endpoints))]) if endpoints and version >= 10 else NO_TAGS)
    return b"".join(out)


def _error(request: Any, code: ErrorCode) -> bytes:
    topics = [(t.name, [PartitionResult(p.index, int(code)) for p in t.partition_data]) for t in request.topic_data]
    return encode_response(request.API_VERSION, topics)


def check_records(records: bytes | None, version: int) -> tuple[ErrorCode, memoryview | None]:
    """ProduceRequest.validateRecords: exactly one whole v2 batch (trailing partial bytes are
    ignored, as Kafka's batch iterator does)."""
    if records is None or len(records) < LOG_OVERHEAD:
        return ErrorCode.INVALID_RECORD, None
    view = memoryview(records)
    size_field = I32.unpack_from(view, 8)[0]
    if size_field < _RECORD_OVERHEAD_V0:
        return ErrorCode.CORRUPT_MESSAGE, None
    size = size_field + LOG_OVERHEAD
    if size > len(view):
        return ErrorCode.INVALID_RECORD, None  # no whole batch at all
    if view[MAGIC_OFFSET] != 2:
        return ErrorCode.INVALID_RECORD, None
    if version < 7 and size > 22 and (view[22] & COMPRESSION_MASK) == _ZSTD:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, None
    rest = len(view) - size
    if rest >= LOG_OVERHEAD:
        nxt = I32.unpack_from(view, size + 8)[0]
        if nxt < _RECORD_OVERHEAD_V0:
            return ErrorCode.CORRUPT_MESSAGE, None
        if size + LOG_OVERHEAD + nxt <= len(view):
            return ErrorCode.INVALID_RECORD, None  # a second batch
    return ErrorCode.NONE, view[:size]


def _has_transactional_records(request: Any) -> bool:
    for t in request.topic_data:
        for p in t.partition_data:
            rec = p.records
            if rec is not None and len(rec) > 22 and rec[MAGIC_OFFSET] == 2 and rec[22] & TRANSACTIONAL_BIT:
                return True
    return False


def _decode(body: memoryview, version: int) -> Any:
    """The request with each partition's records a view of the frame (protocol/produce_codec.py);
    what that codec leaves alone, the schema codec decodes and checks as for any API."""
    request = produce_codec.decode_request(body, version)
    if request is None:
        cls = request_class(ApiKey.PRODUCE)
        request = cls.decode(body, version=version)
        check = checker(cls, version)
        if check is not None:
            check(request, "")
    return request


@api(ApiKey.PRODUCE, 3, 11, error_response=_error, decoder=_decode)
def handle_produce(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    version = ctx.api_version
    acks = request.acks
    authorizer = broker.authorizer
    if _has_transactional_records(request) and (
        request.transactional_id is None
        or (authorizer is not None and not authz.allowed(ctx, authz.Op.WRITE, authz.TRANSACTIONAL_ID, request.transactional_id))
    ):
        ctx.errors = [ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED] * sum(len(t.partition_data) for t in request.topic_data)
        return _respond(acks, version, _error(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), True, [])
    topics_mgr = broker.topics
    logs = broker.logs
    valid_acks = acks in (-1, 0, 1)
    internal_allowed = ctx.client_id == ADMIN_CLIENT_ID
    appended: list[Any] = []
    failed = False
    out: list[tuple[str, list[PartitionResult]]] = []
    cluster = broker.cluster
    endpoints: dict[int, Endpoint] = {}
    writable = (
        None if authorizer is None else authz.filter_allowed(ctx, authz.Op.WRITE, authz.TOPIC, (td.name for td in request.topic_data))
    )
    for td in request.topic_data:
        name = td.name
        denied = writable is not None and name not in writable
        topic = topics_mgr.get(name)
        if topic is None and not denied:
            topic = topics_mgr.maybe_auto_create(name)
        parts: list[PartitionResult] = []
        out.append((name, parts))
        for pd in td.partition_data:
            res = PartitionResult(pd.index)
            parts.append(res)
            log = logs.get(name, pd.index) if topic is not None else None
            if denied:
                res.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif log is None:
                res.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif cluster is not None and (code := broker.partition_check(name, pd.index)[0]):
                res.error = code  # another node of the cluster leads it
                if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and version >= 10:  # KIP-951
                    leader, epoch, endpoint = cluster.current_leader(name, pd.index, listener_name(ctx))
                    res.current_leader = (leader, epoch)
                    if endpoint is not None:
                        endpoints[endpoint[0]] = endpoint
            else:
                code, batch = check_records(pd.records, version)
                if code:
                    res.error = code
                elif not valid_acks:
                    res.error = ErrorCode.INVALID_REQUIRED_ACKS
                elif name in INTERNAL_TOPICS and not internal_allowed:
                    res.error = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif cluster is not None and acks == -1 and _too_few_in_sync(cluster, topic, pd.index, broker.config):
                    res.error = ErrorCode.NOT_ENOUGH_REPLICAS
                    res.log_start_offset = log.log_start_offset  # as ReplicaManager answers it
                else:
                    assert batch is not None
                    _append(log, batch, res, request.transactional_id, broker)
                    if not res.error:
                        appended.append(log)
            if res.error:
                failed = True
    if failed:  # for the request metrics (broker/metrics/errors.py)
        ctx.errors = [p.error for _name, parts in out for p in parts if p.error]
    return _respond(acks, version, out, failed, appended, ctx, list(endpoints.values()))


def _too_few_in_sync(cluster: Any, topic: Any, partition: int, config: Any) -> bool:
    """Partition.appendRecordsToLeader: fewer in-sync replicas than min.insync.replicas (capped at
    the replication factor) refuse an acks=all write."""
    state = cluster.partition(topic.name, partition)
    if state is None or len(state.isr) >= len(state.replicas):
        return False  # all in sync: no minimum can fail (the common case costs no config lookup)
    from broker.config.topic_configs import effective_configs

    return len(state.isr) < min(int(effective_configs(topic, config)["min.insync.replicas"]), len(state.replicas))


_RETRY_LATER = (
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS,
)


def _verify_transactional(broker: Any, transactional_id: str | None, header: Any, topic: str, partition: int) -> int:
    txn = broker.txn
    if txn is None or transactional_id is None:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    code = txn.verify(transactional_id, header.producer_id, header.producer_epoch, topic, partition)
    return ErrorCode.NOT_ENOUGH_REPLICAS if code in _RETRY_LATER else code


def _append(log: Any, batch: memoryview, res: PartitionResult, transactional_id: str | None = None, broker: Any = None) -> None:
    try:
        header, max_timestamp = validate_client_batch(batch, log.config, log.name)
        if header.is_transactional:
            code = _verify_transactional(broker, transactional_id, header, log.topic, log.partition)
            if code:
                res.error = code
                res.log_start_offset = log.log_start_offset
                return
        # Not copied unless its header must change: the log writes the patched head and the rest.
        result = log.append(batch, max_timestamp=max_timestamp)
    except RecordErrors as exc:
        res.error = exc.code
        res.record_errors = exc.record_errors
        res.error_message = exc.message
        res.log_start_offset = log.log_start_offset
        return
    except LogError as exc:
        res.error = exc.code
        if exc.code not in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR):
            res.log_start_offset = log.log_start_offset
        return
    res.base_offset = result.base_offset
    res.log_append_time_ms = result.log_append_time_ms
    res.log_start_offset = result.log_start_offset


def _respond(
    acks: int,
    version: int,
    out: Any,
    failed: bool,
    appended: list[Any],
    ctx: RequestContext | None = None,
    endpoints: list[Endpoint] | None = None,
) -> bytes | Awaitable[bytes] | None:
    if acks == 0:
        if failed:
            raise CloseConnection("produce with acks=0 failed on a partition; closing so the client notices")
        return None
    body = out if isinstance(out, bytes) else encode_response(version, out, endpoints)
    if ctx is None or not appended:
        return body
    logs = ctx.broker.logs
    waits = [w for w in (logs.wait_durable(log) for log in {id(log): log for log in appended}.values()) if w is not None]
    if not waits:
        return body
    return _after_fsync(waits, body, version, out, endpoints)


async def _after_fsync(
    waits: list[Awaitable[None]],
    body: bytes,
    version: int,
    out: list[tuple[str, list[PartitionResult]]],
    endpoints: list[Endpoint] | None = None,
) -> bytes:
    """--fsync always: answer once the group commit covering these appends is done."""
    try:
        await asyncio.gather(*waits)
    except LogError:
        for _name, parts in out:
            for p in parts:
                if not p.error:
                    p.error = ErrorCode.KAFKA_STORAGE_ERROR
                    p.base_offset = p.log_append_time_ms = p.log_start_offset = -1
        return encode_response(version, out, endpoints)
    return body
