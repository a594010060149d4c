"""ShareAcknowledge v1-v2 (KIP-932; v2: RENEW acknowledgements and the lock timeout, KIP-1222).

KafkaApis.handleShareAcknowledgeRequest's order: share groups enabled, a group id, READ on the
group, a member id, the share session (epoch 0 is INVALID_SHARE_SESSION_EPOCH here: a session is
opened by ShareFetch; -1 closes it after the acknowledgements, releasing what is still acquired),
then per partition: unknown topic ids, the batches' shape, READ on the topic, unknown partitions,
and the share partition's own checks (INVALID_RECORD_STATE for records not acquired by this
member). The answer leaves once the acknowledgements are written.
"""

from __future__ import annotations

import uuid
from typing import Any

from broker.apis.share_common import NodeLeaders, session_request_error
from broker.apis.share_fetch import _leads
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.share.acknowledgements import handle_acknowledgements, requested_batches
from broker.share.sessions import FINAL_EPOCH, SessionError
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

ShareAcknowledgeResponse = lazy_response(ApiKey.SHARE_ACKNOWLEDGE)
_Topic = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
_Partition = _Topic.PartitionData
_Leader = _Partition.LeaderIdAndEpoch
_Node = ShareAcknowledgeResponse.NodeEndpoint


def _error(request: Any, code: ErrorCode) -> Any:
    """ShareAcknowledgeRequest.getErrorResponse: the error alone, no message."""
    return ShareAcknowledgeResponse(
        version=request.version,
        throttle_time_ms=0,
        error_code=code,
        error_message=None,
        acquisition_lock_timeout_ms=0,
        responses=[],
        node_endpoints=[],
    )


@api(ApiKey.SHARE_ACKNOWLEDGE, 1, 2, error_response=_error)
def handle_share_acknowledge(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    version = ctx.api_version
    code = session_request_error(ctx, request)
    if code is not None:
        return _error(request, code)
    group = request.group_id
    member = request.member_id
    manager = broker.share_partitions
    epoch = request.share_session_epoch
    try:
        manager.acknowledge_session_update(group, member, epoch)
    except SessionError as exc:
        return _error(request, exc.code)
    topics = broker.topics

    def name_of(topic_id: uuid.UUID) -> str | None:
        topic = topics.get_by_id(topic_id)
        return topic.name if topic is not None else None

    names = {n for t in request.topics if (n := name_of(t.topic_id)) is not None}
    readable = authz.filter_allowed(ctx, authz.Op.READ, authz.TOPIC, names)
    batches, erroneous = requested_batches(request.topics, name_of)
    renew_ack = version >= 2 and request.is_renew_ack
    results, waiters = handle_acknowledgements(
        manager,
        group,
        member,
        batches,
        erroneous,
        lambda name: name in readable,
        name_of,
        lambda topic, partition: _leads(broker, topic, partition),
        version >= 2,
        renew_ack,
    )
    if epoch == FINAL_EPOCH:
        waiters = waiters + manager.release_session(group, member)
    leaders = NodeLeaders(ctx)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (topic_id, index), (code, message) in results.items():
        leader = (0, 0)
        if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
            leader = leaders.of(topic_id, index)
        by_topic.setdefault(topic_id, []).append(
            _Partition(
                partition_index=index,
                error_code=code,
                error_message=message,
                current_leader=_Leader(leader_id=leader[0], leader_epoch=leader[1]),
            )
        )
    response = ShareAcknowledgeResponse(
        version=version,
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        acquisition_lock_timeout_ms=manager.settings.record_lock_duration_ms(group),
        responses=[_Topic(topic_id=topic_id, partitions=parts) for topic_id, parts in by_topic.items()],
        node_endpoints=[_Node(node_id=n, host=h, port=p, rack=r) for n, h, p, r in leaders.endpoints()],
    )
    if not waiters:
        return response

    async def durable() -> Any:
        try:
            for waiter in waiters:
                await waiter
        except Exception:
            return _error(request, ErrorCode.UNKNOWN_SERVER_ERROR)
        return response

    return durable()
