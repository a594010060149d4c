"""kaflet's pytest plugin, used the way README tells a user: each fixture in a test of its own,
with confluent-kafka, kafka-python and aiokafka; and what a failing test prints."""

from __future__ import annotations

import re
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker.cluster.pytest_plugin import KafletBroker, KafletCluster

pytest_plugins = ["pytester"]


def test_confluent_kafka_with_kaflet_broker(kaflet_broker: KafletBroker) -> None:
    producer = Producer({"bootstrap.servers": kaflet_broker.bootstrap})
    producer.produce("orders", b"one")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": kaflet_broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    try:
        msg = None
        for _ in range(100):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None and msg.value() == b"one"
    finally:
        consumer.close()


def test_error_stack_seen_by_confluent_kafka(kaflet_broker: KafletBroker) -> None:
    kaflet_broker.chaos.push_errors("Produce", ["NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_OR_FOLLOWER"])
    producer = Producer({"bootstrap.servers": kaflet_broker.bootstrap, "retry.backoff.ms": 10})
    delivered: list[object] = []
    producer.produce("retried", b"v", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(15) == 0
    assert delivered == [None]  # retried past both errors
    assert kaflet_broker.chaos.state()["injected"] == {"error_stack": 2}


@pytest.mark.kaflet(default_partitions=3)
def test_kafka_python_with_config_from_the_marker(kaflet_broker: KafletBroker) -> None:
    producer = KafkaProducer(bootstrap_servers=kaflet_broker.bootstrap)
    producer.send("three", b"x").get(timeout=10)
    assert producer.partitions_for("three") == {0, 1, 2}
    producer.close()


def test_kafka_python_with_the_session_broker(kaflet_broker_session: KafletBroker) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=kaflet_broker_session.bootstrap)
    producer.send(topic, b"hello").get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(
        topic, bootstrap_servers=kaflet_broker_session.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10000
    )
    assert next(iter(consumer)).value == b"hello"
    consumer.close()


def test_session_fixtures_clear_chaos_after_each_test(pytester: pytest.Pytester) -> None:
    """The session broker and cluster outlive a test; what it broke does not: the first test of a
    run breaks them, the second (run after it, in the same process) finds them whole."""
    pytester.makepyfile(
        """
        def test_first_breaks_them(kaflet_broker_session, kaflet_cluster_session):
            chaos = kaflet_broker_session.chaos
            chaos.latency(5)
            chaos.push_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"])
            kaflet_cluster_session.chaos.node(2).latency(7)
            state = chaos.state()
            assert state["latency_ms"] == 5 and len(state["error_stacks"]) == 1
            assert kaflet_cluster_session.chaos.node(2).state()["latency_ms"] == 7

        def test_second_finds_them_whole(kaflet_broker_session, kaflet_cluster_session):
            state = kaflet_broker_session.chaos.state()
            assert (state["latency_ms"], state["error_stacks"], state["rules"]) == (0, [], [])
            assert kaflet_cluster_session.chaos.node(2).state()["latency_ms"] == 0
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*::test_first_breaks_them PASSED*", "*::test_second_finds_them_whole PASSED*"])


async def test_aiokafka_with_kaflet_broker(kaflet_broker: KafletBroker) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=kaflet_broker.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait("events", b"async")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer("events", bootstrap_servers=kaflet_broker.bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        msg = await consumer.getone()
        assert msg.value == b"async"
    finally:
        await consumer.stop()


def test_a_failing_test_prints_the_broker_log(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_fails(kaflet_broker):
            kaflet_broker.chaos.latency(3)
            assert False, "on purpose"

        def test_passes(kaflet_broker):
            kaflet_broker.chaos.latency(4)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    assert "kaflet broker log" in text
    assert "chaos" in text and '"ms": 3' in text
    assert '"ms": 4' not in text  # only failures print it


@pytest.mark.kaflet(default_partitions=3)
def test_confluent_kafka_with_kaflet_cluster(kaflet_cluster: KafletCluster) -> None:
    assert kaflet_cluster.bootstrap.count(",") == 2 and kaflet_cluster.node_ids == [1, 2, 3]
    producer = Producer({"bootstrap.servers": kaflet_cluster.bootstrap, "enable.idempotence": True})
    producer.produce("payments", b"first", partition=0)
    assert producer.flush(15) == 0
    moved = kaflet_cluster.chaos.move_leader("payments", 0)
    producer.produce("payments", b"second", partition=0)
    assert producer.flush(15) == 0
    assert moved["leader_epoch"] == 1
    assert (
        AdminClient({"bootstrap.servers": kaflet_cluster.bootstrap})
        .list_topics("payments", timeout=10)
        .topics["payments"]
        .partitions[0]
        .leader
        == moved["leader"]
    )


@pytest.mark.parametrize("kaflet_cluster", [2], indirect=True)
def test_kaflet_cluster_of_two(kaflet_cluster: KafletCluster) -> None:
    assert kaflet_cluster.node_ids == [1, 2]
    assert sorted(AdminClient({"bootstrap.servers": kaflet_cluster.bootstrap}).list_topics(timeout=10).brokers) == [1, 2]


def test_kafka_python_with_the_session_cluster(kaflet_cluster_session: KafletCluster) -> None:
    topic = f"s-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=kaflet_cluster_session.bootstrap)
    sent = producer.send(topic, b"v", partition=0).get(timeout=10)
    producer.close()
    assert (sent.topic, sent.partition, sent.offset) == (topic, 0, 0)
    consumer = KafkaConsumer(bootstrap_servers=kaflet_cluster_session.bootstrap, consumer_timeout_ms=10000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    message = next(consumer)
    consumer.close()
    assert (message.offset, message.value) == (0, b"v")


def test_a_users_suite_sees_no_warning_that_kaflet_causes(pytester: pytest.Pytester) -> None:
    """A project of a user's, with each fixture and each client: no warning at all. pytest-asyncio
    asks every project to choose its fixtures' loop scope; docs/testing.md says so."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_user="""
        import pytest
        from aiokafka import AIOKafkaProducer
        from confluent_kafka import Producer
        from kafka import KafkaProducer

        def test_confluent_kafka(kaflet_broker):
            producer = Producer({"bootstrap.servers": kaflet_broker.bootstrap})
            producer.produce("orders", b"one")
            assert producer.flush(10) == 0

        def test_kafka_python(kaflet_broker_session):
            producer = KafkaProducer(bootstrap_servers=kaflet_broker_session.bootstrap)
            producer.send("orders", b"two").get(timeout=10)
            producer.close()

        @pytest.mark.asyncio
        async def test_aiokafka(kaflet_broker):
            producer = AIOKafkaProducer(bootstrap_servers=kaflet_broker.bootstrap)
            await producer.start()
            try:
                await producer.send_and_wait("orders", b"three")
            finally:
                await producer.stop()

        def test_cluster(kaflet_cluster):
            producer = Producer({"bootstrap.servers": kaflet_cluster.bootstrap})
            producer.produce("orders", b"four")
            assert producer.flush(10) == 0
            kaflet_cluster.chaos.move_leader("orders", 0)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    output = result.stdout.str() + result.stderr.str()
    assert not re.search(r"Warning\b|warnings summary|\d+ warnings?\b", output), output
