"""OffsetCommit v0-v9 (OC-1..OC-8).

v0 is treated as v1 with generation -1 and an empty member id (OC-1). Topics and partitions
unknown to the broker are answered by this layer and never reach the coordinator (OC-2).
The request is read and the response written by protocol/commit_codec.py: this is the hot
path of every consumer group, and the schema codec alone costs more than the rest of it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from broker.context import RequestContext
from broker.coordinator.errors import AppendsFailed, CoordinatorError, map_append_error
from broker.registry import api
from protocol import commit_codec
from protocol.apis import ApiKey
from protocol.commit_codec import CommitPartition, CommitRequest
from protocol.errors import ErrorCode

Rows = list[tuple[str, list[tuple[int, int]]]]


def _error(request: CommitRequest, code: ErrorCode) -> bytes:
    """Every partition of the request carries `code` (OC-8): faults and unexpected failures."""
    rows: dict[str, list[tuple[int, int]]] = {}
    for name, parts in request.topics:
        rows.setdefault(name, []).extend((p.partition, code) for p in parts)
    return commit_codec.encode_response(request.version, list(rows.items()))


@api(ApiKey.OFFSET_COMMIT, 0, 9, error_response=_error, decoder=commit_codec.decode_request)
def handle_offset_commit(ctx: RequestContext, request: CommitRequest) -> Any:
    version = ctx.api_version
    broker = ctx.broker
    known_topics = broker.topics.topics
    rows: Rows = []
    commits: list[tuple[str, CommitPartition]] = []
    slots: list[tuple[list[tuple[int, int]], int]] = []
    unknown: list[int] = []  # OC-2 codes, for the request metrics
    for name, parts in request.topics:
        topic = known_topics.get(name)
        limit = topic.partitions if topic is not None else 0
        out: list[tuple[int, int]] = []
        rows.append((name, out))
        for cp in parts:
            if 0 <= cp.partition < limit:
                slots.append((out, len(out)))
                commits.append((name, cp))
                out.append((cp.partition, 0))
            else:
                out.append((cp.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))  # OC-2
                unknown.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not commits:
        ctx.errors = unknown
        return commit_codec.encode_response(version, rows)

    def fill(codes: list[ErrorCode] | ErrorCode) -> bytes:
        single = codes if isinstance(codes, ErrorCode) else None
        for i, (out, index) in enumerate(slots):
            out[index] = (out[index][0], single if single is not None else codes[i])  # type: ignore[index]
        # The answer's error codes, for the request metrics (broker/metrics/errors.py).
        failed = [c for c in codes if c] if single is None else ([single] * len(slots) if single else [])  # type: ignore[union-attr]
        if unknown or failed:
            ctx.errors = unknown + failed
        return commit_codec.encode_response(version, rows)

    group_id = request.group_id
    if group_id is None:
        return fill(ErrorCode.INVALID_GROUP_ID)  # GE-4: "" is a legal group here
    coordinator = broker.coordinator
    batched = coordinator.batches_commits
    try:
        shard = coordinator.shard_for(group_id)
        codes, waiter = shard.commit_offsets(
            group_id, request.generation, request.member_id, request.instance_id, request.retention_ms, version, commits, batched
        )
    except CoordinatorError as exc:
        return fill(map_append_error(exc.code))
    if batched:
        # Appended with the other commits of this loop turn, from every connection, before any
        # of their answers leaves (broker/coordinator/turn.py). If this shard's append fails (a
        # full disk), the answer becomes the mapped error (GE-3); the shard reloads from its
        # log, so nothing answered with success is lost.
        def on_failure(exc: Exception) -> bytes | None:
            failed = exc.failed.get(shard) if isinstance(exc, AppendsFailed) else None
            if failed is None and isinstance(exc, AppendsFailed):
                return None  # this commit's shard appended: its answer stands
            return fill(map_append_error(failed.code) if failed is not None else ErrorCode.UNKNOWN_SERVER_ERROR)

        ctx.conn.before_flush(coordinator.commit_turn, on_failure)
    if waiter is None:
        return fill(codes)
    return _after(waiter, fill, codes)


async def _after(waiter: Awaitable[Any], fill: Any, codes: list[ErrorCode]) -> Any:
    try:
        await waiter
    except Exception:
        return fill(ErrorCode.NOT_COORDINATOR)  # the append could not be made durable (GE-3)
    return fill(codes)
