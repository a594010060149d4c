"""SASL as Kafka's SaslServerAuthenticator (issue 27): SaslHandshake v0-1 and SaslAuthenticate
v0-2, PLAIN, SCRAM-SHA-256/512, OAUTHBEARER (unsecured and signed against a JWKS file), KIP-368
re-authentication, and every bad input of the issue, over raw sockets."""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslHandshakeRequest

from broker import Broker, Config
from protocol.errors import ErrorCode
from tests.support import sasl
from tests.support.raw_client import RawClient

USERS = "alice:alice-secret,bob:bob-secret"


@pytest.fixture
async def sasl_broker(make_config: Callable[..., Config]) -> AsyncIterator[Broker]:
    config = make_config(
        listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_plain_users=USERS, scram_users="carol:carol-secret", request_read_timeout_ms=1500
    )
    async with Broker(config) as b:
        yield b


@pytest.fixture
async def connect(sasl_broker: Broker) -> AsyncIterator[Callable[..., Any]]:
    clients: list[RawClient] = []

    async def make(client_id: str = "sasl-test") -> RawClient:
        c = await RawClient.connect(sasl_broker.bootstrap, client_id)
        clients.append(c)
        return c

    yield make
    for c in clients:
        await c.close()


async def metadata_works(c: RawClient) -> bool:
    response = await c.request(MetadataRequest[12](topics=[], allow_auto_topic_creation=False))
    return len(response.brokers) == 1


async def test_plain_handshake_authenticate_then_requests(connect: Any, sasl_broker: Broker) -> None:
    c = await connect()
    versions = await c.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert served[17] == (0, 1) and served[36] == (0, 2)
    hs = await sasl.handshake(c, "PLAIN")
    assert hs.error_code == 0 and set(hs.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}
    auth = await sasl.authenticate(c, sasl.plain("alice", "alice-secret"))
    assert (auth.error_code, auth.error_message, auth.auth_bytes, auth.session_lifetime_ms) == (0, "", b"", 0)
    assert await metadata_works(c)
    assert {str(conn.principal) for conn in sasl_broker.connections} == {"User:alice"}
    # After authentication both are Kafka's KafkaApis answers: ILLEGAL_SASL_STATE.
    again = await sasl.authenticate(c, sasl.plain("alice", "alice-secret"))
    assert (
        again.error_code == ErrorCode.ILLEGAL_SASL_STATE
        and again.error_message == "SaslAuthenticate request received after successful authentication"
    )
    assert (await sasl.handshake(c, "PLAIN")).error_code == ErrorCode.ILLEGAL_SASL_STATE


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram(connect: Any, mechanism: str) -> None:
    c = await connect()
    assert (await sasl.handshake(c, mechanism)).error_code == 0
    scram = sasl.ScramClient(mechanism, "carol", "carol-secret")
    first = await sasl.authenticate(c, scram.first())
    assert first.error_code == 0 and first.auth_bytes.startswith(f"r={scram.nonce}".encode())
    final = await sasl.authenticate(c, scram.final(first.auth_bytes))
    assert final.error_code == 0 and scram.verify(final.auth_bytes)
    assert await metadata_works(c)


@pytest.mark.parametrize(
    ("mechanism", "user", "password", "message"),
    [
        ("PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password"),
        ("PLAIN", "mallory", "x", "Authentication failed: Invalid username or password"),
        (
            "SCRAM-SHA-256",
            "carol",
            "wrong",
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256",
        ),
        (
            "SCRAM-SHA-512",
            "mallory",
            "x",
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
        ),
    ],
)
async def test_wrong_password_or_unknown_user_is_answered_then_closed(
    connect: Any, mechanism: str, user: str, password: str, message: str
) -> None:
    c = await connect()
    await sasl.handshake(c, mechanism)
    if mechanism == "PLAIN":
        answer = await sasl.authenticate(c, sasl.plain(user, password))
    else:
        scram = sasl.ScramClient(mechanism, user, password)
        answer = await sasl.authenticate(c, scram.first())
        if answer.error_code == 0:
            answer = await sasl.authenticate(c, scram.final(answer.auth_bytes))
    assert (answer.error_code, answer.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, message)
    assert await c.wait_closed_by_peer()


async def test_unsupported_mechanism(connect: Any) -> None:
    c = await connect()
    hs = await sasl.handshake(c, "GSSAPI")
    assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and "PLAIN" in hs.mechanisms
    assert await c.wait_closed_by_peer()


async def test_a_request_before_authentication_closes_the_connection_unanswered(connect: Any, sasl_broker: Broker) -> None:
    c = await connect()
    fut = c.send(MetadataRequest[12](topics=[], allow_auto_topic_creation=False))
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(fut, 5)
    # While authenticating (after the handshake), another request is answered ILLEGAL_SASL_STATE, then closed.
    d = await connect()
    await sasl.handshake(d, "PLAIN")
    answer = await d.request(MetadataRequest[12](topics=[], allow_auto_topic_creation=False))
    assert all(t.error_code == ErrorCode.ILLEGAL_SASL_STATE for t in answer.topics) or answer.topics == []
    assert await d.wait_closed_by_peer()
    # Everyone else is still served.
    e = await connect()
    await sasl.handshake(e, "PLAIN")
    assert (await sasl.authenticate(e, sasl.plain("bob", "bob-secret"))).error_code == 0


@pytest.mark.parametrize(
    ("mechanism", "token"),
    [
        ("PLAIN", b"only\0two"),
        ("PLAIN", b"\0\0"),
        ("PLAIN", b"\xff\xfe\0\xff\0\xff"),
        ("SCRAM-SHA-256", b"garbage"),
        ("SCRAM-SHA-256", b"n,,n=carol,r="),
        ("SCRAM-SHA-512", b"n,,n=ca=rol,r=abc"),
        ("OAUTHBEARER", b"n,,\x01auth=Basic x\x01\x01"),
        ("OAUTHBEARER", b"\x00" * 100),
    ],
)
async def test_malformed_tokens_fail_authentication(connect: Any, mechanism: str, token: bytes) -> None:
    c = await connect()
    await sasl.handshake(c, mechanism)
    answer = await sasl.authenticate(c, token)
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and answer.error_message
    assert await c.wait_closed_by_peer()


async def test_scram_nonce_tricks(connect: Any) -> None:
    # The final message must carry the client's nonce followed by the server's, exactly.
    for forged in ("client-only", None):
        c = await connect()
        await sasl.handshake(c, "SCRAM-SHA-256")
        scram = sasl.ScramClient("SCRAM-SHA-256", "carol", "carol-secret", nonce="abc")
        first = await sasl.authenticate(c, scram.first())
        server_nonce = first.auth_bytes.decode().split(",")[0][2:]
        nonce = "abc" if forged == "client-only" else server_nonce + "x"
        answer = await sasl.authenticate(c, scram.final(first.auth_bytes, nonce=nonce))
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert await c.wait_closed_by_peer()
    # A proof recorded from one session does not open another: the server nonce is new each time.
    c1 = await connect()
    await sasl.handshake(c1, "SCRAM-SHA-256")
    scram = sasl.ScramClient("SCRAM-SHA-256", "carol", "carol-secret", nonce="fixed")
    recorded = scram.final((await sasl.authenticate(c1, scram.first())).auth_bytes)
    c2 = await connect()
    await sasl.handshake(c2, "SCRAM-SHA-256")
    await sasl.authenticate(c2, sasl.ScramClient("SCRAM-SHA-256", "carol", "x", nonce="fixed").first())
    replayed = await sasl.authenticate(c2, recorded)
    assert replayed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


async def test_oversize_auth_frame_is_closed(connect: Any) -> None:
    c = await connect()
    await sasl.handshake(c, "PLAIN")
    await c.send_raw(struct.pack(">i", 600_000) + b"\0" * 1024)  # over sasl.server.max.receive.size (512 KiB)
    assert await c.wait_closed_by_peer()
    d = await connect()
    await sasl.handshake(d, "PLAIN")
    assert (await sasl.authenticate(d, sasl.plain("alice", "alice-secret"))).error_code == 0


async def test_stalled_authentication_is_closed_within_the_request_timeout(connect: Any) -> None:
    started = time.monotonic()
    c = await connect()
    await sasl.handshake(c, "PLAIN")
    assert await c.wait_closed_by_peer(timeout=5)
    assert time.monotonic() - started < 4  # --request-read-timeout-ms 1500


async def test_handshake_v0_raw_tokens(connect: Any) -> None:
    c = await connect()
    hs = await c.request(SaslHandshakeRequest[0](mechanism="PLAIN"))
    assert hs.error_code == 0
    token = sasl.plain("alice", "alice-secret")
    assert c._reader_task is not None  # raw frames are read here, not by the response reader
    c._reader_task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await c._reader_task
    c._reader_task = None
    await c.send_raw(struct.pack(">i", len(token)) + token)
    assert await c.read_frame() == b""  # PLAIN's empty challenge, size-prefixed, no header
    assert await metadata_works(c)


async def test_oauthbearer_unsecured(connect: Any, sasl_broker: Broker) -> None:
    c = await connect()
    await sasl.handshake(c, "OAUTHBEARER")
    ok = await sasl.authenticate(c, sasl.oauth_initial(sasl.unsecured_jwt("dave", lifetime_s=60)))
    assert ok.error_code == 0 and 50_000 < ok.session_lifetime_ms <= 60_000  # the token's expiry bounds the session
    assert "User:dave" in {str(x.principal) for x in sasl_broker.connections}
    # An expired token: Kafka's JSON error challenge, then the client's %x01 fails it with that message.
    d = await connect()
    await sasl.handshake(d, "OAUTHBEARER")
    challenge = await sasl.authenticate(d, sasl.oauth_initial(sasl.unsecured_jwt("dave", lifetime_s=-10)))
    assert challenge.error_code == 0 and json.loads(challenge.auth_bytes) == {"status": "invalid_token"}
    failed = await sasl.authenticate(d, b"\x01")
    assert (failed.error_code, failed.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, '{"status":"invalid_token"}')
    assert await d.wait_closed_by_peer()


async def test_oauthbearer_required_scope(make_config: Callable[..., Config]) -> None:
    config = make_config(
        listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_enabled_mechanisms="OAUTHBEARER", sasl_oauthbearer_required_scope="kafka"
    )
    async with Broker(config) as b:
        c = await RawClient.connect(b.bootstrap)
        await sasl.handshake(c, "OAUTHBEARER")
        challenge = await sasl.authenticate(c, sasl.oauth_initial(sasl.unsecured_jwt("erin", scope="read write")))
        assert json.loads(challenge.auth_bytes) == {"status": "insufficient_scope", "scope": "[kafka]"}
        await c.close()
        c = await RawClient.connect(b.bootstrap)
        await sasl.handshake(c, "OAUTHBEARER")
        assert (await sasl.authenticate(c, sasl.oauth_initial(sasl.unsecured_jwt("erin", scope="kafka read")))).error_code == 0
        await c.close()


async def test_oauthbearer_signed_jwt_against_a_jwks_file(make_config: Callable[..., Config], tmp_path: Path) -> None:
    key, jwks = sasl.ec_jwks()
    (tmp_path / "jwks.json").write_text(json.dumps(jwks))
    other, _ = sasl.ec_jwks()
    config = make_config(
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        sasl_enabled_mechanisms="OAUTHBEARER",
        sasl_oauthbearer_jwks_file=str(tmp_path / "jwks.json"),
        sasl_oauthbearer_expected_audience="kafka",
        sasl_oauthbearer_expected_issuer="https://idp.test",
    )
    now = int(time.time())
    good = {"sub": "frank", "aud": "kafka", "iss": "https://idp.test", "iat": now, "exp": now + 300}
    async with Broker(config) as b:
        for token, ok in (
            (sasl.signed_jwt(key, good), True),
            (sasl.signed_jwt(other, good), False),  # signed by a key the JWKS does not hold
            (sasl.signed_jwt(key, {**good, "aud": "other"}), False),
            (sasl.signed_jwt(key, {**good, "iss": "https://evil.test"}), False),
            (sasl.signed_jwt(key, {**good, "exp": now - 100}), False),
            (sasl.unsecured_jwt("frank"), False),  # alg none is refused by the signed validator
        ):
            c = await RawClient.connect(b.bootstrap)
            await sasl.handshake(c, "OAUTHBEARER")
            answer = await sasl.authenticate(c, sasl.oauth_initial(token))
            if ok:
                assert answer.error_code == 0 and answer.auth_bytes == b""
            else:
                assert json.loads(answer.auth_bytes) == {"status": "invalid_token"}
            await c.close()


async def test_reauthentication_kip_368(make_config: Callable[..., Config]) -> None:
    config = make_config(listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_plain_users=USERS, connections_max_reauth_ms=1500)
    async with Broker(config) as b:
        c = await RawClient.connect(b.bootstrap)
        await sasl.handshake(c, "PLAIN")
        assert (await sasl.authenticate(c, sasl.plain("alice", "alice-secret"))).session_lifetime_ms == 1500
        await asyncio.sleep(1.1)  # re-authentication is not allowed more than once a second
        # Re-authentication on the same connection keeps it: same mechanism, same principal.
        assert (await sasl.handshake(c, "PLAIN")).error_code == 0
        again = await sasl.authenticate(c, sasl.plain("alice", "alice-secret"))
        assert again.error_code == 0 and again.session_lifetime_ms == 1500
        assert await metadata_works(c)
        # Another principal on re-authentication is refused, and the connection closed.
        await asyncio.sleep(1.1)
        await sasl.handshake(c, "PLAIN")
        refused = await sasl.authenticate(c, sasl.plain("bob", "bob-secret"))
        assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert refused.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"
        assert await c.wait_closed_by_peer()
        # A session left to expire: the next request closes the connection, as Kafka's Processor does.
        d = await RawClient.connect(b.bootstrap)
        await sasl.handshake(d, "PLAIN")
        await sasl.authenticate(d, sasl.plain("alice", "alice-secret"))
        await asyncio.sleep(1.7)
        fut = d.send(MetadataRequest[12](topics=[], allow_auto_topic_creation=False))
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(fut, 5)
        await d.close()


async def test_reauthentication_at_most_once_a_second_as_kafka(make_config: Callable[..., Config]) -> None:
    """Kafka's KafkaChannel.maybeBeginServerReauthentication: a SaslHandshake less than a second
    after the last re-authentication began is not a re-authentication; it goes to the request
    handler, which answers ILLEGAL_SASL_STATE with no mechanisms, and the session stays as it was.
    librdkafka meets this when it re-authenticates with a token about to expire (docs/security.md)."""
    config = make_config(listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_plain_users=USERS, connections_max_reauth_ms=60_000)
    async with Broker(config) as b:
        c = await RawClient.connect(b.bootstrap)
        await sasl.handshake(c, "PLAIN")
        await sasl.authenticate(c, sasl.plain("alice", "alice-secret"))
        assert (await sasl.handshake(c, "PLAIN")).error_code == 0  # the first re-authentication
        assert (await sasl.authenticate(c, sasl.plain("alice", "alice-secret"))).error_code == 0
        too_soon = await sasl.handshake(c, "PLAIN")
        assert (too_soon.error_code, too_soon.mechanisms) == (ErrorCode.ILLEGAL_SASL_STATE, [])
        assert await metadata_works(c)  # still authenticated: the refused handshake changed nothing
        await c.close()


def test_no_password_token_or_key_in_any_log_line(broker_proc: Callable[..., Any], tmp_path: Path) -> None:
    from tests.support.waiting import wait_until

    secret_token = sasl.unsecured_jwt("gina", lifetime_s=-5, secretclaim="tok-0123456789")
    bp = broker_proc(
        "--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--sasl-plain-users", "alice:pw-alice-123", "--scram-users", "carol:pw-carol-456",
        "--log-level", "debug",
    )  # fmt: skip

    async def scenario() -> None:
        for mech, token in (
            ("PLAIN", sasl.plain("alice", "pw-wrong-789")),
            ("PLAIN", sasl.plain("alice", "pw-alice-123")),
            ("OAUTHBEARER", sasl.oauth_initial(secret_token)),
        ):
            c = await RawClient.connect(bp.bootstrap)
            await sasl.handshake(c, mech)
            await sasl.authenticate(c, token)
            await c.close()
        c = await RawClient.connect(bp.bootstrap)
        await sasl.handshake(c, "SCRAM-SHA-256")
        scram = sasl.ScramClient("SCRAM-SHA-256", "carol", "pw-carol-456")
        await sasl.authenticate(c, scram.final((await sasl.authenticate(c, scram.first())).auth_bytes))
        await c.close()

    asyncio.run(scenario())
    wait_until(lambda: any("SASL authentication complete" in line for line in bp.lines), message="the debug lines")
    text = "\n".join(bp.lines)
    for secret in ("pw-alice-123", "pw-wrong-789", "pw-carol-456", "tok-0123456789", secret_token.split(".")[1]):
        assert secret not in text
    assert "failed authentication" in text
    scrape = __import__("urllib.request").request.urlopen(f"http://{bp.metrics}/metrics", timeout=10).read().decode()
    assert all(s not in scrape for s in ("pw-alice-123", "tok-0123456789"))
    assert 'kaflet_authentications_total{outcome="failed"}' in scrape and 'kaflet_authentications_total{outcome="authenticated"}' in scrape


def test_plain_users_from_a_file(tmp_path: Path) -> None:
    from broker.security.sasl.plain import load_users

    (tmp_path / "users.json").write_text('{"alice": "a-secret", "bob": "b-secret"}')
    (tmp_path / "users.properties").write_text("# Kafka-style\nalice = a-secret\n\ncarol=c=secret\n")
    assert load_users(None, str(tmp_path / "users.json")) == {"alice": "a-secret", "bob": "b-secret"}
    assert load_users("dave:d-secret", str(tmp_path / "users.properties")) == {"alice": "a-secret", "carol": "c=secret", "dave": "d-secret"}
    (tmp_path / "bad").write_text("no equals sign here\n")
    with pytest.raises(ValueError, match="line 1"):
        load_users(None, str(tmp_path / "bad"))
