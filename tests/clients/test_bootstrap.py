"""Real clients connect, negotiate versions and read cluster metadata."""

from __future__ import annotations

import asyncio
from typing import Any

import aiokafka
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient


def test_confluent_kafka_reads_cluster_metadata(broker_thread: Any) -> None:
    bt = broker_thread()
    md = AdminClient({"bootstrap.servers": bt.bootstrap}).list_topics(timeout=10)
    assert md.cluster_id == bt.broker.cluster_id
    assert md.controller_id == 1
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {1: ("127.0.0.1", bt.broker.bound_port)}


def test_kafka_python_reads_cluster_metadata(broker_thread: Any) -> None:
    bt = broker_thread()
    admin = KafkaAdminClient(bootstrap_servers=bt.bootstrap, client_id="kp-test")
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert cluster["cluster_id"] == bt.broker.cluster_id
    assert cluster["controller_id"] == 1


def test_aiokafka_bootstraps(broker_thread: Any) -> None:
    bt = broker_thread()
    admin = AdminClient({"bootstrap.servers": bt.bootstrap})
    admin.create_topics([NewTopic("boot", 2, 1)])["boot"].result(15)

    async def main() -> tuple[set[str], set[int], list[tuple[int, str, int]]]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bt.bootstrap)
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bt.bootstrap)
        await consumer.start()
        await producer.start()
        try:
            partitions = await producer.partitions_for("boot")
            brokers = [(b.nodeId, b.host, b.port) for b in producer.client.cluster.brokers()]
            return await consumer.topics(), partitions, brokers
        finally:
            await producer.stop()
            await consumer.stop()

    topics, partitions, brokers = asyncio.run(main())
    assert "boot" in topics and partitions == {0, 1}
    assert brokers == [(1, "127.0.0.1", bt.broker.bound_port)]
