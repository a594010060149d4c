"""InitProducerId v0-v5 for idempotent (non-transactional) producers.

As Kafka's TransactionCoordinator does when the transactional id is null, every request gets
a fresh producer id with epoch 0, whether or not it names a current id and epoch (the Java
client and librdkafka bump an idempotent producer's epoch themselves, and the partition logs
accept the bumped epoch starting at sequence 0). A producer id without an epoch, or the
reverse, is INVALID_REQUEST; an empty transactional id too.

Transactions come later: until then a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which librdkafka treats as fatal at once
(init_transactions fails with "Transactional Id authorization failed") instead of retrying
until its timeout, as it would with the coordinator errors.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import InitProducerIdResponse

from broker.context import RequestContext
from broker.registry import api
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def _response(version: int, code: int, producer_id: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH) -> Any:
    return InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=code, producer_id=producer_id, producer_epoch=epoch)


def _error(request: Any, code: ErrorCode) -> Any:
    return _response(request.version, code)


@api(ApiKey.INIT_PRODUCER_ID, 0, 5, error_response=_error)
def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if request.transactional_id is not None:
        if request.transactional_id == "":
            return _response(version, ErrorCode.INVALID_REQUEST)
        return _response(version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if version >= 3:
        pid, epoch = request.producer_id, request.producer_epoch
        if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
            return _response(version, ErrorCode.INVALID_REQUEST)
    return _response(version, 0, ctx.broker.producer_ids.next_id(), 0)
