"""Real clients with each SASL mechanism over SASL_PLAINTEXT and SASL_SSL, and TLS with mTLS
(issue 27): confluent-kafka (librdkafka), kafka-python, aiokafka and kcat here; KafkaJS and the
Java client (JAAS configs as their users write them) in test_security_clients_jvm_node.py.
librdkafka's own admin scenarios for ACLs and the security broker config it sets are at the end."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from broker import Config
from broker.security.certs import client_cert, tls_settings
from tests.support import sasl
from tests.support.threaded import BrokerThread

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class Secured:
    def __init__(self, broker: BrokerThread, certs: Path) -> None:
        self.broker = broker
        self.certs = certs
        self.ports = {lst.name: lst.bound_port for lst in broker.broker.listeners}

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("secured")
    certs = root / "certs"
    config = Config(
        port=0, data_dir=str(root / "data"), metrics=False, offsets_partitions=3, transaction_state_partitions=3,
        listeners="SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        sasl_plain_users=",".join(f"{u}:{p}" for u, p in USERS.items()), scram_users=",".join(f"{u}:{p}" for u, p in USERS.items()),
        authorizer="standard", super_users="User:admin;User:CN=admin,O=kaflet development", allow_everyone_if_no_acl_found=True,
        **tls_settings(certs, client_auth="requested"),
    )  # fmt: skip
    client_cert(certs, "admin")
    with BrokerThread(config) as b:
        yield Secured(b, certs)


def librdkafka_conf(s: Secured, protocol: str, mechanism: str | None = None, user: str = "alice") -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": s.address(protocol), "security.protocol": protocol}
    if protocol.endswith("SSL"):
        conf["ssl.ca.location"] = str(s.certs / "ca.pem")
    if mechanism == "OAUTHBEARER":
        conf.update(
            {"sasl.mechanism": mechanism, "enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": f"principal={user}"}
        )
    elif mechanism is not None:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": USERS[user]})
    return conf


def roundtrip_librdkafka(conf: dict[str, Any], topic: str) -> bytes:
    producer = Producer({**conf, "linger.ms": 0})
    value = uuid.uuid4().hex.encode()
    errors: list[Any] = []
    producer.produce(topic, value, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(30) == 0 and errors == [None], errors
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                assert msg.value() == value
                return msg.value()
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka(secured: Secured, protocol: str, mechanism: str) -> None:
    roundtrip_librdkafka(librdkafka_conf(secured, protocol, mechanism), f"ck-{protocol}-{mechanism}".lower())


def test_confluent_kafka_ssl_and_mtls_principal(secured: Secured) -> None:
    roundtrip_librdkafka(librdkafka_conf(secured, "SSL"), "ck-ssl")
    files = client_cert(secured.certs, "admin")
    conf = {**librdkafka_conf(secured, "SSL"), "ssl.certificate.location": str(files.cert), "ssl.key.location": str(files.key)}
    # The certificate's principal is a super user: it may create ACLs.
    admin = AdminClient(conf)
    binding = AclBinding(
        ResourceType.TOPIC, "mtls-only", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW
    )
    for f in admin.create_acls([binding]).values():
        f.result(30)


def test_confluent_kafka_wrong_password_is_an_authentication_error(secured: Secured) -> None:
    conf = {**librdkafka_conf(secured, "SASL_SSL", "SCRAM-SHA-256"), "sasl.password": "wrong"}
    errors: list[Any] = []
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not errors:
        producer.poll(0.2)
    assert errors and errors[0].code() == -169, errors  # _AUTHENTICATION
    assert "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256" in errors[0].str()


def kafka_python_conf(s: Secured, protocol: str, mechanism: str, user: str = "alice") -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap_servers": s.address(protocol), "security_protocol": protocol, "sasl_mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Tokens(AbstractTokenProvider):
            def token(self) -> str:
                return sasl.unsecured_jwt(user)

        conf["sasl_oauth_token_provider"] = Tokens()
    else:
        conf.update(sasl_plain_username=user, sasl_plain_password=USERS[user])
    if protocol.endswith("SSL"):
        conf.update(ssl_cafile=str(s.certs / "ca.pem"), ssl_check_hostname=True)
    return conf


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python(secured: Secured, protocol: str, mechanism: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    conf = kafka_python_conf(secured, protocol, mechanism)
    topic = f"kp-{protocol}-{mechanism}".lower()
    producer = KafkaProducer(**conf)
    producer.send(topic, b"hello").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=20000, **conf)
    try:
        assert next(iter(consumer)).value == b"hello"
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka(secured: Secured, protocol: str, mechanism: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    conf: dict[str, Any] = {"bootstrap_servers": secured.address(protocol), "security_protocol": protocol, "sasl_mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        from aiokafka.abc import AbstractTokenProvider

        class Tokens(AbstractTokenProvider):
            async def token(self) -> str:
                return sasl.unsecured_jwt("alice")

        conf["sasl_oauth_token_provider"] = Tokens()
    else:
        conf.update(sasl_plain_username="alice", sasl_plain_password=USERS["alice"])
    if protocol.endswith("SSL"):
        conf["ssl_context"] = create_ssl_context(cafile=str(secured.certs / "ca.pem"))
    topic = f"aio-{protocol}-{mechanism}".lower()

    async def scenario() -> bytes:
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"hello")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **conf)
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), 30)
            return msg.value
        finally:
            await consumer.stop()

    assert asyncio.run(scenario()) == b"hello"


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [("SASL_SSL", "PLAIN"), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "OAUTHBEARER"), ("SASL_PLAINTEXT", "OAUTHBEARER"), ("SSL", None)],
)
def test_kcat(secured: Secured, protocol: str, mechanism: str | None) -> None:
    conf = librdkafka_conf(secured, protocol, mechanism)
    args = [f"-X{k}={v}" for k, v in conf.items() if k != "bootstrap.servers"]
    topic = f"kcat-{protocol}".lower()
    base = ["kcat", "-b", conf["bootstrap.servers"], *args]
    done = subprocess.run([*base, "-P", "-t", topic], input=b"from-kcat\n", capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*base, "-C", "-t", topic, "-o", "beginning", "-c", "1", "-e"], capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == b"from-kcat", done.stderr


def test_librdkafka_reauthenticates_kip_368(tmp_path: Path) -> None:
    """With connections.max.reauth.ms the broker tells the session lifetime; librdkafka
    re-authenticates before it ends, and keeps producing without an error."""
    config = Config(
        port=0, data_dir=str(tmp_path / "d"), metrics=False, offsets_partitions=3, listeners="SASL_PLAINTEXT://127.0.0.1:0",
        scram_users="alice:alice-secret", connections_max_reauth_ms=2000,
    )  # fmt: skip
    with BrokerThread(config) as b:
        conf = {
            "bootstrap.servers": b.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
        errors: list[Any] = []
        producer = Producer({**conf, "linger.ms": 0, "error_cb": errors.append})
        deadline = time.monotonic() + 6
        delivered: list[Any] = []
        while time.monotonic() < deadline:
            producer.produce("reauth", b"x", on_delivery=lambda e, m: delivered.append(e))
            producer.poll(0.1)
        assert producer.flush(30) == 0
        assert delivered and all(e is None for e in delivered)
        assert b.broker.security.counters["reauthenticated"] >= 1
        assert not [e for e in errors if "Disconnected" not in e.str()]
        # librdkafka's own re-authentication test (0142) reads the setting from DescribeConfigs
        # and runs only when every broker reports it above 0, as Kafka does (a static setting).
        admin = AdminClient(conf)
        [described] = admin.describe_configs([ConfigResource("broker", str(config.node_id))]).values()
        entry = described.result(30)["connections.max.reauth.ms"]
        assert (entry.value, entry.is_read_only, entry.source) == ("2000", True, ConfigSource.STATIC_BROKER_CONFIG.value)


def test_librdkafka_admin_acls_as_its_0081_test(secured: Secured) -> None:
    """librdkafka's tests/0081-admin.c do_test_CreateAcls / DescribeAcls / DeleteAcls, through
    confluent-kafka: create two bindings, describe them back with a filter, delete by filter."""
    admin = AdminClient(librdkafka_conf(secured, "SASL_SSL", "PLAIN", user="admin"))
    topic = f"rdkafka-acl-{uuid.uuid4().hex[:8]}"
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:test", "*", AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.PREFIXED, "User:test", "*", AclOperation.WRITE, AclPermissionType.DENY),
    ]
    for f in admin.create_acls(bindings).values():
        f.result(30)
    described = admin.describe_acls(
        AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
    ).result(30)
    assert sorted(described, key=str) == sorted(bindings, key=str)
    deleted = admin.delete_acls(
        [AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None, AclOperation.ANY, AclPermissionType.ANY)]
    )
    assert sorted(next(iter(deleted.values())).result(30), key=str) == sorted(bindings, key=str)
    # An invalid binding is refused by the broker, per binding.
    bad = AclBinding(
        ResourceType.BROKER, "not-kafka-cluster", ResourcePatternType.LITERAL, "User:test", "*", AclOperation.ALTER, AclPermissionType.ALLOW
    )
    with pytest.raises(Exception, match="kafka-cluster"):
        next(iter(admin.create_acls([bad]).values())).result(30)


def test_authorized_operations_follow_acls_as_librdkafkas_0081_test(secured: Secured) -> None:
    """tests/0081-admin.c with authorized operations (DescribeTopics, DescribeCluster,
    DescribeConsumerGroups with include_authorized_operations, SASL PLAIN/SCRAM): alice is no super
    user and resources without ACLs are open to everyone, so she may do everything there until an
    ALLOW for her alone narrows it to that operation and what it implies; deleting it opens it again."""
    A = AclOperation
    alice = AdminClient(librdkafka_conf(secured, "SASL_SSL", "SCRAM-SHA-512", user="alice"))
    admin = AdminClient(librdkafka_conf(secured, "SASL_SSL", "PLAIN", user="admin"))
    topic, group = f"ops-{uuid.uuid4().hex[:8]}", f"ops-g-{uuid.uuid4().hex[:8]}"
    alice.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    committer = Consumer({**librdkafka_conf(secured, "SASL_SSL", "SCRAM-SHA-512", user="alice"), "group.id": group})
    committer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    committer.close()

    def topic_ops() -> set[Any]:
        [f] = alice.describe_topics(TopicCollection([topic]), include_authorized_operations=True).values()
        return set(f.result(30).authorized_operations)

    def cluster_ops() -> set[Any]:
        return set(alice.describe_cluster(include_authorized_operations=True).result(30).authorized_operations)

    def group_ops() -> set[Any]:
        [f] = alice.describe_consumer_groups([group], include_authorized_operations=True).values()
        return set(f.result(30).authorized_operations)

    everything = {
        "topic": {A.READ, A.WRITE, A.CREATE, A.DESCRIBE, A.DELETE, A.ALTER, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS},
        "cluster": {A.CREATE, A.ALTER, A.DESCRIBE, A.CLUSTER_ACTION, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS, A.IDEMPOTENT_WRITE},
        "group": {A.READ, A.DESCRIBE, A.DELETE, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS},
    }
    cases = [
        ("topic", topic_ops, AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", A.READ, AclPermissionType.ALLOW), {A.READ, A.DESCRIBE}),
        ("cluster", cluster_ops, AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*", A.ALTER, AclPermissionType.ALLOW), {A.ALTER, A.DESCRIBE}),
        ("group", group_ops, AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*", A.READ, AclPermissionType.ALLOW), {A.READ, A.DESCRIBE}),
    ]  # fmt: skip
    for kind, ops, binding, narrowed in cases:
        assert ops() == everything[kind], kind
        admin.create_acls([binding])[binding].result(30)
        assert ops() == narrowed, kind
        deleted = admin.delete_acls([_filter_of(binding)])
        assert next(iter(deleted.values())).result(30) == [binding]
        assert ops() == everything[kind], kind


def _filter_of(b: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)


def test_user_scram_credentials_as_librdkafkas_0081_test(secured: Secured) -> None:
    """tests/0081-admin.c do_test_UserScramCredentials through confluent-kafka: a user without
    credentials is RESOURCE_NOT_FOUND; an upsertion (SCRAM-SHA-256, 10000 iterations) is described
    back and authenticates at once; a deletion takes both away."""
    admin = AdminClient(librdkafka_conf(secured, "SASL_SSL", "PLAIN", user="admin"))
    user = f"scram-{uuid.uuid4().hex[:6]}"
    with pytest.raises(KafkaException) as missing:
        admin.describe_user_scram_credentials([user])[user].result(30)
    assert missing.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10000)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, b"new-secret", b"salt-salt-salt")])[user].result(30)
    described = admin.describe_user_scram_credentials([user])[user].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_256, 10000)]
    conf = {**librdkafka_conf(secured, "SASL_SSL"), "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": "new-secret"}
    assert roundtrip_librdkafka(conf, f"scram-user-{user}")
    admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)])[user].result(30)
    with pytest.raises(KafkaException) as gone:
        admin.describe_user_scram_credentials([user])[user].result(30)
    assert gone.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    errors: list[Any] = []
    refused = Producer({**conf, "error_cb": errors.append, "message.timeout.ms": 3000})
    refused.produce(f"scram-user-{user}", b"x")
    refused.flush(10)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_librdkafka_admin_sets_a_security_broker_config(secured: Secured) -> None:
    """librdkafka's admin test (0081 do_test_AlterConfigs) sets sasl.kerberos.min.time.before.relogin
    on the BROKER resource: Kafka accepts it as a dynamic per-broker config, so does kaflet."""
    admin = AdminClient(librdkafka_conf(secured, "SASL_SSL", "PLAIN", user="admin"))
    node = str(secured.broker.broker.config.node_id)
    resource = ConfigResource("broker", node, set_config={"sasl.kerberos.min.time.before.relogin": "58000"})
    with pytest.warns(DeprecationWarning):
        for f in admin.alter_configs([resource]).values():
            f.result(30)
    described = next(iter(admin.describe_configs([ConfigResource("broker", node)]).values())).result(30)
    assert described["sasl.kerberos.min.time.before.relogin"].value == "58000"
    admin.create_topics([NewTopic("after-config", 1, 1)])["after-config"].result(30)


def test_kcat_scram_fails_as_on_kafka_4(secured: Secured) -> None:
    """Debian's kcat links librdkafka 2.0.2, whose SCRAM final message repeats the client nonce
    (fixed in librdkafka 2.6.1). Kafka 4.x checks the nonce strictly (RFC 5802) and refuses it; so
    does kaflet, with Kafka's message."""
    conf = librdkafka_conf(secured, "SASL_SSL", "SCRAM-SHA-256")
    args = [f"-X{k}={v}" for k, v in conf.items() if k != "bootstrap.servers"]
    done = subprocess.run(["kcat", "-b", conf["bootstrap.servers"], *args, "-L", "-m", "3"], capture_output=True, timeout=60)
    version = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=30).stdout
    if "librdkafka 2.0" in version or "librdkafka 1." in version:
        assert done.returncode != 0
        assert b"Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256" in done.stderr
    else:  # a kcat on a fixed librdkafka
        assert done.returncode == 0, done.stderr
