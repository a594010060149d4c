"""OAUTHBEARER with an identity provider, as librdkafka's own tests/0126-oauthbearer_oidc.c drives
it: confluent-kafka fetches tokens itself (`sasl.oauthbearer.method=oidc`, the client_credentials
grant) from a token endpoint, kaflet checks them against the provider's keys
(`--sasl-oauthbearer-jwks-file`, audience and issuer). A good token authenticates as its `sub`
and the session is re-authenticated on the same connection before it ends (KIP-368); an expired or
a malformed token is an authentication error that the application sees, and nothing is served."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from broker import Config
from tests.support.threaded import BrokerThread
from tests.support.token_endpoint import TokenEndpoint
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenEndpoint]:
    with TokenEndpoint(tmp_path_factory.mktemp("idp")) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def oidc_broker(idp: TokenEndpoint, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    """Only the token's subject may do anything: another principal would be refused (no ACL
    opens anything to it), so a served request proves who the broker took the client for. A
    session lasts 2 s (connections.max.reauth.ms) whatever the token's lifetime."""
    config = Config(
        port=0, data_dir=str(tmp_path_factory.mktemp("oidc") / "data"), metrics=False, offsets_partitions=3,
        listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_enabled_mechanisms="OAUTHBEARER",
        sasl_oauthbearer_jwks_file=str(idp.jwks_file), sasl_oauthbearer_expected_audience=idp.audience,
        sasl_oauthbearer_expected_issuer=idp.issuer, connections_max_reauth_ms=2000,
        authorizer="standard", super_users=f"User:{idp.subject}",
    )  # fmt: skip
    with BrokerThread(config) as b:
        yield b


def oidc_conf(b: BrokerThread, idp: TokenEndpoint, path: str = "/token", errors: list[Any] | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": b.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": idp.client_id,
        "sasl.oauthbearer.client.secret": idp.client_secret,
        "sasl.oauthbearer.token.endpoint.url": idp.url(path),
        "sasl.oauthbearer.scope": "kafka",
    }
    if errors is not None:
        conf["error_cb"] = errors.append
    return conf


def test_oidc_client_credentials_produce_consume_and_reauthenticate(oidc_broker: BrokerThread, idp: TokenEndpoint) -> None:
    errors: list[Any] = []
    conf = oidc_conf(oidc_broker, idp, errors=errors)
    topic = f"oidc-{uuid.uuid4().hex[:8]}"
    producer = Producer({**conf, "linger.ms": 0})
    delivered: list[Any] = []
    producer.produce(topic, b"first", on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(30) == 0 and delivered == [None]
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    counters = oidc_broker.broker.security.counters
    before = counters["reauthenticated"]
    got: list[bytes] = []
    try:
        # Keep both clients busy past two sessions' ends: each connection re-authenticates with a
        # token of the provider, and no request is refused meanwhile.
        deadline = time.monotonic() + 30
        sent = 1
        while time.monotonic() < deadline and counters["reauthenticated"] < before + 2:
            producer.produce(topic, b"more", on_delivery=lambda e, m: delivered.append(e))
            sent += 1
            producer.poll(0)
            _poll_into(consumer, got)
        assert producer.flush(30) == 0
        wait_until(lambda: _poll_into(consumer, got) >= sent, timeout=30, message="every record consumed")
    finally:
        consumer.close()
    assert got[0] == b"first" and len(got) == sent
    assert all(e is None for e in delivered)
    assert counters["reauthenticated"] >= before + 2
    assert {g["path"] for g in idp.grants} == {"/token"} and idp.grants[0]["scope"] == "kafka"
    assert not [e for e in errors if e.code() == KafkaError._AUTHENTICATION], errors


def _poll_into(consumer: Consumer, got: list[bytes]) -> int:
    msg = consumer.poll(0.2)
    if msg is not None and msg.error() is None:
        got.append(msg.value())
    return len(got)


@pytest.mark.parametrize("path", ["/expired", "/malformed"])
def test_oidc_bad_tokens_are_authentication_errors(oidc_broker: BrokerThread, idp: TokenEndpoint, path: str) -> None:
    """0126's "failing with expired JWT" and "failing with invalid JWT": the client reports an
    authentication error and nothing is consumed or produced."""
    errors: list[Any] = []
    conf = oidc_conf(oidc_broker, idp, path, errors)
    failed_before = oidc_broker.broker.security.counters["failed"]
    producer = Producer({**conf, "message.timeout.ms": 3000})
    outcome: list[Any] = []
    producer.produce("oidc-refused", b"x", on_delivery=lambda e, m: outcome.append(e))
    wait_until(lambda: producer.poll(0.1) >= 0 and bool(outcome), timeout=30, message="the delivery report")
    assert outcome[0] is not None
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    if path == "/malformed":
        # The client cannot tell a bad signature: the broker refuses the token.
        assert oidc_broker.broker.security.counters["failed"] > failed_before
    assert path in {g["path"] for g in idp.grants}


def test_a_token_for_another_audience_is_refused(tmp_path: Path) -> None:
    """A token the provider made for another audience authenticates nobody here."""
    with TokenEndpoint(tmp_path, audience="another-service") as idp:
        config = Config(
            port=0, data_dir=str(tmp_path / "data"), metrics=False, offsets_partitions=3,
            listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_enabled_mechanisms="OAUTHBEARER",
            sasl_oauthbearer_jwks_file=str(idp.jwks_file), sasl_oauthbearer_expected_audience="kafka",
            sasl_oauthbearer_expected_issuer=idp.issuer,
        )  # fmt: skip
        with BrokerThread(config) as b:
            errors: list[Any] = []
            consumer = Consumer({**oidc_conf(b, idp, errors=errors), "group.id": "aud"})
            try:
                consumer.subscribe(["aud"])
                wait_until(
                    lambda: consumer.poll(0.1) is None and any(e.code() == KafkaError._AUTHENTICATION for e in errors),
                    timeout=30,
                    message="an authentication error",
                )
            finally:
                consumer.close()
            assert b.broker.security.counters["failed"] >= 1
            assert b.broker.security.counters["authenticated"] == 0
