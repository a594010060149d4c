"""SASL: the server side of each mechanism, and the authenticator that drives them.

A mechanism server is made per connection by its factory (`server()`), gets the client's tokens
in `evaluate(token)` and answers the next challenge; it raises `AuthenticationFailed(message)`
(Kafka's SaslAuthenticationException: the client sees the message) or `SaslError` (Kafka's
SaslException: the client sees only "Authentication failed during authentication due to invalid
credentials with SASL mechanism X"). Messages never carry a password, a token or a key.
"""

from __future__ import annotations

from typing import Protocol


class AuthenticationFailed(Exception):
    """SASL_AUTHENTICATION_FAILED with this message."""


class SaslError(Exception):
    """SASL_AUTHENTICATION_FAILED with the generic message (the detail is logged at debug only)."""


class MechanismServer(Protocol):
    complete: bool
    authorization_id: str
    # When the credential stops being valid (ms since the epoch), as CREDENTIAL.LIFETIME.MS.
    credential_expiry_ms: int | None

    def evaluate(self, token: bytes) -> bytes | None: ...


class Mechanism(Protocol):
    name: str

    def server(self) -> MechanismServer: ...
