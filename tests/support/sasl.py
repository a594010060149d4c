"""SASL by hand for raw-protocol tests: handshake and authenticate over a RawClient, a SCRAM
client's messages (RFC 5802), and unsecured or signed OAUTHBEARER tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from typing import Any

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from tests.support.raw_client import RawClient

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


async def handshake(client: RawClient, mechanism: str, version: int = 1) -> Any:
    return await client.request(SaslHandshakeRequest[version](mechanism=mechanism))


async def authenticate(client: RawClient, token: bytes, version: int = 2) -> Any:
    return await client.request(SaslAuthenticateRequest[version](auth_bytes=token))


def plain(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


class ScramClient:
    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        self.algo = HASHES[mechanism]
        self.user, self.password = user, password
        self.nonce = nonce or base64.b64encode(os.urandom(18)).decode()
        self.first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"
        self.server_first = ""

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes, nonce: str | None = None) -> bytes:
        self.server_first = server_first.decode()
        fields = dict(f.split("=", 1) for f in self.server_first.split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        salted = hashlib.pbkdf2_hmac(self.algo, self.password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self.algo).digest()
        stored = hashlib.new(self.algo, client_key).digest()
        without_proof = f"c=biws,r={nonce if nonce is not None else fields['r']}"
        auth_message = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.new(stored, auth_message, self.algo).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self.server_key = hmac.new(salted, b"Server Key", self.algo).digest()
        self.auth_message = auth_message
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        expected = base64.b64encode(hmac.new(self.server_key, self.auth_message, self.algo).digest()).decode()
        return server_final.decode() == f"v={expected}"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unsecured_jwt(sub: str, lifetime_s: float = 3600, scope: str | None = None, **claims: Any) -> str:
    now = time.time()
    body: dict[str, Any] = {"sub": sub, "iat": int(now), "exp": now + lifetime_s, **claims}
    if scope is not None:
        body["scope"] = scope
    return f"{_b64(json.dumps({'alg': 'none'}).encode())}.{_b64(json.dumps(body).encode())}."


def oauth_initial(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def ec_jwks(kid: str = "k1") -> tuple[Any, dict[str, Any]]:
    """An EC P-256 key and its JWKS document."""
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    numbers = key.public_key().public_numbers()
    jwk = {"kty": "EC", "crv": "P-256", "kid": kid, "x": _b64(numbers.x.to_bytes(32, "big")), "y": _b64(numbers.y.to_bytes(32, "big"))}
    return key, {"keys": [jwk]}


def signed_jwt(key: Any, claims: dict[str, Any], kid: str = "k1") -> str:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, utils

    head = _b64(json.dumps({"alg": "ES256", "kid": kid, "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    der = key.sign(f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
    r, s = utils.decode_dss_signature(der)
    return f"{head}.{body}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"
