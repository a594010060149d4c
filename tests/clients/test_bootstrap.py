"""Real clients connect, negotiate versions and read cluster metadata."""

from __future__ import annotations

import asyncio
from typing import Any

import aiokafka
from confluent_kafka.admin import AdminClient
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

    async def main() -> set[str]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bt.bootstrap)
        await consumer.start()
        try:
            return await consumer.topics()
        finally:
            await consumer.stop()

    assert isinstance(asyncio.run(main()), set)
