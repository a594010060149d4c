"""ShareFetch v1-v2 (KIP-932; v2: ShareAcquireMode and RENEW acknowledgements, KIP-1206/1222).

The checks follow KafkaApis.handleShareFetchRequest in its order: share groups enabled, a group
id, READ on the group, a member id (1 to 36 characters), v2's renew-only request, then the share
session (broker/share/sessions.py: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
SHARE_SESSION_LIMIT_REACHED after waiting max_wait_ms), then per partition: unknown topic ids,
READ on the topic, unknown partitions, leadership. Piggy-backed acknowledgements are applied
before records are acquired (broker/share/acknowledgements.py), and the answer waits for their
writes. As in Kafka, a partition's fetch error carries no message and the top-level error none
either; acknowledgement errors carry theirs.

The answer is encoded here, record sets as separate buffers (never copied), like Fetch's.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from broker.apis.share_common import NodeLeaders, leader_of, session_request_error
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.share.acknowledgements import handle_acknowledgements, requested_batches
from broker.share.manager import FetchParams, PartitionFetch
from broker.share.sessions import FINAL_EPOCH, SessionError
from protocol.apis import ApiKey
from protocol.encode import I16, I32, I64, NO_TAGS, array_len, bytes_len, string
from protocol.errors import ErrorCode

TopicIdPartition = tuple[uuid.UUID, int]
RECORD_LIMIT = 1  # ShareAcquireMode: 0 batch-optimized, 1 record-limit
FETCH_MAX_BYTES = 57_671_680  # Kafka's fetch.max.bytes default, which caps a ShareFetch's max_bytes


def encode_response(
    error: int,
    lock_timeout_ms: int,
    topics: dict[uuid.UUID, dict[int, tuple[PartitionFetch, tuple[int, str | None], tuple[int, int]]]],
    nodes: list[tuple[int, str, int, str | None]],
) -> list[Any]:
    """ShareFetchResponse v1/v2 (flexible) as buffers; partitions: (fetch, (ack error, ack message), (leader id, epoch))."""
    head = I32.pack(0) + I16.pack(error) + string(None, True) + I32.pack(lock_timeout_ms) + array_len(len(topics), True)
    out: list[Any] = []
    meta = bytearray(head)
    for topic_id, partitions in topics.items():
        meta += topic_id.bytes
        meta += array_len(len(partitions), True)
        for index, (fetch, (ack_error, ack_message), (leader, epoch)) in partitions.items():
            meta += I32.pack(index)
            meta += I16.pack(fetch.error)
            meta += string(None, True)  # KafkaApis rebuilds partition data without the message
            meta += I16.pack(ack_error)
            meta += string(ack_message, True)
            meta += I32.pack(leader) + I32.pack(epoch) + NO_TAGS
            records = fetch.records
            meta += bytes_len(len(records), True)
            if len(records):
                out.append(bytes(meta))
                out.append(records)
                meta = bytearray()
            meta += array_len(len(fetch.acquired), True)
            for first, last, count in fetch.acquired:
                meta += I64.pack(first) + I64.pack(last) + I16.pack(count) + NO_TAGS
            meta += NO_TAGS
        meta += NO_TAGS
    meta += array_len(len(nodes), True)
    for node_id, host, port, rack in nodes:
        meta += I32.pack(node_id) + string(host, True) + I32.pack(port) + string(rack, True) + NO_TAGS
    meta += NO_TAGS
    out.append(bytes(meta))
    return out


def _error(request: Any, code: ErrorCode) -> list[Any]:
    """ShareFetchRequest.getErrorResponse: the error alone, no message, lock timeout 0."""
    return encode_response(int(code), 0, {}, [])


def _failed(ctx: RequestContext, code: ErrorCode) -> list[Any]:
    ctx.errors = [int(code)]
    return encode_response(int(code), 0, {}, [])


@api(ApiKey.SHARE_FETCH, 1, 2, error_response=_error)
def handle_share_fetch(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    version = ctx.api_version
    code = session_request_error(ctx, request)
    if code is not None:
        return _failed(ctx, code)
    group = request.group_id
    member = request.member_id
    epoch = request.share_session_epoch
    acks_present = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    topics = broker.topics

    def name_of(topic_id: uuid.UUID) -> str | None:
        topic = topics.get_by_id(topic_id)
        return topic.name if topic is not None else None

    fetch_data = [((t.topic_id, p.partition_index), name_of(t.topic_id)) for t in request.topics for p in t.partitions]
    forget = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    renew_ack = version >= 2 and request.is_renew_ack
    if renew_ack and (request.max_bytes or request.min_bytes or request.max_records or request.max_wait_ms):
        return _failed(ctx, ErrorCode.INVALID_REQUEST)
    manager = broker.share_partitions
    try:
        context = manager.new_context(group, fetch_data, forget, member, epoch, acks_present, ctx.conn)
    except SessionError as exc:
        if exc.code is ErrorCode.SHARE_SESSION_LIMIT_REACHED:
            return _limit_reached(ctx, request.max_wait_ms)
        return _failed(ctx, exc.code)
    erroneous, valid = context.partitions()
    names = {n for _, n in valid} | {n for _, n in fetch_data if n is not None}
    readable = authz.filter_allowed(ctx, authz.Op.READ, authz.TOPIC, names)
    ack_results: dict[TopicIdPartition, tuple[ErrorCode, str | None]] = {}
    waiters: list[Any] = []
    if acks_present:
        batches, ack_erroneous = requested_batches(request.topics, name_of)
        ack_results, waiters = handle_acknowledgements(
            manager,
            group,
            member,
            batches,
            ack_erroneous,
            lambda name: name in readable,
            name_of,
            lambda topic, partition: _leads(broker, topic, partition),
            version >= 2,
            renew_ack,
        )
    fetches: dict[TopicIdPartition, PartitionFetch] = {tip: PartitionFetch(code) for tip, code in erroneous.items()}
    interested: list[tuple[TopicIdPartition, str]] = []
    leaders = NodeLeaders(ctx)
    if not renew_ack:
        for tip, topic in valid:
            if topic not in readable:
                fetches[tip] = PartitionFetch(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            t = topics.get(topic)
            if t is None or not 0 <= tip[1] < t.partitions:
                fetches[tip] = PartitionFetch(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            code, _epoch = broker.partition_check(topic, tip[1])
            if code is not ErrorCode.NONE:
                fetches[tip] = PartitionFetch(code)
                continue
            interested.append((tip, topic))
    group_settings = manager.settings
    lock_timeout = group_settings.record_lock_duration_ms(group)
    if not interested:
        return _answer(ctx, context, group, member, epoch, fetches, ack_results, waiters, leaders, lock_timeout)
    params = FetchParams(
        max_wait_ms=request.max_wait_ms,
        min_bytes=min(request.min_bytes, request.max_bytes),
        max_bytes=min(request.max_bytes, FETCH_MAX_BYTES),
        max_records=request.max_records,
        batch_size=request.batch_size,
        record_limit=version >= 2 and request.share_acquire_mode == RECORD_LIMIT,
        read_committed=group_settings.read_committed(group),
    )

    async def fetch() -> list[Any]:
        got = await manager.fetch(group, member, params, epoch, interested)
        fetches.update(got)
        answer = _answer(ctx, context, group, member, epoch, fetches, ack_results, waiters, leaders, lock_timeout)
        return await answer if asyncio.iscoroutine(answer) else answer  # type: ignore[no-any-return]

    return fetch()


def _leads(broker: Any, topic: str, partition: int) -> bool:
    """The partition exists and is led here (elsewhere this broker has no share partition for it)."""
    t = broker.topics.get(topic)
    return t is not None and 0 <= partition < t.partitions and broker.partition_check(topic, partition)[0] is ErrorCode.NONE


async def _limit_reached(ctx: RequestContext, max_wait_ms: int) -> list[Any]:
    """Kafka answers SHARE_SESSION_LIMIT_REACHED after an idle wait of max_wait_ms."""
    await asyncio.sleep(max(max_wait_ms, 0) / 1000)
    return _failed(ctx, ErrorCode.SHARE_SESSION_LIMIT_REACHED)


def _answer(
    ctx: RequestContext,
    context: Any,
    group: str,
    member: str,
    epoch: int,
    fetches: dict[TopicIdPartition, PartitionFetch],
    ack_results: dict[TopicIdPartition, tuple[ErrorCode, str | None]],
    waiters: list[Any],
    leaders: NodeLeaders,
    lock_timeout: int,
) -> Any:
    manager = ctx.broker.share_partitions
    error, partitions = context.answer(fetches)
    topics: dict[uuid.UUID, dict[int, tuple[PartitionFetch, tuple[int, str | None], tuple[int, int]]]] = {}
    for (topic_id, index), fetch in partitions.items():
        leader = leaders.of(topic_id, index) if fetch.error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH) else (0, 0)
        topics.setdefault(topic_id, {})[index] = (fetch, (0, None), leader)
    for (topic_id, index), (code, message) in ack_results.items():
        entry = topics.setdefault(topic_id, {})
        if index in entry:
            fetch, _, leader = entry[index]
            entry[index] = (fetch, (int(code), message), leader)
        else:
            entry[index] = (PartitionFetch(), (int(code), message), (0, 0))
    if epoch == FINAL_EPOCH:
        waiters = waiters + manager.release_session(group, member)
    errors = [int(f.error) for _, f in partitions.items() if f.error] + [int(c) for c, _ in ack_results.values() if c]
    if error:
        errors.append(int(error))
    ctx.errors = errors or None
    body = encode_response(int(error), lock_timeout, topics, leaders.endpoints())
    if not waiters:
        return body

    async def durable() -> list[Any]:
        try:
            for waiter in waiters:
                await waiter
        except Exception:
            return _failed(ctx, ErrorCode.UNKNOWN_SERVER_ERROR)
        return body

    return durable()


__all__ = ["encode_response", "handle_share_fetch", "leader_of"]
