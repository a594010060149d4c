"""An OAuth 2 token endpoint on loopback for clients configured with `sasl.oauthbearer.method=oidc`
(librdkafka, confluent-kafka), shaped like the one librdkafka's own OIDC tests run against: the
client_credentials grant with HTTP Basic client authentication and an optional scope, answered
with a signed JWT (ES256, a key of the JWKS the broker is given as `--sasl-oauthbearer-jwks-file`).

Paths: `/token` a valid token, `/expired` a token whose `exp` has passed, `/malformed` a token
whose signature is cut short; anything else 404. `grants` records the requests it answered.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support import sasl


class TokenEndpoint:
    def __init__(
        self,
        directory: Path,
        *,
        client_id: str = "kaflet-client",
        client_secret: str = "kaflet-client-secret",
        subject: str = "svc-orders",
        audience: str = "kafka",
        issuer: str = "https://idp.test",
        scopes: tuple[str, ...] = ("kafka",),
        lifetime_s: int = 3600,
    ) -> None:
        self.key, jwks = sasl.ec_jwks("idp-key")
        self.jwks_file = directory / "jwks.json"
        self.jwks_file.write_text(json.dumps(jwks))
        self.client_id, self.client_secret = client_id, client_secret
        self.subject, self.audience, self.issuer = subject, audience, issuer
        self.scopes, self.lifetime_s = scopes, lifetime_s
        self.grants: list[dict[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name="token-endpoint", daemon=True)

    def url(self, path: str = "/token") -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    def token(self, lifetime_s: float) -> str:
        now = int(time.time())
        claims = {"sub": self.subject, "aud": self.audience, "iss": self.issuer, "iat": now, "exp": int(now + lifetime_s)}
        return sasl.signed_jwt(self.key, {**claims, "scope": " ".join(self.scopes), "client_id": self.client_id}, kid="idp-key")

    def __enter__(self) -> TokenEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
                grant = {k: v[0] for k, v in form.items()}
                basic = base64.b64encode(f"{endpoint.client_id}:{endpoint.client_secret}".encode()).decode()
                if grant.get("grant_type") != "client_credentials":
                    return self._answer(400, {"error": "unsupported_grant_type"})
                if self.headers.get("Authorization") != f"Basic {basic}":
                    return self._answer(401, {"error": "invalid_client"})
                if "scope" in grant and not set(grant["scope"].split()) <= set(endpoint.scopes):
                    return self._answer(400, {"error": "invalid_scope"})
                if self.path == "/token":
                    token = endpoint.token(endpoint.lifetime_s)
                elif self.path == "/expired":
                    token = endpoint.token(-60)
                elif self.path == "/malformed":
                    token = endpoint.token(endpoint.lifetime_s)[:-8]
                else:
                    return self._answer(404, {"error": "not_found"})
                endpoint.grants.append({**grant, "path": self.path})
                return self._answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": endpoint.lifetime_s})

        return Handler
