"""FindCoordinator v0-v6: every key resolves to this node (CO-1..CO-12).

The partition a key maps to (CO-1, CO-4) always has this single node as leader, so the
answer is this node unless the coordinator service (group or transaction) is not running
(CO-12), or its internal topic was deleted (CO-7: created again, COORDINATOR_NOT_AVAILABLE).
"""

from __future__ import annotations

from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.security.listeners import advertised_for, listener_name
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

FindCoordinatorResponse = lazy_response(ApiKey.FIND_COORDINATOR)

GROUP, TRANSACTION, SHARE = 0, 1, 2
_Coordinator = FindCoordinatorResponse.Coordinator


def _keys(request: Any, version: int) -> list[str]:
    return list(request.coordinator_keys) if version >= 4 else [request.key]


def _error(request: Any, code: ErrorCode) -> Any:
    version = request.version
    if version >= 4:
        coordinators = [
            _Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=code.message) for k in request.coordinator_keys
        ]
        return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=coordinators)
    return FindCoordinatorResponse(
        version=version, throttle_time_ms=0, error_code=code, error_message=code.message, node_id=-1, host="", port=-1
    )


def _service(broker: Any, key_type: int) -> Any:
    name = {GROUP: "coordinator", TRANSACTION: "txn", SHARE: "share_coordinator"}[key_type]
    return getattr(broker, name, None)


def _lookup(ctx: RequestContext, key_type: int, key: str) -> ErrorCode:
    if key_type == SHARE:
        # SHARE needs v6 (CO-8), then a key of the form group:topicId:partition (KIP-932)
        if ctx.api_version < 6:
            return ErrorCode.INVALID_REQUEST
        from broker.share.coordinator.service import parse_coordinator_key

        try:
            parse_coordinator_key(key)
        except ValueError:
            return ErrorCode.INVALID_REQUEST
    coordinator = _service(ctx.broker, key_type)
    if key_type in (GROUP, TRANSACTION, SHARE):
        if coordinator is None or not coordinator.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE  # CO-12
        if coordinator.topic_missing:
            coordinator.recreate_topic()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE  # CO-7
    return ErrorCode.NONE


def _node_of(broker: Any, key_type: int, key: str, listener: str | None = None) -> tuple[int, str, int] | None:
    """(node id, host, port) of the coordinator of `key`: this broker, or in a cluster the leader
    of the key's `__consumer_offsets` / `__transaction_state` partition (addresses of `listener`);
    None while that partition has no live leader (KafkaApis: COORDINATOR_NOT_AVAILABLE)."""
    cluster = broker.cluster
    if cluster is None:
        return broker.config.node_id, *advertised_for(broker, listener)
    if key_type == SHARE:
        from broker.share.coordinator.service import parse_coordinator_key

        leader = cluster.share_coordinator_of(*parse_coordinator_key(key))[1]
        if not cluster.alive(leader):
            return None
        node = cluster.node(leader)
        return node.config.node_id, *advertised_for(node, listener)
    coordinator = _service(broker, key_type)
    topic = "__consumer_offsets" if key_type == GROUP else coordinator.topic_name
    leader = cluster.leader(topic, coordinator.partition_for(key))
    if not cluster.alive(leader):
        return None
    node = cluster.node(leader)
    return node.config.node_id, *advertised_for(node, listener)


def _authorized(ctx: RequestContext, key_type: int, key: str) -> ErrorCode:
    """KafkaApis.getCoordinator's first checks: DESCRIBE on the group or the transactional id
    (a share key's CLUSTER_ACTION is checked for the whole request)."""
    if key_type == GROUP and not authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if key_type == TRANSACTION and not authz.allowed(ctx, authz.Op.DESCRIBE, authz.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return ErrorCode.NONE


@api(ApiKey.FIND_COORDINATOR, 0, 6, error_response=_error)
def handle_find_coordinator(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    key_type = request.key_type if version >= 1 else GROUP
    if key_type not in (GROUP, TRANSACTION, SHARE):
        return _error(request, ErrorCode.INVALID_REQUEST)  # CO-8: the whole request
    broker = ctx.broker
    if key_type == SHARE and version >= 6 and not authz.cluster_allowed(ctx, authz.Op.CLUSTER_ACTION):
        return _error(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)  # authorizeClusterOperation throws
    host, port, node = broker.advertised_host, broker.advertised_port, broker.config.node_id
    if version >= 4:
        # A key's own result carries no message: Kafka leaves ErrorMessage at its generated
        # default, "" (not null), whether the lookup succeeded or failed.
        coordinators = []
        for key in request.coordinator_keys:
            error = _authorized(ctx, key_type, key)
            if error is ErrorCode.NONE:
                error = _lookup(ctx, key_type, key)
            found = _node_of(broker, key_type, key, listener_name(ctx)) if error is ErrorCode.NONE else None
            if found is not None:
                node, host, port = found
                coordinators.append(_Coordinator(key=key, node_id=node, host=host, port=port, error_code=0, error_message=""))
            else:
                error = error or ErrorCode.COORDINATOR_NOT_AVAILABLE
                coordinators.append(_Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error, error_message=""))
        return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=coordinators)
    error = _authorized(ctx, key_type, request.key)
    if error is ErrorCode.NONE:
        error = _lookup(ctx, key_type, request.key)
    found = _node_of(broker, key_type, request.key, listener_name(ctx)) if error is ErrorCode.NONE else None
    if found is None:
        return _error(request, error or ErrorCode.COORDINATOR_NOT_AVAILABLE)
    node, host, port = found
    return FindCoordinatorResponse(
        version=version, throttle_time_ms=0, error_code=0, error_message="NONE", node_id=node, host=host, port=port
    )
