"""Real admin clients manage topics and read configs: confluent-kafka (librdkafka) and
kafka-python, against an in-process broker and, for restarts, a broker process."""

from __future__ import annotations

import base64
from typing import Any

import kafka.errors as kerrors
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, ConfigResource, ConfigSource, NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType

TIMEOUT = 15


def results(futures: dict[Any, Any]) -> dict[Any, Any]:
    """Every future's result, or its KafkaError."""
    out = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(TIMEOUT)
        except KafkaException as exc:
            out[key] = exc.args[0]
    return out


# -- confluent-kafka ---------------------------------------------------------------------


def test_confluent_topic_lifecycle(broker_thread: Any) -> None:
    bt = broker_thread()
    admin = AdminClient({"bootstrap.servers": bt.bootstrap})

    created = results(
        admin.create_topics(
            [
                NewTopic("orders", 3, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"}),
                NewTopic("defaults"),  # -1/-1: broker defaults
                NewTopic("replicated", 1, 3),
                NewTopic("misconfigured", 1, 1, config={"retention.ms": "soon"}),
            ]
        )
    )
    assert created["orders"] is None and created["defaults"] is None
    assert created["replicated"].code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert "only 1 broker(s) are registered" in created["replicated"].str()
    assert created["misconfigured"].code() == KafkaError.INVALID_CONFIG
    assert created["misconfigured"].str() == "Invalid value soon for configuration retention.ms: Not a number of type LONG"

    again = results(admin.create_topics([NewTopic("orders", 3, 1)]))
    assert again["orders"].code() == KafkaError.TOPIC_ALREADY_EXISTS

    md = admin.list_topics(timeout=TIMEOUT)
    assert {name: len(t.partitions) for name, t in md.topics.items() if not name.startswith("__")} == {"orders": 3, "defaults": 1}
    assert all(p.leader == 1 and p.replicas == [1] and p.isrs == [1] for p in md.topics["orders"].partitions.values())

    (description,) = results(admin.describe_topics(TopicCollection(["orders"]))).values()
    assert description.name == "orders" and len(description.partitions) == 3
    expected_id = bt.broker.topics.get("orders").topic_id
    assert str(description.topic_id) == base64.b64encode(expected_id.bytes).decode().rstrip("=")  # librdkafka's rendering

    grown = results(admin.create_partitions([NewPartitions("orders", 5), NewPartitions("defaults", 1), NewPartitions("ghost", 2)]))
    assert grown["orders"] is None
    assert grown["defaults"].code() == KafkaError.INVALID_PARTITIONS
    assert grown["ghost"].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert len(admin.list_topics("orders", timeout=TIMEOUT).topics["orders"].partitions) == 5

    deleted = results(admin.delete_topics(["orders", "ghost"]))
    assert deleted["orders"] is None
    assert deleted["ghost"].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert {n for n in admin.list_topics(timeout=TIMEOUT).topics if not n.startswith("__")} == {"defaults"}


def test_confluent_validate_only(broker_thread: Any) -> None:
    bt = broker_thread()
    admin = AdminClient({"bootstrap.servers": bt.bootstrap})
    checked = results(
        admin.create_topics(
            [NewTopic("dry", 2, 1, config={"segment.bytes": "2097152"}), NewTopic("dry-bad", 1, 1, config={"segment.bytes": "1"})],
            validate_only=True,
        )
    )
    assert checked["dry"] is None
    assert checked["dry-bad"].code() == KafkaError.INVALID_CONFIG
    assert [n for n in admin.list_topics(timeout=TIMEOUT).topics if not n.startswith("__")] == []


def test_confluent_describes_topic_and_broker_configs(broker_thread: Any) -> None:
    bt = broker_thread(log_retention_ms=86_400_000)
    admin = AdminClient({"bootstrap.servers": bt.bootstrap})
    results(admin.create_topics([NewTopic("cfg", 1, 1, config={"max.message.bytes": "65536"})]))

    topic_resource, broker_resource = ConfigResource("topic", "cfg"), ConfigResource("broker", "1")
    described = results(admin.describe_configs([topic_resource, broker_resource]))
    topic_configs, broker_configs = described[topic_resource], described[broker_resource]
    own = topic_configs["max.message.bytes"]
    assert (own.value, own.source, own.is_default, own.is_read_only) == ("65536", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False, False)
    assert [(s.name, s.value) for s in own.synonyms.values()][:1] == [("max.message.bytes", "65536")]
    retention = topic_configs["retention.ms"]
    assert (retention.value, retention.source) == ("86400000", ConfigSource.STATIC_BROKER_CONFIG.value)
    policy = topic_configs["cleanup.policy"]
    assert (policy.value, policy.source, policy.is_default) == ("delete", ConfigSource.DEFAULT_CONFIG.value, True)

    assert broker_configs["log.retention.ms"].value == "86400000"
    assert broker_configs["num.partitions"].value == "1"
    assert broker_configs["offsets.topic.num.partitions"].value == "5"
    assert broker_configs["broker.id"].value == "1"

    unknown = results(admin.describe_configs([ConfigResource("topic", "ghost")]))
    assert next(iter(unknown.values())).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_describe_cluster(broker_thread: Any) -> None:
    bt = broker_thread()
    admin = AdminClient({"bootstrap.servers": bt.bootstrap})
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert cluster.cluster_id == bt.broker.cluster_id
    assert cluster.controller.id == 1
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, "127.0.0.1", bt.broker.bound_port)]
    A = AclOperation
    assert set(cluster.authorized_operations) == {
        A.CREATE,
        A.ALTER,
        A.DESCRIBE,
        A.CLUSTER_ACTION,
        A.DESCRIBE_CONFIGS,
        A.ALTER_CONFIGS,
        A.IDEMPOTENT_WRITE,
    }


# -- kafka-python ------------------------------------------------------------------------


@pytest.fixture
def kp_admin(broker_thread: Any) -> Any:
    bt = broker_thread()
    admin = KafkaAdminClient(bootstrap_servers=bt.bootstrap, client_id="kp-admin", request_timeout_ms=TIMEOUT * 1000)
    admin.broker = bt.broker
    yield admin
    admin.close()


def test_kafka_python_topic_lifecycle(kp_admin: Any) -> None:
    admin = kp_admin
    response = admin.create_topics(
        {
            "events": {"num_partitions": 2, "replication_factor": 1, "configs": {"retention.bytes": "1048576"}},
            "plain": {"num_partitions": 1, "replication_factor": 1},
        }
    )
    assert {t["name"]: t["error_code"] for t in response["topics"]} == {"events": 0, "plain": 0}
    events = next(t for t in response["topics"] if t["name"] == "events")
    assert events["configs"]["retention.bytes"]["value"] == "1048576"

    with pytest.raises(kerrors.TopicAlreadyExistsError):
        admin.create_topics({"events": {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(kerrors.InvalidConfigurationError):
        admin.create_topics({"broken": {"num_partitions": 1, "replication_factor": 1, "configs": {"cleanup.policy": "shred"}}})

    assert sorted(n for n in admin.list_topics() if not n.startswith("__")) == ["events", "plain"]
    described = {t["name"]: t for t in admin.describe_topics(["events"])}
    assert [p["partition_index"] for p in described["events"]["partitions"]] == [0, 1]

    admin.create_partitions({"events": 4})
    assert len(admin.describe_topics(["events"])[0]["partitions"]) == 4
    with pytest.raises(kerrors.InvalidPartitionsError):
        admin.create_partitions({"events": 2})

    admin.delete_topics(["plain"])
    assert [n for n in admin.list_topics() if not n.startswith("__")] == ["events"]
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):
        admin.delete_topics(["plain"])


def test_kafka_python_validate_only(kp_admin: Any) -> None:
    response = kp_admin.create_topics({"dry": {"num_partitions": 3, "replication_factor": 1}}, validate_only=True)
    assert [(t["name"], t["error_code"], t["num_partitions"]) for t in response["topics"]] == [("dry", 0, 3)]
    assert [n for n in kp_admin.list_topics() if not n.startswith("__")] == []


def test_kafka_python_describe_configs(kp_admin: Any) -> None:
    kp_admin.create_topics({"cfg": {"num_partitions": 1, "replication_factor": 1, "configs": {"message.timestamp.type": "LogAppendTime"}}})
    modified = kp_admin.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "cfg")])
    assert {k: v["value"] for k, v in modified["topic"]["cfg"].items()} == {"message.timestamp.type": "LogAppendTime"}
    everything = kp_admin.describe_configs(
        [KpConfigResource(ConfigResourceType.TOPIC, "cfg"), KpConfigResource(ConfigResourceType.BROKER, "1")],
        include_synonyms=True,
        config_filter="all",
    )
    topic = everything["topic"]["cfg"]
    assert topic["segment.bytes"]["value"] == "1073741824"
    assert topic["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert topic["message.timestamp.type"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    broker = everything["broker"]["1"]
    assert broker["default.replication.factor"]["value"] == "1"
    assert broker["auto.create.topics.enable"]["value"] == "true"


def test_kafka_python_describe_cluster(kp_admin: Any) -> None:
    cluster = kp_admin.describe_cluster()
    assert cluster["cluster_id"] == kp_admin.broker.cluster_id
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(1, kp_admin.broker.bound_port)]


# -- persistence ---------------------------------------------------------------------------


def test_topics_and_configs_survive_a_restart(broker_proc: Any) -> None:
    bp = broker_proc()
    admin = AdminClient({"bootstrap.servers": bp.bootstrap})
    created = results(
        admin.create_topics([NewTopic("durable", 4, 1, config={"retention.ms": "123456", "cleanup.policy": "compact,delete"})])
    )
    assert created == {"durable": None}
    results(admin.create_partitions([NewPartitions("durable", 6)]))
    results(admin.create_topics([NewTopic("doomed", 1, 1)]))
    results(admin.delete_topics(["doomed"]))
    (before,) = results(admin.describe_topics(TopicCollection(["durable"]))).values()

    bp.restart()
    admin = AdminClient({"bootstrap.servers": bp.bootstrap})
    md = admin.list_topics(timeout=TIMEOUT)
    assert {name: len(t.partitions) for name, t in md.topics.items() if not name.startswith("__")} == {"durable": 6}
    (after,) = results(admin.describe_topics(TopicCollection(["durable"]))).values()
    assert str(after.topic_id) == str(before.topic_id)
    (configs,) = results(admin.describe_configs([ConfigResource("topic", "durable")])).values()
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == ("123456", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert configs["cleanup.policy"].value == "compact,delete"
