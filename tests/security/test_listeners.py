"""Listeners as Kafka names them (issue 27): several listeners per broker, each with its protocol,
advertised addresses per listener, and every listener working with `--brokers N`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.admin import DescribeClusterRequest
from kafka.protocol.metadata import MetadataRequest

from broker import Config
from broker.cluster.cluster import Cluster
from broker.config import ConfigError
from broker.security.listeners import for_node
from tests.support import sasl
from tests.support.raw_client import RawClient


async def brokers_seen(address: str, user: str | None = None) -> list[tuple[int, str, int]]:
    c = await RawClient.connect(address)
    try:
        if user is not None:
            await sasl.handshake(c, "PLAIN")
            assert (await sasl.authenticate(c, sasl.plain(user, "pw"))).error_code == 0
        meta = await c.request(MetadataRequest[12](topics=[], allow_auto_topic_creation=False))
        cluster = await c.request(DescribeClusterRequest[1](include_cluster_authorized_operations=False, endpoint_type=1))
        assert sorted((b.broker_id, b.host, b.port) for b in cluster.brokers) == sorted((b.node_id, b.host, b.port) for b in meta.brokers)
        return sorted((b.node_id, b.host, b.port) for b in meta.brokers)
    finally:
        await c.close()


async def test_every_listener_works_with_brokers_n(make_config: Callable[..., Config]) -> None:
    config = make_config(
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", sasl_plain_users="u:pw", sasl_enabled_mechanisms="PLAIN"
    )
    async with Cluster(config, brokers=3) as cluster:
        plain = {n.config.node_id: n.listeners[0].bound_port for n in cluster.nodes}
        secured = {n.config.node_id: n.listeners[1].bound_port for n in cluster.nodes}
        assert len(set(plain.values()) | set(secured.values())) == 6
        for node in cluster.nodes:
            # Each node tells a client the addresses of the listener it came in on, for every node.
            assert await brokers_seen(f"127.0.0.1:{plain[node.config.node_id]}") == [(i, "127.0.0.1", p) for i, p in sorted(plain.items())]
            assert await brokers_seen(f"127.0.0.1:{secured[node.config.node_id]}", "u") == [
                (i, "127.0.0.1", p) for i, p in sorted(secured.items())
            ]

        def produce_everywhere() -> None:
            from confluent_kafka import Producer
            from confluent_kafka.admin import AdminClient, NewTopic

            conf = {
                "bootstrap.servers": f"127.0.0.1:{secured[1]}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "u",
                "sasl.password": "pw",
            }
            admin = AdminClient(conf)
            admin.create_topics([NewTopic("spread", 6, 1)])["spread"].result(30)
            producer = Producer(conf)
            errors: list[Any] = []
            for p in range(6):
                producer.produce("spread", b"x", partition=p, on_delivery=lambda e, m: errors.append(e))
            assert producer.flush(30) == 0 and errors == [None] * 6

        await asyncio.to_thread(produce_everywhere)
        assert len({cluster.leader("spread", p) for p in range(6)}) == 3  # leaders on every node


def test_node_ports_shift_by_the_number_of_listeners() -> None:
    config = Config(
        port=0, listeners="PLAINTEXT://:9092,SASL_SSL://127.0.0.1:9093", advertised_listeners="SASL_SSL://kafka.test:19093", metrics=False
    )
    assert for_node(config, 0) == {}
    assert for_node(config, 2) == {
        "listeners": "PLAINTEXT://:9096,SASL_SSL://127.0.0.1:9097",
        "advertised_listeners": "SASL_SSL://kafka.test:19097",
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"listeners": "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"}, "listed twice"),
        ({"listeners": "INTERNAL://127.0.0.1:1"}, "no security protocol for listener INTERNAL"),
        ({"listeners": "PLAINTEXT://127.0.0.1:1", "advertised_listeners": "SSL://x:1"}, "not one of --listeners"),
        ({"listeners": "nonsense"}, "not NAME://host:port"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:1", "sasl_enabled_mechanisms": "GSSAPI"}, "unsupported SASL mechanism"),
        ({"listeners": "PLAINTEXT://127.0.0.1:1", "listener_security_protocol_map": "PLAINTEXT:SSH"}, "NAME:PROTOCOL"),
        ({"advertised_listeners": "PLAINTEXT://x:1"}, "needs --listeners"),
    ],
)
def test_listener_settings_are_checked(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Config(port=0, metrics=False, **overrides).validate()


async def test_custom_listener_names_and_per_listener_mechanisms(make_config: Callable[..., Config]) -> None:
    config = make_config(
        listeners="INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        listener_security_protocol_map="INTERNAL:SASL_PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        listener_sasl_enabled_mechanisms="INTERNAL=PLAIN;EXTERNAL=SCRAM-SHA-512",
        sasl_plain_users="u:pw",
    )
    from broker import Broker

    async with Broker(config) as b:
        internal, external = (f"127.0.0.1:{lst.bound_port}" for lst in b.listeners)
        c = await RawClient.connect(internal)
        assert set((await sasl.handshake(c, "PLAIN")).mechanisms) == {"PLAIN"}
        await c.close()
        c = await RawClient.connect(external)
        hs = await sasl.handshake(c, "PLAIN")
        assert hs.error_code != 0 and hs.mechanisms == ["SCRAM-SHA-512"]
        await c.close()
