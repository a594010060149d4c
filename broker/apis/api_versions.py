"""ApiVersions v0-v4, generated from the registry."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api, served
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

ApiVersionsResponse = lazy_response(ApiKey.API_VERSIONS)

# Kafka's ApiVersionsRequest.isValid pattern for client software name and version.
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")
_Key = ApiVersionsResponse.ApiVersion


# KH-1: served only while group.coordinator.rebalance.protocols lists `consumer`; KS-1: likewise `streams`.
CONSUMER_PROTOCOL_APIS = frozenset({ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE})
STREAMS_PROTOCOL_APIS = frozenset({ApiKey.STREAMS_GROUP_HEARTBEAT, ApiKey.STREAMS_GROUP_DESCRIBE})


# KIP-932: advertised only while it lists `share` (Kafka: while its share.version feature is 1).
SHARE_GROUP_APIS = frozenset(
    {
        ApiKey.SHARE_GROUP_HEARTBEAT,
        ApiKey.SHARE_GROUP_DESCRIBE,
        ApiKey.SHARE_FETCH,
        ApiKey.SHARE_ACKNOWLEDGE,
        ApiKey.INITIALIZE_SHARE_GROUP_STATE,
        ApiKey.READ_SHARE_GROUP_STATE,
        ApiKey.WRITE_SHARE_GROUP_STATE,
        ApiKey.DELETE_SHARE_GROUP_STATE,
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    }
)


def _keys(consumer_protocol: bool = True, streams_protocol: bool = True, share_groups: bool = True) -> list[Any]:
    hidden = (
        (set() if consumer_protocol else CONSUMER_PROTOCOL_APIS)
        | (set() if streams_protocol else STREAMS_PROTOCOL_APIS)
        | (set() if share_groups else SHARE_GROUP_APIS)
    )
    return [_Key(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in served() if k not in hidden]


@cache
def unsupported_version_body(consumer_protocol: bool = True, streams_protocol: bool = True, share_groups: bool = True) -> bytes:
    """The v0 answer to an ApiVersions version we do not serve: error 35 plus what we serve."""
    keys = _keys(consumer_protocol, streams_protocol, share_groups)
    return bytes(ApiVersionsResponse(version=0, error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=keys).encode())


@cache
def _ok_body(version: int, consumer_protocol: bool = True, streams_protocol: bool = True, share_groups: bool = True) -> bytes:
    keys = _keys(consumer_protocol, streams_protocol, share_groups)
    return bytes(ApiVersionsResponse(version=version, error_code=0, api_keys=keys, throttle_time_ms=0).encode())


def _error(request: Any, code: ErrorCode) -> Any:
    return ApiVersionsResponse(version=request.version, error_code=code, api_keys=[], throttle_time_ms=0)


def _unsupported(broker: Any) -> bytes:
    return unsupported_version_body(
        broker.config.consumer_protocol_enabled, broker.config.streams_protocol_enabled, broker.config.share_groups_enabled
    )


@api(ApiKey.API_VERSIONS, 0, 4, error_response=_error, unsupported_version=_unsupported)
def handle_api_versions(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 3:
        name, version = request.client_software_name, request.client_software_version
        if not (name and version and _SOFTWARE.match(name) and _SOFTWARE.match(version)):
            return _error(request, ErrorCode.INVALID_REQUEST)
        ctx.conn.client_software = (name, version)
    cfg = ctx.broker.config
    return _ok_body(ctx.api_version, cfg.consumer_protocol_enabled, cfg.streams_protocol_enabled, cfg.share_groups_enabled)
