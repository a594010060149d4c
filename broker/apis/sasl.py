"""SaslHandshake v0-1 and SaslAuthenticate v0-2 once a connection is past authentication.

While authentication is pending the connection's authenticator answers them
(broker/security/sasl/authenticator.py); what reaches these handlers is, as in Kafka's KafkaApis,
a SaslHandshake on an authenticated connection that cannot re-authenticate or on a listener
without SASL (ILLEGAL_SASL_STATE), or a SaslAuthenticate after authentication
(ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication").
"""

from __future__ import annotations

from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

SaslHandshakeResponse = lazy_response(ApiKey.SASL_HANDSHAKE)
SaslAuthenticateResponse = lazy_response(ApiKey.SASL_AUTHENTICATE)


def _handshake_error(request: Any, code: ErrorCode) -> Any:
    return SaslHandshakeResponse(version=request.version, error_code=code, mechanisms=[])


def _authenticate_error(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    return SaslAuthenticateResponse(version=request.version, error_code=code, error_message=message, auth_bytes=b"", session_lifetime_ms=0)


@api(ApiKey.SASL_HANDSHAKE, 0, 1, error_response=_handshake_error)
def handle_sasl_handshake(ctx: RequestContext, request: Any) -> Any:
    return _handshake_error(request, ErrorCode.ILLEGAL_SASL_STATE)


@api(ApiKey.SASL_AUTHENTICATE, 0, 2, error_response=_authenticate_error)
def handle_sasl_authenticate(ctx: RequestContext, request: Any) -> Any:
    return _authenticate_error(request, ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication")
