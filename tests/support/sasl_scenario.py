"""One SASL scenario for any broker with a SASL_PLAINTEXT listener (PLAIN users admin, alice and
bob; SCRAM-SHA-256/512 enabled) and StandardAuthorizer with admin a super user: SCRAM credentials
made with AlterUserScramCredentials, described, used and refused; handshake and authentication
errors. Sent to kaflet and to Kafka 4.4 (tests/differential), reduced to comparable facts."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from kafka.protocol.admin import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest

from tests.support import sasl
from tests.support.acl_scenario import login
from tests.support.raw_client import RawClient

_U = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
_D = AlterUserScramCredentialsRequest.ScramCredentialDeletion
_N = DescribeUserScramCredentialsRequest.UserName


def upsertion(user: str, mechanism: int, password: str, iterations: int = 4096) -> Any:
    import hashlib

    salt = os.urandom(16)
    algo = {1: "sha256", 2: "sha512"}.get(mechanism, "sha256")
    return _U(
        name=user,
        mechanism=mechanism,
        iterations=iterations,
        salt=salt,
        salted_password=hashlib.pbkdf2_hmac(algo, password.encode(), salt, iterations),
    )


async def scram_login(bootstrap: str, mechanism: str, user: str, password: str) -> tuple[int, str | None]:
    c = await RawClient.connect(bootstrap, "sasl-scenario")
    try:
        await sasl.handshake(c, mechanism)
        scram = sasl.ScramClient(mechanism, user, password)
        first = await sasl.authenticate(c, scram.first())
        if first.error_code:
            return first.error_code, first.error_message
        final = await sasl.authenticate(c, scram.final(first.auth_bytes))
        return final.error_code, final.error_message
    finally:
        await c.close()


async def run(bootstrap: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    admin = await login(bootstrap, "admin")
    alice = await login(bootstrap, "alice")
    try:
        altered = await admin.request(
            AlterUserScramCredentialsRequest[0](
                deletions=[_D(name="nobody", mechanism=1), _D(name="", mechanism=1)],
                upsertions=[
                    upsertion("carol", 1, "carol-secret"),
                    upsertion("carol2", 2, "carol2-secret", iterations=8192),
                    upsertion("few", 1, "x", iterations=100),
                    upsertion("many", 1, "x", iterations=20000),
                    upsertion("weird", 3, "x"),
                    upsertion("twice", 1, "x"),
                    upsertion("twice", 2, "x"),
                ],
            )
        )
        out["alter scram credentials"] = sorted((r.user, r.error_code, r.error_message) for r in altered.results)
        denied = await alice.request(AlterUserScramCredentialsRequest[0](deletions=[], upsertions=[upsertion("mallory", 1, "x")]))
        out["alice alters scram credentials"] = sorted((r.user, r.error_code) for r in denied.results)
        await asyncio.sleep(0)  # kaflet answers at once; Kafka once its metadata log is replayed (below)
        for _ in range(100):
            described = await admin.request(DescribeUserScramCredentialsRequest[0](users=None))
            if {r.user for r in described.results} >= {"carol", "carol2"}:
                break
            await asyncio.sleep(0.1)
        out["describe all scram users"] = sorted(
            (r.user, r.error_code, sorted((i.mechanism, i.iterations) for i in r.credential_infos)) for r in described.results
        )
        described = await admin.request(
            DescribeUserScramCredentialsRequest[0](users=[_N(name="carol"), _N(name="nobody"), _N(name="carol2"), _N(name="carol2")])
        )
        out["describe named scram users"] = sorted((r.user, r.error_code, r.error_message) for r in described.results)
        # Named users: with users=null Kafka 4.4 fails to build its refusal (a NullPointerException)
        # and never answers; kaflet answers CLUSTER_AUTHORIZATION_FAILED (docs/decisions.md).
        described = await alice.request(DescribeUserScramCredentialsRequest[0](users=[_N(name="carol")]))
        out["alice describes scram users"] = (described.error_code, [(r.user, r.error_code) for r in described.results])
        out["carol logs in with SCRAM-SHA-256"] = await scram_login(bootstrap, "SCRAM-SHA-256", "carol", "carol-secret")
        out["carol logs in with SCRAM-SHA-512 (no such credential)"] = await scram_login(
            bootstrap, "SCRAM-SHA-512", "carol", "carol-secret"
        )
        out["carol2 logs in with SCRAM-SHA-512"] = await scram_login(bootstrap, "SCRAM-SHA-512", "carol2", "carol2-secret")
        out["carol with a wrong password"] = await scram_login(bootstrap, "SCRAM-SHA-256", "carol", "nope")
        c = await RawClient.connect(bootstrap, "sasl-scenario")
        await sasl.handshake(c, "PLAIN")
        wrong = await sasl.authenticate(c, sasl.plain("alice", "nope"))
        out["alice with a wrong PLAIN password"] = (wrong.error_code, wrong.error_message)
        out["the connection is closed after a failure"] = await c.wait_closed_by_peer()
        await c.close()
        c = await RawClient.connect(bootstrap, "sasl-scenario")
        hs = await sasl.handshake(c, "GSSAPI")
        out["unsupported mechanism"] = (hs.error_code, sorted(hs.mechanisms))
        await c.close()
        again = await sasl.authenticate(alice, sasl.plain("alice", "alice-secret"))
        out["SaslAuthenticate after authentication"] = (again.error_code, again.error_message)
        hs = await sasl.handshake(alice, "PLAIN")
        out["SaslHandshake after authentication"] = (hs.error_code, sorted(hs.mechanisms))
        deleted = await admin.request(AlterUserScramCredentialsRequest[0](deletions=[_D(name="carol", mechanism=1)], upsertions=[]))
        out["delete carol's credential"] = [(r.user, r.error_code) for r in deleted.results]
    finally:
        await admin.close()
        await alice.close()
    return out
