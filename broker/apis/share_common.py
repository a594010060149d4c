"""What the share-group API modules (KIP-932) have in common: whether share groups are served, the
request-level checks of ShareFetch and ShareAcknowledge, and the current leader and node endpoint
of a partition a ShareFetch or ShareAcknowledge must be redirected for (NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH)."""

from __future__ import annotations

import uuid
from typing import Any

from broker.network.context import RequestContext
from broker.security import authorize as authz
from broker.security.listeners import advertised_for, listener_name
from broker.share.acknowledgements import member_id_valid
from protocol.errors import ErrorCode


def share_groups_disabled(broker: Any) -> bool:
    """Kafka checks its share.version feature; kaflet `share` in --group-coordinator-rebalance-protocols."""
    return not broker.config.share_groups_enabled or getattr(broker, "share_partitions", None) is None


def session_request_error(ctx: RequestContext, request: Any) -> ErrorCode | None:
    """The request-level error of a ShareFetch or ShareAcknowledge, or None; checked in this order:
    share groups served, a group id, READ on the group, a well-formed member id."""
    if share_groups_disabled(ctx.broker):
        return ErrorCode.UNSUPPORTED_VERSION
    if request.group_id is None:
        return ErrorCode.INVALID_REQUEST
    if not authz.allowed(ctx, authz.Op.READ, authz.GROUP, request.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if not member_id_valid(request.member_id):
        return ErrorCode.INVALID_REQUEST
    return None


def leader_of(ctx: RequestContext, topic: str, partition: int) -> tuple[int, int, tuple[int, str, int, str | None] | None]:
    """(leader id, leader epoch, the leader's endpoint) of a partition, as the client is told."""
    broker = ctx.broker
    cluster = broker.cluster
    if cluster is None:
        host, port = advertised_for(broker, listener_name(ctx))
        return broker.config.node_id, 0, (broker.config.node_id, host, port, None)
    node_id = cluster.leader(topic, partition)
    host, port = advertised_for(cluster.node(node_id), listener_name(ctx))
    return node_id, cluster.leader_epoch(topic, partition), (node_id, host, port, None)


class NodeLeaders:
    """The leaders named in one answer, and their endpoints (NodeEndpoints)."""

    def __init__(self, ctx: RequestContext) -> None:
        self.ctx = ctx
        self.nodes: dict[int, tuple[int, str, int, str | None]] = {}

    def of(self, topic_id: uuid.UUID, partition: int) -> tuple[int, int]:
        topic = self.ctx.broker.topics.get_by_id(topic_id)
        if topic is None:
            return -1, -1
        leader, epoch, endpoint = leader_of(self.ctx, topic.name, partition)
        if endpoint is not None:
            self.nodes[leader] = endpoint
        return leader, epoch

    def endpoints(self) -> list[tuple[int, str, int, str | None]]:
        return list(self.nodes.values())
