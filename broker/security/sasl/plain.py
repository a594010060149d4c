"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer: `authzid NUL user NUL password`, the users
and passwords from `--sasl-plain-users` / `--sasl-plain-users-file` (Kafka's JAAS `user_NAME`)."""

from __future__ import annotations

import hmac
import json
from pathlib import Path

from broker.security.sasl import AuthenticationFailed


def load_users(flag: str | None, path: str | None) -> dict[str, str]:
    """`alice:secret,bob:pw` and/or a file: JSON {"alice": "secret"} or `alice=secret` lines."""
    users: dict[str, str] = {}
    if path:
        text = Path(path).read_text()
        if text.lstrip().startswith("{"):
            loaded = json.loads(text)
            if not isinstance(loaded, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()):
                raise ValueError(f"--sasl-plain-users-file {path}: expected a JSON object of user -> password")
            users.update(loaded)
        else:
            for n, line in enumerate(text.splitlines(), 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                user, sep, password = line.partition("=")
                if not sep or not user.strip():
                    raise ValueError(f"--sasl-plain-users-file {path} line {n}: expected user=password")
                users[user.strip()] = password.strip()
    for entry in (flag or "").split(","):
        if not entry.strip():
            continue
        user, sep, password = entry.partition(":")
        if not sep or not user.strip():
            raise ValueError("--sasl-plain-users: expected user:password[,user:password...]")
        users[user.strip()] = password
    return users


class PlainServer:
    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.complete = False
        self.authorization_id = ""
        self.credential_expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        text = token.decode("utf-8", errors="replace")
        tokens = text.split("\0", 3)
        if len(tokens) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(username)
        # Compared in constant time, and against something even for an unknown user.
        ok = hmac.compare_digest((expected or "\0unknown").encode(), password.encode()) and expected is not None
        if not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


class Plain:
    name = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users

    def server(self) -> PlainServer:
        return PlainServer(self.users)
