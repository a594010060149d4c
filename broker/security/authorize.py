"""The one authorization helper API handlers ask, in the order Kafka's KafkaApis checks.

Each call costs one attribute test when no authorizer is configured. Denials are logged at
info (as Kafka's kafka.authorizer.logger does), with the principal, the operation, the resource
and the API; the topic-listing and bits-computing checks are not logged, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import structlog

from broker.security.acls import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType, java_host
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.network.context import RequestContext

audit = structlog.get_logger("kaflet.authorizer")

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
Op = AclOperation

# AclEntry.authorizationError
ERRORS = {
    TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def allowed(ctx: RequestContext, op: int, rtype: int, name: str, log_denied: bool = True) -> bool:
    authz = ctx.broker.authorizer
    if authz is None:
        return True
    conn = ctx.conn
    ok = authz.authorize(conn.principal, java_host(conn.peer_host), op, rtype, name)
    if not ok and log_denied:
        audit.info(
            "authorization denied",
            principal=str(conn.principal),
            operation=AclOperation(op).name,
            host=conn.peer_host,
            resource=f"{ResourceType(rtype).name}:LITERAL:{name}",
            api=ctx.api_name,
        )
    return ok


def cluster_allowed(ctx: RequestContext, op: int, log_denied: bool = True) -> bool:
    return allowed(ctx, op, CLUSTER, CLUSTER_NAME, log_denied)


def filter_allowed(ctx: RequestContext, op: int, rtype: int, names: Iterable[str], log_denied: bool = True) -> set[str]:
    """The names among `names` the principal may do `op` on (each checked once)."""
    unique = set(names)
    if ctx.broker.authorizer is None:
        return unique
    return {n for n in unique if allowed(ctx, op, rtype, n, log_denied)}


def allowed_by_resource_type(ctx: RequestContext, op: int, rtype: int) -> bool:
    authz = ctx.broker.authorizer
    if authz is None:
        return True
    conn = ctx.conn
    return authz.authorize_by_resource_type(conn.principal, java_host(conn.peer_host), op, rtype)


def operations(ctx: RequestContext, rtype: int, name: str) -> frozenset[int] | None:
    """The authorized operations of this principal on the resource; None without an authorizer
    (the caller then reports what an authorizer-less Kafka reports)."""
    authz = ctx.broker.authorizer
    if authz is None:
        return None
    conn = ctx.conn
    return authz.allowed_operations(conn.principal, java_host(conn.peer_host), rtype, name)


def operations_or_all(ctx: RequestContext, rtype: int, name: str) -> set[int]:
    ops = operations(ctx, rtype, name)
    return set(int(o) for o in SUPPORTED_OPERATIONS[ResourceType(rtype)]) if ops is None else set(ops)
