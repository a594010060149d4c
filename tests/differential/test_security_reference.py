"""kaflet and Apache Kafka 4.4 configured the same way (issue 27): a SASL_PLAINTEXT listener with
PLAIN users admin, alice and bob, StandardAuthorizer with admin a super user, the same ACLs; the
ACL scenario of tests/support/acl_scenario.py goes to both and their answers must be equal."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker import Config
from broker.embed.thread import BrokerThread
from tests.support import acl_scenario, sasl_scenario
from tests.support.jvm import JvmUnavailable
from tests.support.kafka_reference import KafkaReference

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in acl_scenario.USERS.items())
    + ";"
)


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaReference]:
    kafka = KafkaReference(
        tmp_path_factory.mktemp("kafka-secured"),
        extra_listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"},
        properties={
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # The PLAINTEXT and CONTROLLER listeners serve the broker itself (ANONYMOUS).
            "super.users": "User:admin;User:ANONYMOUS",
        },
    )
    try:
        kafka.start()
    except JvmUnavailable as exc:
        pytest.fail(f"the reference broker (Apache Kafka 4.4) cannot run: {exc}", pytrace=False)
    try:
        yield kafka
    finally:
        kafka.stop()


def kaflet_answers(tmp_path: Path, scenario: Any = acl_scenario) -> dict[str, Any]:
    users = ",".join(f"{u}:{p}" for u, p in acl_scenario.USERS.items())
    config = Config(
        port=0, data_dir=str(tmp_path / "kaflet"), metrics=False, offsets_partitions=5, transaction_state_partitions=5,
        listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_enabled_mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", sasl_plain_users=users,
        authorizer="standard", super_users="User:admin",
    )  # fmt: skip
    with BrokerThread(config) as b:
        return asyncio.run(scenario.run(b.bootstrap))


def test_the_acl_scenario_answers_as_kafka(secured_kafka: KafkaReference, tmp_path: Path) -> None:
    kafka = asyncio.run(acl_scenario.run(secured_kafka.address("SASL_PLAINTEXT")))
    kaflet = kaflet_answers(tmp_path)
    differences = {k: (kaflet.get(k), kafka.get(k)) for k in kafka.keys() | kaflet.keys() if kaflet.get(k) != kafka.get(k)}
    assert not differences, "kaflet vs Kafka 4.4:\n" + "\n".join(f"  {k}: {a!r} != {b!r}" for k, (a, b) in sorted(differences.items()))


def test_the_sasl_scenario_answers_as_kafka(secured_kafka: KafkaReference, tmp_path: Path) -> None:
    """SCRAM credentials through AlterUserScramCredentials, described and used; handshake and
    authentication failures; SASL requests after authentication."""
    kafka = asyncio.run(sasl_scenario.run(secured_kafka.address("SASL_PLAINTEXT")))
    kaflet = kaflet_answers(tmp_path, sasl_scenario)
    differences = {k: (kaflet.get(k), kafka.get(k)) for k in kafka.keys() | kaflet.keys() if kaflet.get(k) != kafka.get(k)}
    assert not differences, "kaflet vs Kafka 4.4:\n" + "\n".join(f"  {k}: {a!r} != {b!r}" for k, (a, b) in sorted(differences.items()))
