"""OffsetCommit v2-v9 (OC-1..OC-8).

v0 and v1 are not served, as in Kafka 4 (OC-1, KIP-896). Topics and partitions
unknown to the broker are answered by this layer and never reach the coordinator (OC-2).
The request is read and the response written by protocol/commit_codec.py: this is the hot
path of every consumer group, and the schema codec alone costs more than the rest of it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import AppendsFailed, CoordinatorError, map_append_error
from broker.security import authorize as authz
from protocol import commit_codec
from protocol.apis import ApiKey
from protocol.commit_codec import CommitPartition, CommitRequest
from protocol.errors import ErrorCode

Rows = list[tuple[str, list[tuple[int, int]]]]


def _error(request: CommitRequest, code: ErrorCode) -> bytes:
    """Every partition of the request carries `code` (OC-8): faults and unexpected failures."""
    rows: dict[str, list[tuple[int, int]]] = {}
    for name, parts in request.topics:
        rows.setdefault(name, []).extend((p[0], code) for p in parts)
    return commit_codec.encode_response(request.version, list(rows.items()))


class _Answer:
    """How one request is answered: OC-2's error for unknown partitions, the commit codes (one
    per commit, or one for all) for the others, and the error codes for the request metrics."""

    __slots__ = ("commits", "ctx", "limits", "shard", "topics", "unknown")

    def __init__(self, ctx: RequestContext, topics: Any, limits: list[int], unknown: int, commits: int) -> None:
        self.ctx = ctx
        self.topics = topics
        self.limits = limits
        self.unknown = unknown
        self.commits = commits
        self.shard: Any = None

    def fill(self, codes: list[ErrorCode] | ErrorCode) -> bytes:
        if isinstance(codes, ErrorCode):
            failed = [codes] * self.commits if codes else []
        else:
            failed = [c for c in codes if c] if any(codes) else []
        if self.unknown or failed:
            # The answer's error codes, for the request metrics (broker/metrics/errors.py).
            self.ctx.errors = [_UNKNOWN] * self.unknown + failed
        return _encode_answer(self.ctx.api_version, self.topics, self.limits, codes, _UNKNOWN)

    def on_failure(self, exc: Exception) -> bytes | None:
        """The batch append of this loop turn failed somewhere (broker/runtime/turn.py)."""
        failed = exc.failed.get(self.shard) if isinstance(exc, AppendsFailed) else None
        if failed is None and isinstance(exc, AppendsFailed):
            return None  # this commit's shard appended: its answer stands
        return self.fill(map_append_error(failed.code) if failed is not None else ErrorCode.UNKNOWN_SERVER_ERROR)


class _DeniedAnswer(_Answer):
    """With an authorizer: the partitions of topics without READ get TOPIC_AUTHORIZATION_FAILED."""

    __slots__ = ("denied",)

    def fill(self, codes: list[ErrorCode] | ErrorCode) -> bytes:
        it = iter(codes) if isinstance(codes, list) else None
        rows: Rows = []
        for (name, parts), limit in zip(self.topics, self.limits, strict=True):
            if name in self.denied:
                rows.append((name, [(p[0], ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in parts]))
                continue
            rows.append((name, [(p[0], (next(it) if it is not None else codes) if 0 <= p[0] < limit else _UNKNOWN) for p in parts]))
        self.ctx.errors = [c for _n, r in rows for _p, c in r if c] or None
        return commit_codec.encode_response(self.ctx.api_version, rows)


@api(ApiKey.OFFSET_COMMIT, 2, 9, error_response=_error, decoder=commit_codec.decode_request)
def handle_offset_commit(ctx: RequestContext, request: CommitRequest) -> Any:
    broker = ctx.broker
    known_topics = broker.topics.topics
    topics = request.topics
    denied: set[str] = set()
    if broker.authorizer is not None:  # READ on the group, then on each topic (KafkaApis' order)
        if not authz.allowed(ctx, authz.Op.READ, authz.GROUP, request.group_id or ""):
            return _error(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        names = {name for name, _parts in topics}
        denied = names - authz.filter_allowed(ctx, authz.Op.READ, authz.TOPIC, names)
    commits: list[tuple[str, CommitPartition]] = []
    unknown = 0  # OC-2 answers, for the request metrics
    limits: list[int] = []  # each topic's partition count as this request saw it
    for name, parts in topics:
        topic = known_topics.get(name)
        limit = topic.partitions if topic is not None and name not in denied else 0
        limits.append(limit)
        known = [(name, cp) for cp in parts if 0 <= cp[0] < limit]
        unknown += len(parts) - len(known)
        commits += known
    if denied:
        answer: _Answer = _DeniedAnswer(ctx, topics, limits, unknown, len(commits))
        answer.denied = denied  # type: ignore[attr-defined]
    else:
        answer = _Answer(ctx, topics, limits, unknown, len(commits))
    if not commits:
        return answer.fill([])
    group_id = request.group_id
    if group_id is None:
        return answer.fill(ErrorCode.INVALID_GROUP_ID)  # GE-4: "" is a legal group here
    coordinator = broker.coordinator
    batched = coordinator.batches_commits
    try:
        shard = answer.shard = coordinator.shard_for(group_id)
        codes, waiter = shard.commit_offsets(
            group_id, request.generation, request.member_id, request.instance_id, request.retention_ms, ctx.api_version, commits, batched
        )
    except CoordinatorError as exc:
        return answer.fill(map_append_error(exc.code))
    if batched:
        # Appended with the other commits of this loop turn, from every connection, before any
        # of their answers leaves (broker/runtime/turn.py). If this shard's append fails (a
        # full disk), the answer becomes the mapped error (GE-3); the shard reloads from its
        # log, so nothing answered with success is lost.
        ctx.conn.before_flush(coordinator.commit_turn, answer.on_failure)
    if waiter is None:
        return answer.fill(codes)
    return _after(waiter, answer.fill, codes)


_UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
_encode_answer = commit_codec.encode_answer  # the compiled twin where it is built


async def _after(waiter: Awaitable[Any], fill: Any, codes: list[ErrorCode]) -> Any:
    try:
        await waiter
    except Exception:
        return fill(ErrorCode.NOT_COORDINATOR)  # the append could not be made durable (GE-3)
    return fill(codes)
