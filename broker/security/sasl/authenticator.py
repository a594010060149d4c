"""The server side of SASL on one connection, as Kafka's SaslServerAuthenticator.

The connection hands every frame to `intercept` while authentication is pending (and, once
authenticated with a session lifetime, to catch re-authentication and expiry). Kafka's states:

- before the handshake only ApiVersions (answered by its normal handler) and SaslHandshake are
  accepted; any other request closes the connection ("Unexpected Kafka request of type X during
  SASL handshake"), unanswered, as Kafka does;
- SaslHandshake v0 is followed by raw SASL tokens (no Kafka header), v1 by SaslAuthenticate
  requests (v0-v2); an unsupported mechanism is answered UNSUPPORTED_SASL_MECHANISM with the
  enabled ones, then the connection closes;
- a failed SaslAuthenticate is answered SASL_AUTHENTICATION_FAILED with the mechanism's message
  (or Kafka's generic one), then the connection closes; another request while authenticating is
  answered ILLEGAL_SASL_STATE and closes it;
- frames over 512 KiB (sasl.server.max.receive.size) close the connection while authenticating;
  so does authentication not finished within --request-read-timeout-ms;
- KIP-368: with `connections.max.reauth.ms` (or a token that expires) the session has a
  lifetime, sent in SaslAuthenticate v1+; a SaslHandshake on the authenticated connection begins
  re-authentication (same mechanism, same principal, or it fails); any other request after the
  session expired closes the connection, as Kafka's Processor does.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import structlog

from broker.network.registry import REGISTRY
from broker.security.principal import KafkaPrincipal
from broker.security.sasl import AuthenticationFailed, SaslError
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.header import HeaderError, parse_request_header, peek_api
from protocol.javahash import java_string_hashcode

if TYPE_CHECKING:
    from broker.network.connection import KafkaConnection
    from broker.security.service import Security

log = structlog.get_logger("kaflet.security")

MAX_RECEIVE = 524288  # sasl.server.max.receive.size
INITIAL, VERSIONS_SEEN, AUTHENTICATE, COMPLETE, FAILED, BAD_MECHANISM = range(6)


def java_hashset_order(names: list[str] | tuple[str, ...]) -> list[str]:
    """The iteration order of `new ArrayList(new HashSet(names))` in Java (Kafka lists the enabled
    mechanisms that way in SaslHandshake answers)."""
    capacity = 16
    while len(names) > capacity * 0.75:
        capacity *= 2
    buckets: dict[int, list[str]] = {}
    for name in dict.fromkeys(names):
        h = java_string_hashcode(name) & 0xFFFFFFFF
        buckets.setdefault((h ^ (h >> 16)) & (capacity - 1), []).append(name)
    return [n for b in sorted(buckets) for n in buckets[b]]


class SaslAuthenticator:
    def __init__(self, conn: KafkaConnection, security: Security, mechanisms: tuple[str, ...], timeout_ms: int, reauth_ms: int) -> None:
        self.conn = conn
        self.security = security
        self.enabled = java_hashset_order(mechanisms)
        self.state = INITIAL
        self.raw_tokens = False  # SaslHandshake v0: raw tokens follow
        self.server: Any = None
        self.mechanism: str | None = None
        self.reauth_ms = reauth_ms
        self.expiry: float | None = None  # monotonic() when the session ends
        self.previous: tuple[str, KafkaPrincipal] | None = None  # while re-authenticating
        self.last_reauth_start = 0.0
        self.reauthenticating = False
        self._saved_max = conn.max_request
        conn.max_request = MAX_RECEIVE
        self._timer: asyncio.TimerHandle | None = None
        if timeout_ms:
            self._timer = asyncio.get_running_loop().call_later(timeout_ms / 1000, self._timed_out, timeout_ms)

    # -- the connection's entry ---------------------------------------------------------------

    def intercept(self, frame: bytes | memoryview) -> bool:
        """True when this frame was the authenticator's (answered, or the connection closed)."""
        from broker.network.connection import CloseConnection

        state = self.state
        if state == COMPLETE:
            try:
                api_key = peek_api(frame)[0]
            except HeaderError:
                return False
            now = time.monotonic()
            if api_key == ApiKey.SASL_HANDSHAKE and self.expiry is not None and now - self.last_reauth_start >= 1.0:
                self.last_reauth_start = now
                self.previous = (self.mechanism or "", self.conn.principal)
                self.reauthenticating = True
                self.state = VERSIONS_SEEN
                self.conn.max_request = MAX_RECEIVE
                self._handle_request(frame)
                return True
            if self.expiry is not None and now > self.expiry:
                log.debug("disconnecting expired session", peer=self.conn.peer_text, principal=str(self.conn.principal))
                self.conn.security_counters("expired")
                raise CloseConnection("SASL session expired; the client did not re-authenticate")
            return False
        if state == AUTHENTICATE and self.raw_tokens:
            self._raw_token(bytes(frame))
            return True
        if state == BAD_MECHANISM:
            raise self._fail_closed(AuthenticationFailed(self._bad_mechanism))
        self._handle_request(frame)
        return True

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self, timeout_ms: int) -> None:
        self._timer = None
        if self.state != COMPLETE and not self.conn.closing:
            self.conn.security_counters("timed_out")
            self.conn.close_with_warning(f"SASL authentication not completed within {timeout_ms} ms")

    # -- Kafka requests during authentication ---------------------------------------------------

    def _handle_request(self, frame: bytes | memoryview) -> None:
        from broker.network.connection import CloseConnection

        try:
            api_key, version, corr = peek_api(frame)
        except HeaderError as exc:
            raise CloseConnection(f"bad request header during SASL authentication: {exc}") from None
        state = self.state
        if state in (INITIAL, VERSIONS_SEEN):
            if api_key == ApiKey.API_VERSIONS and not self.reauthenticating:
                if state != INITIAL:
                    raise CloseConnection("Unexpected ApiVersions request received during SASL authentication state HANDSHAKE_REQUEST")
                self.state = VERSIONS_SEEN
                self.conn.answer_normally(frame)
                return
            if api_key != ApiKey.SASL_HANDSHAKE:
                hint = (
                    ": potential reasons: kafka client configured with the wrong security protocol, it does not support KIP-43 or it is not a kafka client"
                    if state == INITIAL
                    else ""
                )
                self.conn.security_counters("unexpected_request")
                raise CloseConnection(f"Unexpected Kafka request of type {_name(api_key)} during SASL handshake{hint}")
            self._handshake(frame, version, corr)
            return
        # AUTHENTICATE with SaslAuthenticate headers
        if api_key != ApiKey.SASL_AUTHENTICATE:
            spec = REGISTRY.get(api_key)
            self._answer_error(spec, frame, version, corr, ErrorCode.ILLEGAL_SASL_STATE)
            self.conn.security_counters("unexpected_request")
            raise CloseConnection(f"Unexpected Kafka request of type {_name(api_key)} during SASL authentication")
        spec = REGISTRY[ApiKey.SASL_AUTHENTICATE]
        if not spec.min_version <= version <= spec.max_version:
            raise CloseConnection(f"Version {version} is not supported for apiKey SASL_AUTHENTICATE")
        _header, request = self._decode(spec, frame, version)
        token = bytes(request.auth_bytes or b"")
        try:
            answer = self.server.evaluate(token)
            if self.server.complete and self.previous is not None:
                self._ensure_principal_unchanged()
        except (AuthenticationFailed, SaslError) as exc:
            message = str(exc) if isinstance(exc, AuthenticationFailed) else self._generic()
            if isinstance(exc, SaslError):
                log.debug("SASL authentication failed", peer=self.conn.peer_text, mechanism=self.mechanism, reason=str(exc))
            self._respond(
                spec,
                corr,
                version,
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                error_message=message,
                auth_bytes=b"",
                session_lifetime_ms=0,
            )
            raise self._fail_closed(exc, message) from None
        lifetime = self._complete() if self.server.complete else 0
        self._respond(
            spec, corr, version, error_code=0, error_message="", auth_bytes=answer or b"", session_lifetime_ms=lifetime
        )  # Kafka's default ""

    def _handshake(self, frame: bytes | memoryview, version: int, corr: int) -> None:
        from broker.network.connection import CloseConnection

        spec = REGISTRY[ApiKey.SASL_HANDSHAKE]
        if not spec.min_version <= version <= spec.max_version:
            raise CloseConnection(f"Version {version} is not supported for apiKey SASL_HANDSHAKE")
        _header, request = self._decode(spec, frame, version)
        mechanism = request.mechanism
        if mechanism not in self.enabled:
            self._respond(spec, corr, version, error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=self.enabled)
            self.conn.security_counters("unsupported_mechanism")
            raise CloseConnection(f"Unsupported SASL mechanism {mechanism}")
        self._respond(spec, corr, version, error_code=0, mechanisms=self.enabled)
        self.raw_tokens = version == 0
        if self.previous is not None and mechanism != self.previous[0]:
            self._bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of mechanism '{self.previous[0]}'"
            )
            self.state = BAD_MECHANISM
            return
        self.mechanism = mechanism
        self.server = self.security.mechanism(mechanism).server()
        self.state = AUTHENTICATE

    def _raw_token(self, token: bytes) -> None:
        """A SASL token after SaslHandshake v0: answered with the raw challenge, or closed."""
        try:
            answer = self.server.evaluate(token)
            if self.server.complete and self.previous is not None:
                self._ensure_principal_unchanged()
        except (AuthenticationFailed, SaslError) as exc:
            raise self._fail_closed(exc) from None
        if answer is not None:
            self.conn.write_raw_frame(answer)
        if self.server.complete:
            self._complete()

    # -- outcomes ---------------------------------------------------------------------------------

    def _complete(self) -> int:
        """Authentication done: the principal is set, the session lifetime (ms) returned."""
        conn = self.conn
        conn.principal = KafkaPrincipal("User", self.server.authorization_id)
        now_ms = time.time() * 1000
        expiry_ms = self.server.credential_expiry_ms
        lifetime = 0
        if expiry_ms is not None or self.reauth_ms > 0:
            if expiry_ms is None:
                lifetime = self.reauth_ms
            elif self.reauth_ms <= 0:
                lifetime = max(0, int(expiry_ms - now_ms))
            else:
                lifetime = max(0, min(int(expiry_ms - now_ms), self.reauth_ms))
            self.expiry = time.monotonic() + lifetime / 1000
        else:
            self.expiry = None
        self.state = COMPLETE
        self.server = None
        self.previous = None
        self.reauthenticating = False
        conn.max_request = self._saved_max
        self.cancel()
        conn.security_counters("reauthenticated" if self.last_reauth_start else "authenticated")
        log.debug(
            "SASL authentication complete",
            peer=conn.peer_text,
            principal=str(conn.principal),
            mechanism=self.mechanism,
            session_lifetime_ms=lifetime,
        )
        if self.expiry is None:
            conn.authenticator = None  # nothing more to watch: the request path stays as fast as without SASL
        return lifetime

    def _ensure_principal_unchanged(self) -> None:
        assert self.previous is not None
        before = self.previous[1]
        after = KafkaPrincipal("User", self.server.authorization_id)
        if before != after:
            raise AuthenticationFailed(
                f"Cannot change principals during re-authentication from {before.type}.{before.name}: {after.type}.{after.name}"
            )

    def _generic(self) -> str:
        what = "re-authentication" if self.previous is not None else "authentication"
        return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {self.mechanism}"

    def _fail_closed(self, exc: Exception, message: str | None = None) -> Exception:
        from broker.network.connection import CloseConnection

        self.state = FAILED
        self.server = None
        self.conn.security_counters("failed")
        reason = message or (str(exc) if isinstance(exc, AuthenticationFailed) else self._generic())
        log.info("failed authentication", peer=self.conn.peer_text, mechanism=self.mechanism, reason=reason)
        # Closed here, after the answer already written: one info line per failure, as Kafka logs
        # it, not a warning per attempt of a client retrying with a wrong password.
        self.conn.close()
        return CloseConnection(f"SASL authentication failed: {reason}")

    # -- encoding ---------------------------------------------------------------------------------

    @staticmethod
    def _decode(spec: Any, frame: bytes | memoryview, version: int) -> tuple[Any, Any]:
        from broker.network.connection import CloseConnection

        flexible = spec.flexible(version)
        try:
            header = parse_request_header(frame, flexible)
            request = spec.decode(memoryview(frame)[header.body_offset :], version)
        except Exception as exc:
            raise CloseConnection(f"{spec.name} v{version} does not decode: {type(exc).__name__}") from None
        return header, request

    def _respond(self, spec: Any, corr: int, version: int, **fields: Any) -> None:
        cls = spec.response_cls
        body = bytes(cls(version=version, **fields).encode(version=version))
        self.conn.write_response(corr, spec.flexible(version), body)

    def _answer_error(self, spec: Any, frame: bytes | memoryview, version: int, corr: int, code: ErrorCode) -> None:
        if spec is None or spec.error_response is None or not spec.min_version <= version <= spec.max_version:
            return
        try:
            _h, request = self._decode(spec, frame, version)
            answer = spec.error_response(request, code)
            body = answer if isinstance(answer, (bytes, bytearray)) else bytes(answer.encode(version=version))
        except Exception:
            return
        self.conn.write_response(corr, spec.flexible(version) and spec.key != ApiKey.API_VERSIONS, body)


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)
