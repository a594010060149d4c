"""InitProducerId v0-v5.

Idempotent producers (null transactional id): as Kafka's TransactionCoordinator does, every
request gets a fresh producer id with epoch 0, whether or not it names a current id and epoch
(the Java client and librdkafka bump an idempotent producer's epoch themselves, and the
partition logs accept the bumped epoch starting at sequence 0).

Transactional producers go to the transaction coordinator (broker/txn/coordinator.py): epoch
bumps, fencing, KIP-360 recovery with the current producer id and epoch (v3+), timeouts
bounded by --transaction-max-timeout-ms. Below v4 PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH, as Kafka does for clients that predate it.

A producer id without an epoch, or the reverse, is INVALID_REQUEST; an empty transactional id too.
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

InitProducerIdResponse = lazy_response(ApiKey.INIT_PRODUCER_ID)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def _response(version: int, code: int, producer_id: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH) -> Any:
    return InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=code, producer_id=producer_id, producer_epoch=epoch)


def _error(request: Any, code: ErrorCode) -> Any:
    return _response(request.version, code)


@api(ApiKey.INIT_PRODUCER_ID, 0, 5, error_response=_error)
def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if ctx.broker.authorizer is not None:
        tid = request.transactional_id
        if tid is not None and not authz.allowed(ctx, authz.Op.WRITE, authz.TRANSACTIONAL_ID, tid):
            return _response(version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if tid is None and not (
            authz.cluster_allowed(ctx, authz.Op.IDEMPOTENT_WRITE, log_denied=False)
            or authz.allowed_by_resource_type(ctx, authz.Op.WRITE, authz.TOPIC)
        ):
            return _response(version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    pid, epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    if version >= 3:
        pid, epoch = request.producer_id, request.producer_epoch
        if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
            return _response(version, ErrorCode.INVALID_REQUEST)
    if request.transactional_id is None:
        return _response(version, 0, ctx.broker.producer_ids.next_id(), 0)
    if request.transactional_id == "":
        return _response(version, ErrorCode.INVALID_REQUEST)
    txn = ctx.broker.txn
    if txn is None:
        return _response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    code, new_pid, new_epoch, waits = txn.init_producer_id(request.transactional_id, request.transaction_timeout_ms, pid, epoch)
    if code is ErrorCode.PRODUCER_FENCED and version < 4:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    if code:
        ctx.errors = [code]
    if not waits:
        return _response(version, code, new_pid, new_epoch)
    return _after(waits, version, code, new_pid, new_epoch)


async def _after(waits: list[Any], version: int, code: ErrorCode, pid: int, epoch: int) -> Any:
    try:
        await asyncio.gather(*waits)
    except Exception:
        return _response(version, ErrorCode.NOT_COORDINATOR)  # the record could not be made durable
    return _response(version, code, pid, epoch)
