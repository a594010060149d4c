"""DescribeAcls, CreateAcls and DeleteAcls v1-v3, as Kafka's AclApis (broker/security/acl_store.py).

Describe needs DESCRIBE on the cluster, Create and Delete ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED for the whole request otherwise). Without an authorizer (--authorizer
none) Describe answers SECURITY_DISABLED "No Authorizer is configured on the broker", Create and
Delete SECURITY_DISABLED "No Authorizer is configured." for every entry. Described resources are
sorted by (type, name, pattern type) and their ACLs in StandardAcl's order (Kafka groups them in a
hash map, whose order clients do not rely on).
"""

from __future__ import annotations

from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.security.acl_store import AclStoreError
from broker.security.acls import Acl, AclFilter
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

DescribeAclsResponse = lazy_response(ApiKey.DESCRIBE_ACLS)
CreateAclsResponse = lazy_response(ApiKey.CREATE_ACLS)
DeleteAclsResponse = lazy_response(ApiKey.DELETE_ACLS)
NO_AUTHORIZER = "No Authorizer is configured."


def _describe_error(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    return DescribeAclsResponse(
        version=request.version, throttle_time_ms=0, error_code=code, error_message=message or code.message, resources=[]
    )


def _create_error(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    item = CreateAclsResponse.AclCreationResult
    text = None if message == "" else message or code.message
    return CreateAclsResponse(
        version=request.version, throttle_time_ms=0, results=[item(error_code=code, error_message=text) for _ in request.creations or []]
    )


def unbuildable(acl: Acl) -> bool:
    """A creation Kafka cannot turn into an AclBinding: resource type ANY, pattern ANY or MATCH,
    operation ANY, permission ANY."""
    return acl.resource_type == 1 or acl.pattern_type in (1, 2) or acl.operation == 1 or acl.permission == 1


def _delete_error(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    item = DeleteAclsResponse.DeleteAclsFilterResult
    return DeleteAclsResponse(
        version=request.version,
        throttle_time_ms=0,
        filter_results=[item(error_code=code, error_message=message or code.message, matching_acls=[]) for _ in request.filters or []],
    )


def _filter(f: Any, version: int) -> AclFilter:
    return AclFilter(
        f.resource_type_filter,
        f.resource_name_filter,
        f.pattern_type_filter,
        f.principal_filter,
        f.host_filter,
        f.operation,
        f.permission_type,
    )


def _order(acl: Acl) -> tuple[Any, ...]:
    """StandardAcl.compareTo: type, name descending (via the sort below), pattern, operation, principal, host, permission."""
    return (acl.pattern_type, acl.operation, acl.principal, acl.host, acl.permission)


@api(ApiKey.DESCRIBE_ACLS, 1, 3, error_response=_describe_error)
def handle_describe_acls(ctx: RequestContext, request: Any) -> Any:
    if not authz.cluster_allowed(ctx, authz.Op.DESCRIBE):
        return _describe_error(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Request DescribeAcls needs DESCRIBE permission.")
    store = ctx.broker.security.acls
    if store is None:
        return _describe_error(request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    flt = _filter(request, ctx.api_version)
    reason = flt.unknown()
    if reason is not None:
        return _describe_error(request, ErrorCode.INVALID_REQUEST, reason)
    groups: dict[tuple[int, str, int], list[Acl]] = {}
    for acl in store.describe(flt):
        groups.setdefault((acl.resource_type, acl.name, acl.pattern_type), []).append(acl)
    resource = DescribeAclsResponse.DescribeAclsResource
    description = resource.AclDescription
    return DescribeAclsResponse(
        version=ctx.api_version,
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        resources=[
            resource(
                resource_type=rt,
                resource_name=name,
                pattern_type=pt,
                acls=[
                    description(principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission)
                    for a in sorted(acls, key=_order)
                ],
            )
            for (rt, name, pt), acls in sorted(groups.items())
        ],
    )


@api(ApiKey.CREATE_ACLS, 1, 3, error_response=_create_error)
def handle_create_acls(ctx: RequestContext, request: Any) -> Any:
    if not authz.cluster_allowed(ctx, authz.Op.ALTER):
        return _create_error(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Request CreateAcls needs ALTER permission.")
    store = ctx.broker.security.acls
    if store is None:
        return _create_error(request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    acls = [
        Acl(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation, c.permission_type)
        for c in request.creations or []
    ]
    if any(unbuildable(a) for a in acls):
        # Kafka cannot make an AclBinding of these (ResourcePattern / AccessControlEntry throw): the
        # whole request fails with UNKNOWN_SERVER_ERROR and no message.
        return _create_error(request, ErrorCode.UNKNOWN_SERVER_ERROR, "")
    try:
        errors = store.create(acls)
    except OSError as exc:
        return _create_error(request, ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot persist the ACLs: {exc.strerror or exc}")
    created = [a.describe() for a, e in zip(acls, errors, strict=True) if e is None]
    if created:
        ctx.log.info("ACLs created", principal=str(ctx.principal), acls=created)
    item = CreateAclsResponse.AclCreationResult
    return CreateAclsResponse(
        version=ctx.api_version,
        throttle_time_ms=0,
        results=[item(error_code=0 if e is None else ErrorCode.INVALID_REQUEST, error_message="" if e is None else e) for e in errors],
    )


@api(ApiKey.DELETE_ACLS, 1, 3, error_response=_delete_error)
def handle_delete_acls(ctx: RequestContext, request: Any) -> Any:
    if not authz.cluster_allowed(ctx, authz.Op.ALTER):
        return _delete_error(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Request DeleteAcls needs ALTER permission.")
    store = ctx.broker.security.acls
    if store is None:
        return _delete_error(request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    filters = [_filter(f, ctx.api_version) for f in request.filters or []]
    try:
        results = store.delete(filters)
    except AclStoreError as exc:
        return _delete_error(request, ErrorCode.INVALID_REQUEST, str(exc))
    except OSError as exc:
        return _delete_error(request, ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot persist the ACLs: {exc.strerror or exc}")
    deleted = [a.describe() for _e, acls in results for a in acls]
    if deleted:
        ctx.log.info("ACLs deleted", principal=str(ctx.principal), acls=deleted)
    item = DeleteAclsResponse.DeleteAclsFilterResult
    match = item.DeleteAclsMatchingAcl
    return DeleteAclsResponse(
        version=ctx.api_version,
        throttle_time_ms=0,
        filter_results=[
            item(
                error_code=0 if e is None else ErrorCode.INVALID_REQUEST,
                error_message=e,
                matching_acls=[
                    match(
                        error_code=0,
                        error_message=None,
                        resource_type=a.resource_type,
                        resource_name=a.name,
                        pattern_type=a.pattern_type,
                        principal=a.principal,
                        host=a.host,
                        operation=a.operation,
                        permission_type=a.permission,
                    )
                    for a in acls
                ],
            )
            for e, acls in results
        ],
    )
