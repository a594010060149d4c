"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802/7677) as Kafka's ScramSaslServer.

Credentials (salt, stored key, server key, iterations) come from the SCRAM store
(broker/security/scram_store.py); the server never sees a password. The message formats are
checked as Kafka's ScramMessages patterns check them, the final message's nonce must be the
client's nonce followed by the server's, and the client's proof is compared in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from typing import Protocol

from broker.security.sasl import AuthenticationFailed, SaslError

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # AlterUserScramCredentials' mechanism ids
NAMES = {v: k for k, v in TYPES.items()}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = r"(,[A-Za-z]+=[\x01-\x2b\x2d-\x7f]+)*"
_RESERVED = r"(m=[\x01-\x2b\x2d-\x7f]+,)?"
CLIENT_FIRST = re.compile(
    rf"n,(a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})"
)
CLIENT_FINAL = re.compile(rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})")


class Credential(Protocol):
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class CredentialLookup(Protocol):
    def get(self, user: str, mechanism: str) -> Credential | None: ...


def username(saslname: str) -> str:
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ValueError("Invalid username")
    return name.replace("=3D", "=")


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi() of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def keys(mechanism: str, salted: bytes) -> tuple[bytes, bytes]:
    """(stored key, server key) of a salted password."""
    algo = HASHES[mechanism]
    client_key = hmac.new(salted, b"Client Key", algo).digest()
    return hashlib.new(algo, client_key).digest(), hmac.new(salted, b"Server Key", algo).digest()


def new_nonce() -> str:
    # Kafka: BigInteger(130, SecureRandom).toString(36); any printable string without commas serves.
    return base64.b64encode(os.urandom(24)).decode().replace("+", "-").replace("/", "_")


class ScramServer:
    def __init__(self, mechanism: str, store: CredentialLookup) -> None:
        self.mechanism = mechanism
        self.algo = HASHES[mechanism]
        self.store = store
        self.state = 0  # 0: client first, 1: client final, 2: complete, 3: failed
        self.complete = False
        self.authorization_id = ""
        self.credential_expiry_ms: int | None = None
        self._credential: Credential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self.state == 0:
                return self._first(token)
            if self.state == 1:
                return self._final(token)
            raise AuthenticationFailed(
                f"Unexpected challenge in Sasl server state {('RECEIVE_CLIENT_FIRST_MESSAGE', 'RECEIVE_CLIENT_FINAL_MESSAGE', 'COMPLETE', 'FAILED')[self.state]}"
            )
        except (SaslError, AuthenticationFailed):
            self.state = 3
            self._credential = None
            raise

    def _first(self, token: bytes) -> bytes:
        text = token.decode("utf-8", errors="replace")
        m = CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise SaslError("Invalid SCRAM client first message format")
        try:
            user = username(m.group("saslname"))
        except ValueError:
            raise SaslError("Authentication failed: Credentials could not be obtained") from None
        extensions = dict(e.split("=", 1) for e in (m.group("extensions") or "").split(",")[1:])
        if extensions.get("tokenauth", "false").lower() == "true":
            raise SaslError("Token Authentication failed: Invalid tokenId")  # kaflet has no delegation tokens
        credential = self.store.get(user, self.mechanism)
        if credential is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        authzid = m.group("authzid") or ""
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslError("Iterations is less than the minimum")
        self._credential = credential
        self.authorization_id = user
        self._client_first_bare = text.split(",", 2)[2]  # after the GS2 header "n,[a=authzid],"
        self._nonce = m.group("nonce") + new_nonce()
        self._server_first = f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},i={credential.iterations}"
        self.state = 1
        return self._server_first.encode()

    def _final(self, token: bytes) -> bytes:
        text = token.decode("utf-8", errors="replace")
        m = CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise SaslError("Invalid SCRAM client final message format")
        if m.group("nonce") != self._nonce:
            raise SaslError("Invalid client nonce in the final client message.")
        credential = self._credential
        assert credential is not None
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        proof = base64.b64decode(m.group("proof"))
        client_signature = hmac.new(credential.stored_key, auth_message, self.algo).digest()
        if len(proof) != len(client_signature):
            raise SaslError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(client_signature, proof, strict=True))
        if not hmac.compare_digest(hashlib.new(self.algo, client_key).digest(), credential.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = hmac.new(credential.server_key, auth_message, self.algo).digest()
        self._credential = None
        self.state = 2
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


class Scram:
    def __init__(self, mechanism: str, store: CredentialLookup) -> None:
        self.name = mechanism
        self.store = store

    def server(self) -> ScramServer:
        return ScramServer(self.name, self.store)
