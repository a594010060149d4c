"""Signed JWTs checked against a local JWKS file, as Kafka's BrokerJwtValidator (jose4j) checks
them against its JWKS endpoint (`sasl.oauthbearer.jwks.endpoint.url`, which may be a file).

Keys: RSA (RS256/384/512, PS256/384/512) and EC (ES256/384/512), chosen by the token's `kid`
(or tried in turn without one); `alg: none` and HMAC algorithms are refused. Claims: `exp` and
`iat` required (with `--sasl-oauthbearer-clock-skew-seconds`, 30 by default), the audience and
issuer when expected, the principal from `--sasl-oauthbearer-sub-claim-name` and the scope from
`--sasl-oauthbearer-scope-claim-name`. The file is read again when it changes.
"""

from __future__ import annotations

import base64
import json
import os
import time
from typing import Any

from broker.security.sasl.oauthbearer import InvalidToken, _Token, b64url_json, scope_of

_HASHES = {"256": "SHA256", "384": "SHA384", "512": "SHA512"}
_CURVES = {"P-256": "SECP256R1", "P-384": "SECP384R1", "P-521": "SECP521R1"}


def _b64int(text: str) -> int:
    return int.from_bytes(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), "big")


def load_key(jwk: dict[str, Any]) -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    kty = jwk.get("kty")
    if kty == "RSA":
        return rsa.RSAPublicNumbers(_b64int(jwk["e"]), _b64int(jwk["n"])).public_key()
    if kty == "EC":
        curve = getattr(ec, _CURVES[jwk["crv"]])()
        return ec.EllipticCurvePublicNumbers(_b64int(jwk["x"]), _b64int(jwk["y"]), curve).public_key()
    raise ValueError(f"unsupported key type {kty!r}")


class JwksValidator:
    def __init__(
        self,
        path: str,
        audience: str | None,
        issuer: str | None,
        sub_claim: str = "sub",
        scope_claim: str = "scope",
        clock_skew_s: int = 30,
    ) -> None:
        self.path = path
        self.audience = {a.strip() for a in (audience or "").split(",") if a.strip()}
        self.issuer = issuer or None
        self.sub_claim = sub_claim or "sub"
        self.scope_claim = scope_claim or "scope"
        self.skew = clock_skew_s
        self._mtime = -1.0
        self._keys: list[tuple[str | None, Any]] = []
        self._reload()

    def _reload(self) -> None:
        mtime = os.stat(self.path).st_mtime
        if mtime == self._mtime:
            return
        with open(self.path) as f:
            doc = json.load(f)
        keys = []
        for jwk in doc.get("keys", []):
            try:
                keys.append((jwk.get("kid"), load_key(jwk)))
            except (KeyError, ValueError, TypeError):
                continue
        if not keys:
            raise ValueError(f"--sasl-oauthbearer-jwks-file {self.path} holds no usable RSA or EC key")
        self._keys, self._mtime = keys, mtime

    def _verify(self, alg: str, key: Any, signing_input: bytes, signature: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

        digest = getattr(hashes, _HASHES[alg[2:]])()
        try:
            if alg.startswith(("RS", "PS")) and isinstance(key, rsa.RSAPublicKey):
                pad = padding.PKCS1v15() if alg.startswith("RS") else padding.PSS(padding.MGF1(digest), padding.PSS.DIGEST_LENGTH)
                key.verify(signature, signing_input, pad, digest)
                return True
            if alg.startswith("ES") and isinstance(key, ec.EllipticCurvePublicKey):
                half = len(signature) // 2
                der = utils.encode_dss_signature(int.from_bytes(signature[:half], "big"), int.from_bytes(signature[half:], "big"))
                key.verify(der, signing_input, ec.ECDSA(digest))
                return True
        except InvalidSignature:
            return False
        return False

    def validate(self, token: str) -> _Token:
        parts = token.split(".")
        if len(parts) != 3 or not parts[2]:
            raise InvalidToken("not a signed JWS")
        header, claims = b64url_json(parts[0]), b64url_json(parts[1])
        alg = header.get("alg")
        if not isinstance(alg, str) or alg[:2] not in ("RS", "PS", "ES") or alg[2:] not in _HASHES:
            raise InvalidToken("unsupported or missing JWS algorithm")
        try:
            self._reload()
            signature = base64.urlsafe_b64decode(parts[2] + "=" * (-len(parts[2]) % 4))
        except (OSError, ValueError):
            raise InvalidToken("cannot verify the signature") from None
        kid = header.get("kid")
        candidates = [k for i, k in self._keys if kid is None or i == kid]
        signing_input = f"{parts[0]}.{parts[1]}".encode()
        if not any(self._verify(alg, key, signing_input, signature) for key in candidates):
            raise InvalidToken("signature does not verify")
        now = time.time()
        exp, iat = claims.get("exp"), claims.get("iat")
        if not isinstance(exp, (int, float)) or isinstance(exp, bool):
            raise InvalidToken("no expiration time")
        if not isinstance(iat, (int, float)) or isinstance(iat, bool):
            raise InvalidToken("no issued-at time")
        if now - self.skew >= exp:
            raise InvalidToken("expired")
        if self.audience:
            aud = claims.get("aud")
            auds = {aud} if isinstance(aud, str) else set(aud) if isinstance(aud, list) else set()
            if not auds & self.audience:
                raise InvalidToken("audience not expected")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise InvalidToken("issuer not expected")
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise InvalidToken("no subject")
        return _Token(sub, int(exp * 1000), scope_of(claims, self.scope_claim))
