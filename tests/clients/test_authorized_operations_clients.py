"""Authorized operations as real admin clients read them: with no authorizer, Kafka reports every
operation the resource type supports (AclEntry.supportedOperations), and so does kaflet
(broker/security/authorized_ops.py): confluent-kafka's describe_cluster, describe_topics and
describe_consumer_groups (DescribeGroups for a classic group, ConsumerGroupDescribe for a
consumer-protocol one), and kafka-python's describe_groups (DescribeGroups v5)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, TopicCollection, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic
from kafka import KafkaAdminClient

from tests.support.waiting import wait_until

TIMEOUT = 15
A = AclOperation
CLUSTER = {A.CREATE, A.ALTER, A.DESCRIBE, A.CLUSTER_ACTION, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS, A.IDEMPOTENT_WRITE}
TOPIC = {A.READ, A.WRITE, A.CREATE, A.DESCRIBE, A.DELETE, A.ALTER, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS}
GROUP = {A.READ, A.DESCRIBE, A.DELETE, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS}


def _setup(bootstrap: str) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("ops", 1, 1)])["ops"].result(TIMEOUT)
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ops-classic", "enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition("ops", 0, 1)], asynchronous=False)
    committer.close()
    return admin


def test_confluent_kafka_reads_every_supported_operation(broker_thread: Any) -> None:
    bt = broker_thread()
    admin = _setup(bt.bootstrap)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert set(cluster.authorized_operations) == CLUSTER
    [topic] = admin.describe_topics(TopicCollection(["ops"]), include_authorized_operations=True).values()
    assert set(topic.result(TIMEOUT).authorized_operations) == TOPIC
    [classic] = admin.describe_consumer_groups(["ops-classic"], include_authorized_operations=True).values()
    assert set(classic.result(TIMEOUT).authorized_operations) == GROUP
    modern = Consumer({"bootstrap.servers": bt.bootstrap, "group.id": "ops-consumer", "group.protocol": "consumer"})
    try:
        modern.subscribe(["ops"])
        wait_until(lambda: modern.poll(0.2) is None and bool(modern.assignment()), timeout=30, message="consumer-protocol assignment")
        [described] = admin.describe_consumer_groups(["ops-consumer"], include_authorized_operations=True).values()
        group = described.result(TIMEOUT)
        assert group.type.name == "CONSUMER"  # answered by ConsumerGroupDescribe
        assert set(group.authorized_operations) == GROUP
    finally:
        modern.close()


def test_kafka_python_reads_every_group_operation(broker_thread: Any) -> None:
    bt = broker_thread()
    _setup(bt.bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=bt.bootstrap, client_id="ops-test")
    try:
        described = admin.describe_groups(["ops-classic"])
    finally:
        admin.close()
    assert described["ops-classic"]["error"] is None
    assert set(described["ops-classic"]["authorized_operations"]) == {op.name for op in GROUP}
