"""The authorized operations a client is told it has on a resource: the `authorized_operations`
fields of Metadata (topics, and the cluster in v8-v10), DescribeCluster, DescribeGroups (v3+)
and ConsumerGroupDescribe, when the request asks for them.

As Kafka's AuthHelper.authorizedOperations: every operation the resource type supports
(AclEntry.supportedOperations) is put to the authorizer, and those it allows are reported; with
no authorizer every supported operation is allowed. The cluster's set is reported only to a
client allowed to DESCRIBE the cluster (else 0, no operation). kaflet has no authorizer yet: a
broker that has one sets `broker.authorizer` to an object with Kafka's `authorize(context,
actions)` shape (`Authorizer` below), and every field follows it.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple, Protocol

INT32_MIN = -(2**31)  # the wire's "not asked for" value of an int32 authorized-operations field


class AclOperation(IntEnum):
    """org.apache.kafka.common.acl.AclOperation codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class ResourceType(IntEnum):
    """org.apache.kafka.common.resource.ResourceType codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


_O = AclOperation
# Kafka's AclEntry.supportedOperations.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset(
        {_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE, _O.TWO_PHASE_COMMIT}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}
CLUSTER_NAME = "kafka-cluster"  # the cluster resource's name in Kafka's ACLs


class Action(NamedTuple):
    operation: AclOperation
    resource_type: ResourceType
    name: str


class Authorizer(Protocol):
    """What an authorizer offers (Kafka's Authorizer.authorize): one answer per action, True for allowed."""

    def authorize(self, context: Any, actions: list[Action]) -> list[bool]: ...


def _authorizer(ctx: Any) -> Authorizer | None:
    return getattr(ctx.broker, "authorizer", None)


def authorized_operations(ctx: Any, resource_type: ResourceType, name: str) -> set[int]:
    """The operation codes the request's client may perform on the resource."""
    supported = SUPPORTED_OPERATIONS[resource_type]
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return {int(op) for op in supported}
    ordered = sorted(supported)
    allowed = authorizer.authorize(ctx, [Action(op, resource_type, name) for op in ordered])
    return {int(op) for op, ok in zip(ordered, allowed, strict=True) if ok}


def cluster_operations(ctx: Any) -> set[int]:
    """Metadata (v8-v10) and DescribeCluster: the cluster's operations, to a client that may DESCRIBE it (else none)."""
    authorizer = _authorizer(ctx)
    if authorizer is not None and not authorizer.authorize(ctx, [Action(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)])[0]:
        return set()
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)


def topic_operations(ctx: Any, topic: str | None) -> set[int]:
    return authorized_operations(ctx, ResourceType.TOPIC, topic or "")


def group_operations(ctx: Any, group_id: str) -> set[int]:
    return authorized_operations(ctx, ResourceType.GROUP, group_id)


def as_int32(operations: set[int]) -> int:
    """The operations as the int32 bit field of schemas that carry it as a plain int32."""
    bits = 0
    for op in operations:
        bits |= 1 << op
    return bits - (1 << 32) if bits >= 1 << 31 else bits
