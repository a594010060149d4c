"""Embedding kaflet: `Broker.in_thread()` and `Broker.in_subprocess()` driven by confluent-kafka,
kafka-python and aiokafka from synchronous code (aiokafka under its own `asyncio.run`), and
`async with Broker()` with aiokafka on the broker's own loop.

Each scenario is what a user's test does: produce, read in a consumer group, commit, and read
the committed offset back with a fresh client.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from broker import Broker, Config
from broker.embed import BrokerProcess, BrokerThread
from tests.support.waiting import wait_until

RECORDS = 5


def confluent_scenario(bootstrap: str, topic: str, group: str) -> int:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: list[bytes] = []

    def poll() -> bool:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            seen.append(msg.value())
        return len(seen) == RECORDS

    try:
        wait_until(poll, timeout=30, message="records read")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    fresh = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [committed] = fresh.committed([TopicPartition(topic, 0)], timeout=10)
        return int(committed.offset)
    finally:
        fresh.close()


def kafka_python_scenario(bootstrap: str, topic: str, group: str) -> int:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(RECORDS):
        producer.send(topic, b"v%d" % i)
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=20000
    )
    consumer.subscribe([topic])
    try:
        seen = [next(consumer) for _ in range(RECORDS)]
        assert len(seen) == RECORDS
        consumer.commit()
    finally:
        consumer.close()
    fresh = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return int(fresh.committed(TopicPartition(topic, 0)))
    finally:
        fresh.close()


async def aiokafka_flow(bootstrap: str, topic: str, group: str) -> int:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(RECORDS):
            await producer.send_and_wait(topic, b"v%d" % i)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        seen = []
        async with asyncio.timeout(30):
            async for msg in consumer:
                seen.append(msg.value)
                if len(seen) == RECORDS:
                    break
        await consumer.commit()
        return int(await consumer.committed(TopicPartition(topic, 0)))
    finally:
        await consumer.stop()


def aiokafka_scenario(bootstrap: str, topic: str, group: str) -> int:
    return asyncio.run(aiokafka_flow(bootstrap, topic, group))  # a loop of its own, in this thread


SCENARIOS: dict[str, Callable[[str, str, str], int]] = {
    "confluent-kafka": confluent_scenario,
    "kafka-python": kafka_python_scenario,
    "aiokafka": aiokafka_scenario,
}


def thread_helper() -> AbstractContextManager[BrokerThread]:
    return Broker.in_thread(offsets_partitions=5)


def process_helper() -> AbstractContextManager[BrokerProcess]:
    return Broker.in_subprocess("--offsets-partitions", "5")


@pytest.fixture(params=["thread", "subprocess"])
def helper(request: Any) -> Iterator[Callable[[], AbstractContextManager[Any]]]:
    yield thread_helper if request.param == "thread" else process_helper


@pytest.mark.parametrize("client", list(SCENARIOS))
def test_a_synchronous_caller_produces_consumes_and_commits(helper: Callable[[], AbstractContextManager[Any]], client: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    with helper() as served:
        assert served.bootstrap.startswith("127.0.0.1:")
        assert SCENARIOS[client](served.bootstrap, f"embed-{suffix}", f"group-{suffix}") == RECORDS


def test_the_thread_helper_touches_broker_state_on_its_loop() -> None:
    with Broker.in_thread(offsets_partitions=5) as served:
        confluent_scenario(served.bootstrap, "state", "state-group")
        assert {"__consumer_offsets", "state"} <= served.run(lambda broker: set(broker.topics.topics))
        address = served.metrics_address
        assert address is not None and address.startswith("127.0.0.1:") and not address.endswith(":9644")
    assert not served._thread.is_alive()


def test_the_subprocess_helper_cleans_its_temporary_data_dir() -> None:
    with Broker.in_subprocess() as served:
        data_dir = served.data_dir
        assert served.metrics is not None and not served.metrics.endswith(":9644")
        ready = served.wait_for(lambda r: r.get("event") == "broker ready")
        assert ready["data_dir"] == data_dir
    assert not served.alive
    import os

    assert not os.path.exists(data_dir)


def test_a_failed_thread_start_raises_and_leaves_no_thread() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        helper = Broker.in_thread(port=taken.getsockname()[1])
        with pytest.raises(OSError):
            helper.start()
    assert not helper._thread.is_alive()


async def test_async_with_broker_serves_aiokafka_on_the_same_loop() -> None:
    async with Broker() as broker:
        assert await aiokafka_flow(broker.bootstrap, "same-loop", "same-loop-group") == RECORDS


async def test_embedded_brokers_never_collide_on_metrics(tmp_path: Any) -> None:
    # Two embedded brokers at once, one with a config that names no metrics port: each gets a free one.
    async with Broker() as a, Broker(Config(port=0, data_dir=str(tmp_path / "b"))) as b:
        assert a.metrics_address and b.metrics_address and a.metrics_address != b.metrics_address
        assert not a.metrics_address.endswith(":9644") and not b.metrics_address.endswith(":9644")
    async with Broker(Config(port=0, data_dir=str(tmp_path / "c"), metrics=False)) as c:
        assert c.metrics_address is None
