"""DescribeCluster v0-v2: the cluster id, the brokers with their racks, and a controller id.

A lone broker lists itself. In a cluster (`--brokers N`) every live node is listed and a live
node named as the controller (Kafka's brokers name a random live broker); fenced nodes (taken
down) are left out unless v2's IncludeFencedBrokers asks for them, with IsFenced set, as
KafkaApis.handleDescribeCluster does.

Follows Kafka's AuthHelper.computeDescribeClusterResponse for a broker endpoint: asking a
broker for the CONTROLLER endpoint type gets MISMATCHED_ENDPOINT_TYPE, an unknown type
UNSUPPORTED_ENDPOINT_TYPE (both INVALID_REQUEST in v0, which has no endpoint type).
Cluster authorized operations are sent only when asked for; without an authorizer that
is every operation a cluster supports.
"""

from __future__ import annotations

from typing import Any

from broker.apis.metadata import CLUSTER_OPERATIONS, brokers_of, controller_id
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.security.acls import CLUSTER_NAME
from broker.security.listeners import listener_name
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

DescribeClusterResponse = lazy_response(ApiKey.DESCRIBE_CLUSTER)

BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
_Broker = DescribeClusterResponse.DescribeClusterBroker


def _error(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    return DescribeClusterResponse(
        version=request.version,
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id="",
        controller_id=-1,
        brokers=[],
        authorized_operations=None,
    )


@api(ApiKey.DESCRIBE_CLUSTER, 0, 2, error_response=_error)
def handle_describe_cluster(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    wanted = request.endpoint_type if version >= 1 else BROKER_ENDPOINT
    if wanted not in (BROKER_ENDPOINT, CONTROLLER_ENDPOINT):
        code = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        return _error(request, code, f"Unsupported endpoint type {wanted}")
    if wanted == CONTROLLER_ENDPOINT:
        code = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
        return _error(request, code, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")
    broker = ctx.broker
    include_fenced = bool(request.include_fenced_brokers) if version >= 2 else False
    fenced = broker.cluster.fenced if broker.cluster is not None else ()

    def describe(node: int, host: str, port: int, rack: str | None) -> Any:
        return _Broker(broker_id=node, host=host, port=port, rack=rack, is_fenced=node in fenced)

    return DescribeClusterResponse(
        version=version,
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=broker.cluster_id,
        controller_id=controller_id(broker),
        brokers=brokers_of(broker, describe, listener_name(ctx), include_fenced),
        authorized_operations=_cluster_ops(ctx) if request.include_cluster_authorized_operations else None,
    )


def _cluster_ops(ctx: RequestContext) -> set[int]:
    """AuthHelper.computeDescribeClusterResponse: the authorizer's answer, 0 without DESCRIBE on the cluster."""
    if ctx.broker.authorizer is None:
        return set(CLUSTER_OPERATIONS)
    if not authz.cluster_allowed(ctx, authz.Op.DESCRIBE):
        return set()
    return set(authz.operations_or_all(ctx, authz.CLUSTER, CLUSTER_NAME))
