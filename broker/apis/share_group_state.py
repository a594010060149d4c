"""The share coordinator's APIs (KIP-932): InitializeShareGroupState v0 (83), ReadShareGroupState
v0 (84), WriteShareGroupState v0-v1 (85), DeleteShareGroupState v0 (86) and
ReadShareGroupStateSummary v0-v1 (87).

Brokers call them on the share coordinator; kaflet's own share partitions and group coordinator
call it in-process (broker/share/coordinator/service.py), and these modules serve the same
operations to any client that sends them, as Kafka does: CLUSTER_ACTION on the cluster, then
ShareCoordinatorService's checks (a request without topics, with a topic without partitions or
without a group id gets an empty answer), then one operation per partition, each on the shard
its key maps to, with its own error.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.share.coordinator.shard import PartitionResult
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode
from storage.share_state_records import StateBatch

InitializeResponse = lazy_response(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
ReadResponse = lazy_response(ApiKey.READ_SHARE_GROUP_STATE)
WriteResponse = lazy_response(ApiKey.WRITE_SHARE_GROUP_STATE)
DeleteResponse = lazy_response(ApiKey.DELETE_SHARE_GROUP_STATE)
SummaryResponse = lazy_response(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)

ZERO = uuid.UUID(int=0)
NOT_AVAILABLE = "Share coordinator is not available."


def _topic_id(value: uuid.UUID | None) -> uuid.UUID:
    """The wire's all-zero id (which the codec reads as None) is a topic id like any other to Kafka."""
    return value if value is not None else ZERO


def _results(
    request: Any, op: Callable[[str, uuid.UUID, Any], tuple[PartitionResult, Awaitable[Any] | None]]
) -> tuple[list[tuple[uuid.UUID, list[PartitionResult]]], list[Awaitable[Any]]] | None:
    """Run `op` on every partition, grouped by topic as the answer groups them; None for a
    request ShareCoordinatorService answers empty."""
    if not request.topics or any(not t.partitions for t in request.topics) or not request.group_id:
        return None
    out: dict[uuid.UUID, list[PartitionResult]] = {}
    waiters = []
    for t in request.topics:
        topic_id = _topic_id(t.topic_id)
        for p in t.partitions:
            result, waiter = op(request.group_id, topic_id, p)
            out.setdefault(topic_id, []).append(result)
            if waiter is not None:
                waiters.append(waiter)
    return list(out.items()), waiters


def _unavailable(request: Any) -> list[tuple[uuid.UUID, list[PartitionResult]]]:
    return _error_of(request.topics, ErrorCode.COORDINATOR_NOT_AVAILABLE, NOT_AVAILABLE)


def _serve(
    ctx: RequestContext,
    request: Any,
    op: Callable[[Any, str, uuid.UUID, Any], tuple[PartitionResult, Awaitable[Any] | None]],
    build: Callable[[list[tuple[uuid.UUID, list[PartitionResult]]]], Any],
) -> Any:
    """The shared steps: CLUSTER_ACTION, the coordinator running, the operations, the durability wait."""
    if not authz.cluster_allowed(ctx, authz.Op.CLUSTER_ACTION):
        return build(_error_of(request.topics, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    coordinator = getattr(ctx.broker, "share_coordinator", None)
    if not request.topics or any(not t.partitions for t in request.topics) or not request.group_id:
        return build([])
    if coordinator is None or not coordinator.active:
        return build(_unavailable(request))
    cluster = ctx.broker.cluster
    node_id = ctx.broker.config.node_id

    def routed(g: str, t: uuid.UUID, p: Any) -> tuple[PartitionResult, Awaitable[Any] | None]:
        if cluster is not None and cluster.share_coordinator_of(g, t, p.partition)[1] != node_id:
            return PartitionResult(p.partition, ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR.message), None
        return op(coordinator, g, t, p)

    done = _results(request, routed)
    assert done is not None
    results, waiters = done
    response = build(results)
    if not waiters:
        return response

    async def durable() -> Any:
        for waiter in waiters:
            try:
                await waiter
            except Exception:
                return build(_unavailable(request))
        return response

    return durable()


def _error_of(topics: Any, code: ErrorCode, message: str | None = None) -> list[tuple[uuid.UUID, list[PartitionResult]]]:
    """Every partition of `topics` failed with `code` (and `message`, else the code's own)."""
    text = code.message if message is None else message
    return [(_topic_id(t.topic_id), [PartitionResult(p.partition, code, text) for p in t.partitions]) for t in topics]


Results = list[tuple[uuid.UUID, list[PartitionResult]]]
# a partition's fields past partition, error_code and error_message: (result, ok, the wire class) -> fields
ExtraFields = Callable[[PartitionResult, bool, Any], dict[str, Any]]


def _builder(response: Any, result: str, extra: ExtraFields | None = None) -> Callable[[int], Callable[[Results], Any]]:
    """The answer builder of one of these APIs: `response`'s `result` structs (topic id and
    partitions), each partition with its error and `extra`'s fields."""

    def for_version(version: int) -> Callable[[Results], Any]:
        def build(results: Results) -> Any:
            Result = getattr(response, result)
            Partition = Result.PartitionResult

            def partition(r: PartitionResult) -> Any:
                fields = extra(r, r.error is ErrorCode.NONE, Partition) if extra is not None else {}
                return Partition(partition=r.partition, error_code=r.error, error_message=r.message, **fields)

            return response(version=version, results=[Result(topic_id=t, partitions=[partition(r) for r in rs]) for t, rs in results])

        return build

    return for_version


# -- InitializeShareGroupState ----------------------------------------------------------------


_initialize_build = _builder(InitializeResponse, "InitializeStateResult")


@api(
    ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, 0, error_response=lambda req, code: _initialize_build(req.version)(_error_of(req.topics, code))
)
def handle_initialize_share_group_state(ctx: RequestContext, request: Any) -> Any:
    return _serve(
        ctx, request, lambda c, g, t, p: c.initialize(g, t, p.partition, p.state_epoch, p.start_offset), _initialize_build(ctx.api_version)
    )


# -- ReadShareGroupState --------------------------------------------------------------------


def _batches_out(cls: Any, batches: list[StateBatch]) -> list[Any]:
    return [
        cls(first_offset=b.first_offset, last_offset=b.last_offset, delivery_state=b.delivery_state, delivery_count=b.delivery_count)
        for b in batches
    ]


_read_build = _builder(
    ReadResponse,
    "ReadStateResult",
    lambda r, ok, Partition: {
        "state_epoch": r.state_epoch if ok else 0,
        "start_offset": r.start_offset if ok else 0,
        "state_batches": _batches_out(Partition.StateBatch, r.batches) if ok else [],
    },
)


@api(ApiKey.READ_SHARE_GROUP_STATE, 0, 0, error_response=lambda req, code: _read_build(req.version)(_error_of(req.topics, code)))
def handle_read_share_group_state(ctx: RequestContext, request: Any) -> Any:
    return _serve(ctx, request, lambda c, g, t, p: c.read(g, t, p.partition, p.leader_epoch), _read_build(ctx.api_version))


# -- WriteShareGroupState -------------------------------------------------------------------


_write_build = _builder(WriteResponse, "WriteStateResult")


@api(ApiKey.WRITE_SHARE_GROUP_STATE, 0, 1, error_response=lambda req, code: _write_build(req.version)(_error_of(req.topics, code)))
def handle_write_share_group_state(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version

    def op(c: Any, g: str, t: uuid.UUID, p: Any) -> Any:
        batches = [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches]
        count = p.delivery_complete_count if version >= 1 else -1
        return c.write(g, t, p.partition, p.state_epoch, p.leader_epoch, p.start_offset, count, batches)

    return _serve(ctx, request, op, _write_build(version))


# -- DeleteShareGroupState ------------------------------------------------------------------


_delete_build = _builder(DeleteResponse, "DeleteStateResult")


@api(ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0, error_response=lambda req, code: _delete_build(req.version)(_error_of(req.topics, code)))
def handle_delete_share_group_state(ctx: RequestContext, request: Any) -> Any:
    return _serve(ctx, request, lambda c, g, t, p: c.delete(g, t, p.partition), _delete_build(ctx.api_version))


# -- ReadShareGroupStateSummary -------------------------------------------------------------


_summary_build = _builder(
    SummaryResponse,
    "ReadStateSummaryResult",
    lambda r, ok, Partition: {
        "state_epoch": r.state_epoch if ok else 0,
        "leader_epoch": r.leader_epoch if ok else 0,
        "start_offset": r.start_offset if ok else 0,
        "delivery_complete_count": r.delivery_complete_count if ok else -1,
    },
)


@api(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 1, error_response=lambda req, code: _summary_build(req.version)(_error_of(req.topics, code)))
def handle_read_share_group_state_summary(ctx: RequestContext, request: Any) -> Any:
    return _serve(ctx, request, lambda c, g, t, p: c.read_summary(g, t, p.partition), _summary_build(ctx.api_version))
