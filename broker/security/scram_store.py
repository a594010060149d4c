"""SCRAM credentials, salted and stored in the data dir (`scram-credentials.log`), as Kafka's
UserScramCredentialRecord / RemoveUserScramCredentialRecord: per (user, mechanism) the salt,
the stored key, the server key and the iterations. No password is ever stored; the file is
readable by its owner only.

AlterUserScramCredentials (and `kaflet users`, and `--scram-users` at start-up) validate as
Kafka's ScramControlManager: an empty user or an iteration count outside 4096..16384 is
UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, a user altered twice in
one request DUPLICATE_RESOURCE, deleting a credential that does not exist RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.security.records import RecordLog
from broker.security.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS, NAMES, TYPES, keys, salted_password
from protocol.errors import ErrorCode

FILE_NAME = "scram-credentials.log"


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # never the keys, in a log line or a traceback
        return f"ScramCredential(iterations={self.iterations}, salt=[hidden], stored_key=[hidden], server_key=[hidden])"


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


class ScramStore:
    def __init__(self, data_dir: Path) -> None:
        self.log = RecordLog(Path(data_dir) / FILE_NAME)
        self.credentials: dict[tuple[str, str], ScramCredential] = {}

    def load(self) -> None:
        self.log.load(self.replay)
        self.log.compact([self._record(u, m, c) for (u, m), c in self.credentials.items()])

    @staticmethod
    def _record(user: str, mechanism: str, c: ScramCredential) -> dict[str, Any]:
        return {
            "type": "UserScramCredential",
            "name": user,
            "mechanism": TYPES[mechanism],
            "salt": _b64(c.salt),
            "stored_key": _b64(c.stored_key),
            "server_key": _b64(c.server_key),
            "iterations": c.iterations,
        }

    def replay(self, record: dict[str, Any]) -> None:
        key = (record["name"], NAMES[record["mechanism"]])
        if record["type"] == "UserScramCredential":
            self.credentials[key] = ScramCredential(
                base64.b64decode(record["salt"]),
                base64.b64decode(record["stored_key"]),
                base64.b64decode(record["server_key"]),
                int(record["iterations"]),
            )
        elif record["type"] == "RemoveUserScramCredential":
            self.credentials.pop(key, None)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.credentials.get((user, mechanism))

    def users(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (user, mechanism), c in sorted(self.credentials.items()):
            out.setdefault(user, {})[mechanism] = c.iterations
        return out

    # -- changes ----------------------------------------------------------------------------------

    def alter(
        self, deletions: list[tuple[str, int]], upsertions: list[tuple[str, int, int, bytes, bytes]]
    ) -> list[tuple[str, ErrorCode, str | None]]:
        """AlterUserScramCredentials: (user, mechanism id) deletions and (user, mechanism id,
        iterations, salt, salted password) upsertions; per user (code, message), as Kafka orders them."""
        errors: dict[str, tuple[ErrorCode, str]] = {}
        to_delete: dict[str, tuple[str, int]] = {}
        to_upsert: dict[str, tuple[str, int, int, bytes, bytes]] = {}
        dup = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        for user, mech in deletions:
            if user in errors:
                continue
            if to_delete.pop(user, None) is not None:
                errors[user] = dup
                continue
            error = _check_name(user, mech)
            if error is None and (user, NAMES[mech]) not in self.credentials:
                error = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
            if error is not None:
                errors[user] = error
                continue
            to_delete[user] = (user, mech)
        for upsertion in upsertions:
            user, mech, iterations = upsertion[0], upsertion[1], upsertion[2]
            if user in errors:
                continue
            if to_delete.pop(user, None) is not None or to_upsert.pop(user, None) is not None:
                errors[user] = dup
                continue
            error = _check_name(user, mech)
            if error is None and iterations < MIN_ITERATIONS:
                error = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            if error is None and iterations > MAX_ITERATIONS:
                error = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            if error is not None:
                errors[user] = error
                continue
            to_upsert[user] = upsertion
        records: list[dict[str, Any]] = [{"type": "RemoveUserScramCredential", "name": u, "mechanism": m} for u, m in to_delete.values()]
        for user, mech, iterations, salt, salted in to_upsert.values():
            stored, server = keys(NAMES[mech], salted)
            records.append(self._record(user, NAMES[mech], ScramCredential(salt, stored, server, iterations)))
        self.log.append(records)
        for record in records:
            self.replay(record)
        results: list[tuple[str, ErrorCode, str | None]] = [(u, ErrorCode.NONE, None) for u in to_delete]
        results += [(u, ErrorCode.NONE, None) for u in to_upsert]
        results += [(u, code, message) for u, (code, message) in errors.items()]
        return results

    def set_password(
        self, user: str, mechanism: str, password: str, iterations: int = MIN_ITERATIONS
    ) -> list[tuple[str, ErrorCode, str | None]]:
        """Salt and store a password (the `kaflet users` and `--scram-users` path)."""
        salt = os.urandom(32)
        return self.alter([], [(user, TYPES[mechanism], iterations, salt, salted_password(mechanism, password, salt, iterations))])

    def delete(self, user: str, mechanism: str) -> list[tuple[str, ErrorCode, str | None]]:
        return self.alter([(user, TYPES[mechanism])], [])


def _check_name(user: str, mech: int) -> tuple[ErrorCode, str] | None:
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mech not in NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def describe(store: ScramStore, users: list[str] | None) -> list[tuple[str, ErrorCode, str | None, list[tuple[int, int]]]]:
    """DescribeUserScramCredentials as Kafka's ScramImage.describe: every user when none is named."""
    unique: dict[str, bool] = {}
    if not users:
        for user, _m in store.credentials:
            unique[user] = False
    else:
        for user in users:
            unique[user] = user in unique
    out = []
    for user, duplicate in unique.items():
        if duplicate:
            out.append(
                (
                    user,
                    ErrorCode.DUPLICATE_RESOURCE,
                    f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}",
                    [],
                )
            )
            continue
        infos = [(TYPES[m], c.iterations) for (u, m), c in sorted(store.credentials.items(), key=lambda kv: TYPES[kv[0][1]]) if u == user]
        if infos:
            out.append((user, ErrorCode.NONE, None, infos))
        else:
            out.append((user, ErrorCode.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {user}", []))
    return out
