"""SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer, with two validators:

- unsecured (the default, for development): Kafka's OAuthBearerUnsecuredValidatorCallbackHandler:
  an unsigned JWS (`alg: none`, empty signature) whose `sub` claim names the principal, `exp` is
  required and in the future, `iat` (if any) not in the future and before `exp`, and every scope
  of `--sasl-oauthbearer-required-scope` in the `scope` claim;
- signed (`--sasl-oauthbearer-jwks-file`): a JWS signed with a key of that local JWKS file
  (RS*, PS*, ES*), `exp` and `iat` required, the expected audience and issuer, as Kafka's
  BrokerJwtValidator does against its JWKS endpoint (broker/security/sasl/jwks.py).

A token that does not validate is answered, as in Kafka, with a JSON error challenge
(`{"status":"invalid_token"}`, or `insufficient_scope` with the missing scope); the client's
`%x01` reply then fails authentication with that JSON as the message. The token's expiry bounds
the session (KIP-368: a client re-authenticates before it, else its connection is closed).
"""

from __future__ import annotations

import base64
import json
import re
import time
from typing import Any, Protocol

from broker.security.sasl import AuthenticationFailed, SaslError

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KVPAIRS = r"([A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*"
INITIAL = re.compile(rf"n,(a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01", re.DOTALL)
AUTH = re.compile(r"(?P<scheme>\w+)[ ]+(?P<token>[-_~+/.a-zA-Z0-9]+(=*))")


class InvalidToken(Exception):
    """The token does not validate; `scope` set when a required scope is missing."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


class Token(Protocol):
    principal: str
    lifetime_ms: int


class Validator(Protocol):
    def validate(self, token: str) -> Token: ...


class _Token:
    def __init__(self, principal: str, lifetime_ms: int, scope: set[str]) -> None:
        self.principal = principal
        self.lifetime_ms = lifetime_ms
        self.scope = scope


def b64url_json(part: str) -> Any:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidToken("malformed JWT part") from None
    if not isinstance(value, dict):
        raise InvalidToken("JWT part is not a JSON object")
    return value


def scope_of(claims: dict[str, Any], name: str) -> set[str]:
    raw = claims.get(name)
    if isinstance(raw, str):
        return {s for s in raw.split(" ") if s}
    if isinstance(raw, list):
        return {s for s in raw if isinstance(s, str) and s}
    return set()


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler (its unsecuredValidator* options)."""

    def __init__(self, principal_claim: str = "sub", scope_claim: str = "scope", required_scope: str = "", clock_skew_ms: int = 0) -> None:
        self.principal_claim = principal_claim or "sub"
        self.scope_claim = scope_claim or "scope"
        self.required = [s for s in (required_scope or "").split(" ") if s]
        self.skew = clock_skew_ms

    def validate(self, token: str) -> _Token:
        if ".." in token:
            raise InvalidToken("Malformed compact serialization contains '..'")
        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidToken("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
        header, claims = b64url_json(parts[0]), b64url_json(parts[1])
        if header.get("alg") != "none":
            raise InvalidToken("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise InvalidToken("Unsecured JWS must not contain a digital signature")
        exp = claims.get("exp")
        if exp is None:
            raise InvalidToken("No expiration time in JWT")
        if not _number(exp):
            raise InvalidToken("The 'exp' claim was not of type Number")
        principal = claims.get(self.principal_claim)
        if principal is not None and not isinstance(principal, str):
            raise InvalidToken(f"The '{self.principal_claim}' claim was not of type String")
        if not principal or not principal.strip():
            raise InvalidToken(f"No principal name in JWT claim: {self.principal_claim}")
        now = time.time() * 1000
        iat = claims.get("iat")
        if iat is not None:
            if not _number(iat):
                raise InvalidToken("The 'iat' claim was not of type Number")
            if 1000.0 * iat > now + self.skew:
                raise InvalidToken("The Issued At value was after the indicated time plus allowable clock skew")
        if now - self.skew >= 1000.0 * exp:
            raise InvalidToken("The indicated time minus allowable clock skew was on or after the Expiration Time value")
        if iat is not None and exp <= iat:
            raise InvalidToken("The Expiration Time time was not after the Issued At time")
        scope = scope_of(claims, self.scope_claim)
        for wanted in self.required:
            if wanted not in scope:
                raise InvalidToken("The provided scope was missing a required scope", "[" + ", ".join(self.required) + "]")
        return _Token(principal, int(1000 * exp), scope)


class OAuthBearerServer:
    def __init__(self, validator: Validator) -> None:
        self.validator = validator
        self.complete = False
        self.authorization_id = ""
        self.credential_expiry_ms: int | None = None
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise AuthenticationFailed(self._error)
        self._error = None
        text = token.decode("utf-8", errors="replace")
        m = INITIAL.fullmatch(text)
        if m is None:
            raise SaslError("Invalid OAUTHBEARER client first message")
        props: dict[str, str] = {}
        for pair in m.group("kvpairs").split("\x01"):
            if pair:
                key, _, value = pair.partition("=")
                props[key] = value
        auth = props.pop("auth", None)
        if auth is None:
            raise SaslError("Invalid OAUTHBEARER client first message: 'auth' not specified")
        am = AUTH.fullmatch(auth)
        if am is None:
            raise SaslError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
        if am.group("scheme").lower() != "bearer":
            raise SaslError("Invalid scheme in OAUTHBEARER client first message")
        try:
            validated = self.validator.validate(am.group("token"))
        except InvalidToken as exc:
            status = "insufficient_scope" if exc.scope is not None else "invalid_token"
            self._error = f'{{"status":"{status}"' + (f', "scope":"{exc.scope}"' if exc.scope is not None else "") + "}"
            return self._error.encode()
        authzid = m.group("authzid") or ""
        if authzid and authzid != validated.principal:
            raise AuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different from the token's principal name ({validated.principal})"
            )
        self.authorization_id = validated.principal
        self.credential_expiry_ms = validated.lifetime_ms
        self.complete = True
        return b""


class OAuthBearer:
    name = "OAUTHBEARER"

    def __init__(self, validator: Validator) -> None:
        self.validator = validator

    def server(self) -> OAuthBearerServer:
        return OAuthBearerServer(self.validator)
