"""DescribeUserScramCredentials v0 and AlterUserScramCredentials v0 (KIP-554), over the SCRAM
store of the data dir (broker/security/scram_store.py).

Describe needs DESCRIBE on the cluster, Alter ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED
for the whole request otherwise), as Kafka's KafkaApis and ControllerApis check. No salt, key or
password is ever answered or logged: Describe gives the mechanisms and iteration counts only.
"""

from __future__ import annotations

from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.security.scram_store import describe
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

DescribeResponse = lazy_response(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
AlterResponse = lazy_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)


def _describe_error(request: Any, code: ErrorCode) -> Any:
    """Kafka's getErrorResponse: the top-level error and one result per named user, without its name."""
    result = DescribeResponse.DescribeUserScramCredentialsResult
    return DescribeResponse(
        version=request.version,
        throttle_time_ms=0,
        error_code=code,
        error_message=code.message,
        results=[result(user="", error_code=code, error_message=code.message, credential_infos=[]) for _ in request.users or []],
    )


def _alter_error(request: Any, code: ErrorCode) -> Any:
    users = [d.name for d in request.deletions or []] + [u.name for u in request.upsertions or []]
    result = AlterResponse.AlterUserScramCredentialsResult
    return AlterResponse(
        version=request.version,
        throttle_time_ms=0,
        results=[result(user=u, error_code=code, error_message=code.message) for u in dict.fromkeys(users)],
    )


@api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, error_response=_describe_error)
def handle_describe(ctx: RequestContext, request: Any) -> Any:
    if not authz.cluster_allowed(ctx, authz.Op.DESCRIBE):
        return _describe_error(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    store = ctx.broker.security.scram
    users = None if request.users is None else [u.name for u in request.users]
    result = DescribeResponse.DescribeUserScramCredentialsResult
    info = result.CredentialInfo
    return DescribeResponse(
        version=ctx.api_version,
        throttle_time_ms=0,
        error_code=0,
        error_message="",
        results=[
            result(
                user=user,
                error_code=code,
                error_message="" if message is None else message,
                credential_infos=[info(mechanism=m, iterations=i) for m, i in infos],
            )
            for user, code, message, infos in describe(store, users)
        ],
    )


@api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, error_response=_alter_error)
def handle_alter(ctx: RequestContext, request: Any) -> Any:
    if not authz.cluster_allowed(ctx, authz.Op.ALTER):
        return _alter_error(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    store = ctx.broker.security.scram
    deletions = [(d.name, d.mechanism) for d in request.deletions or []]
    upsertions = [(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password)) for u in request.upsertions or []]
    try:
        results = store.alter(deletions, upsertions)
    except OSError as exc:
        return _alter_error(request, ErrorCode.KAFKA_STORAGE_ERROR) if exc else None
    ctx.log.info("SCRAM credentials altered", users=sorted({u for u, code, _m in results if code == ErrorCode.NONE}))
    result = AlterResponse.AlterUserScramCredentialsResult
    return AlterResponse(
        version=ctx.api_version, throttle_time_ms=0, results=[result(user=u, error_code=code, error_message=m) for u, code, m in results]
    )
