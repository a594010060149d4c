"""Real clients (confluent-kafka/librdkafka and the Java client) against `--brokers 3` as against
a Kafka cluster: replicated topics created and described, a leader that moves found without a
Metadata round trip (KIP-951), a node taken down and brought back under a producer that loses
and duplicates nothing, min.insync.replicas, and a consumer sent to the follower in its rack.
These are the behaviours librdkafka's multi-broker tests 0098, 0101, 0103, 0107 and 0111 drive
(docs/cluster.md), here in the suite."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from broker.cluster.pytest_plugin import KafletCluster
from tests.support.waiting import wait_until

RACKS = "rack-a,rack-b,rack-c"
TIMEOUT = 20


def create(bootstrap: str, *topics: NewTopic) -> dict[str, Any]:
    """Each topic's creation error (None: created)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out: dict[str, Any] = {}
    for name, future in admin.create_topics(list(topics), operation_timeout=TIMEOUT).items():
        try:
            future.result(TIMEOUT)
            out[name] = None
        except KafkaException as exc:
            out[name] = exc.args[0]
    return out


def counting(cluster: KafletCluster, api: str, delay_ms: int = 1, client_id: str | None = None) -> dict[int, int]:
    """A rule on every node that delays each `api` request (of `client_id`) by `delay_ms` and
    counts it: node -> rule id."""
    return {n: cluster.chaos.node(n).rule(api, delay_ms=delay_ms, count=None, client_id=client_id)["id"] for n in cluster.node_ids}


def hits(cluster: KafletCluster, rules: dict[int, int]) -> dict[int, int]:
    nodes = cluster.chaos.state()["nodes"]
    return {n: next(r["hits"] for r in nodes[str(n)]["rules"] if r["id"] == rule) for n, rule in rules.items()}


def leader_of(cluster: KafletCluster, topic: str, partition: int) -> int:
    return cluster.broker.run(lambda c: c.leader(topic, partition))  # type: ignore[no-any-return]


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, **extra: Any) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}", "enable.auto.commit": False, **extra})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[str] = []
    deadline = time.monotonic() + 60
    while len(values) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            values.append(msg.value().decode())
    consumer.close()
    return values


# -- topics that are replicated ----------------------------------------------------------------


@pytest.mark.kaflet(broker_rack=RACKS)
def test_confluent_admin_creates_replicated_topics_and_sees_racks(kaflet_cluster: KafletCluster) -> None:
    bootstrap = kaflet_cluster.bootstrap
    results = create(
        bootstrap,
        NewTopic("rf3", 6, 3),
        NewTopic("placed", 2, replica_assignment=[[3, 1], [1, 2]]),
        NewTopic("rf4", 1, 4),
        NewTopic("unknown-node", 1, replica_assignment=[[1, 9]]),
    )
    assert results["rf3"] is None and results["placed"] is None
    assert results["rf4"].code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert "cannot be reached because only 3 broker(s) are registered" in results["rf4"].str()
    assert results["unknown-node"].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=TIMEOUT)
    assert {b.id for b in md.brokers.values()} == {1, 2, 3}
    parts = md.topics["rf3"].partitions
    assert all(sorted(p.replicas) == [1, 2, 3] and p.isrs == p.replicas and p.leader == p.replicas[0] for p in parts.values())
    assert sorted(p.leader for p in parts.values()) == [1, 1, 2, 2, 3, 3]
    assert [md.topics["placed"].partitions[i].replicas for i in (0, 1)] == [[3, 1], [1, 2]]
    cluster = admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
    assert sorted((n.id, n.rack) for n in cluster.nodes) == [(1, "rack-a"), (2, "rack-b"), (3, "rack-c")]
    for node, rack in zip((1, 2, 3), RACKS.split(","), strict=True):
        [(_resource, future)] = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, str(node))]).items()
        assert future.result(TIMEOUT)["broker.rack"].value == rack


@pytest.mark.kaflet(broker_rack=RACKS)
def test_java_admin_sees_isr_elr_and_fenced_brokers(kaflet_cluster: KafletCluster, java_driver: Any) -> None:
    bootstrap = kaflet_cluster.bootstrap

    def admin(call: str, **args: Any) -> Any:
        answer = java_driver.call("admin", bootstrap=bootstrap, call=call, **args)
        assert answer["ok"], answer
        return answer["result"]

    assert admin("create_topic", topic="ha", partitions=1, rf=3) == {"value": "ok"}
    assert admin("create_topic", topic="manual", assignments={"0": [2, 3]}) == {"value": "ok"}
    refused = admin("create_topic", topic="too-many", partitions=1, rf=5)
    assert refused["error"]["type"] == "InvalidReplicationFactorException"
    [ha] = admin("describe_topics", topics=["ha"])["ha"]["value"]
    assert sorted(ha["replicas"]) == [1, 2, 3] and ha["isr"] == ha["replicas"] and ha["elr"] == []
    assert sorted(ha["racks"]) == ["rack-a", "rack-b", "rack-c"]
    kaflet_cluster.chaos.node(2).down()
    kaflet_cluster.chaos.node(3).down()
    [manual] = admin("describe_topics", topics=["manual"])["manual"]["value"]
    # Kafka 4.4 with ELR: no leader, an empty ISR, the last in-sync replica eligible and last known.
    assert (manual["leader"], manual["replicas"], manual["isr"], manual["elr"], manual["last_known_elr"]) == (None, [2, 3], [], [3], [3])
    [ha] = admin("describe_topics", topics=["ha"])["ha"]["value"]
    assert (ha["leader"], ha["isr"]) == (1, [1])
    described = admin("describe_cluster", include_fenced=True)
    assert described["nodes"] == [
        {"id": 1, "rack": "rack-a", "fenced": False},
        {"id": 2, "rack": "rack-b", "fenced": True},
        {"id": 3, "rack": "rack-c", "fenced": True},
    ]
    assert described["controller"] == 1
    kaflet_cluster.chaos.node(3).up()
    [manual] = admin("describe_topics", topics=["manual"])["manual"]["value"]
    assert (manual["leader"], manual["isr"], manual["elr"]) == (3, [3], [])
    kaflet_cluster.chaos.node(2).up()
    [ha] = admin("describe_topics", topics=["ha"])["ha"]["value"]
    assert sorted(ha["isr"]) == [1, 2, 3]


# -- KIP-951: a moved leader found without Metadata ----------------------------------------------


def test_librdkafka_follows_a_moved_leader_without_a_metadata_request(kaflet_cluster: KafletCluster) -> None:
    """Produce v10+ and Fetch v16+ name the new leader: librdkafka sends its retry and its next
    fetch there, and mostly asks no Metadata at all. Without the fields it asks at every move (at
    least once, to find the leader); with them a race inside librdkafka (its leader update against
    its own "leader unavailable" flag) now and then sends one, so eight moves must cost fewer than
    eight Metadata requests per client."""
    bootstrap = kaflet_cluster.bootstrap
    assert create(bootstrap, NewTopic("moving", 3, 3)) == {"moving": None}
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0, "client.id": "kip951-producer"})
    for i in range(5):
        producer.produce("moving", f"a{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "follower", "fetch.wait.max.ms": 100, "client.id": "kip951-consumer"})
    consumer.assign([TopicPartition("moving", 0, 0)])
    seen: list[str] = []
    wait_until(lambda: _poll_into(consumer, seen) and len(seen) >= 5, TIMEOUT, message="the first records")
    metadata = {who: counting(kaflet_cluster, "Metadata", client_id=f"kip951-{who}") for who in ("producer", "consumer")}
    produces = counting(kaflet_cluster, "Produce")
    leaders = []
    moves = 8
    for round_ in range(moves):
        leaders.append(kaflet_cluster.chaos.move_leader("moving", 0)["leader"])
        for i in range(5):
            producer.produce("moving", f"r{round_}-{i}".encode(), partition=0)
        assert producer.flush(TIMEOUT) == 0
        wait_until(lambda n=10 + 5 * round_: _poll_into(consumer, seen) and len(seen) >= n, TIMEOUT, message="records after a move")
    consumer.close()
    asked = {who: sum(hits(kaflet_cluster, rules).values()) for who, rules in metadata.items()}
    assert asked["producer"] < moves and asked["consumer"] < moves, asked
    produced = hits(kaflet_cluster, produces)
    assert all(produced[n] >= 1 for n in set(leaders)), produced  # every new leader got the records
    assert seen == [f"a{i}" for i in range(5)] + [f"r{r}-{i}" for r in range(moves) for i in range(5)]


def _poll_into(consumer: Consumer, into: list[str]) -> bool:
    msg = consumer.poll(0.1)
    if msg is not None and not msg.error():
        into.append(msg.value().decode())
    return True


def test_java_producer_retries_at_the_new_leader_before_metadata_answers(kaflet_cluster: KafletCluster, java_driver: Any) -> None:
    """The Java producer still asks for Metadata after NOT_LEADER_OR_FOLLOWER (Sender requests an
    update), but with KIP-951's CurrentLeader it sends the batch to the new leader at once: with
    every Metadata answer held 5 s, the record is acknowledged well before (without the fields it
    waits for that answer)."""
    bootstrap = kaflet_cluster.bootstrap
    assert create(bootstrap, NewTopic("java-moving", 1, 3)) == {"java-moving": None}

    def send(value: str) -> dict[str, Any]:
        answer = java_driver.call(
            "producer_send", name="kip951", bootstrap=bootstrap, props={}, topic="java-moving", records=[[0, None, value]]
        )
        assert answer["ok"], answer
        return answer["result"]  # type: ignore[no-any-return]

    try:
        assert send("first")["sent"] == [[0, 0]]
        held = counting(kaflet_cluster, "Metadata", delay_ms=5000)
        kaflet_cluster.chaos.move_leader("java-moving", 0)
        after = send("second")
        asked = hits(kaflet_cluster, held)
    finally:
        kaflet_cluster.chaos.clear()
        java_driver.call("producer_close", name="kip951")
    assert after["sent"] == [[0, 1]]
    assert after["ms"] < 4000, after
    assert sum(asked.values()) <= 2, asked  # it asks (Kafka's client does against Kafka too), but did not wait


# -- nodes going down under real clients -----------------------------------------------------------


@pytest.mark.kaflet(default_partitions=3)
def test_idempotent_producer_keeps_going_while_a_leader_is_taken_down(kaflet_cluster: KafletCluster) -> None:
    bootstrap = kaflet_cluster.bootstrap
    assert create(bootstrap, NewTopic("durable", 3, 3)) == {"durable": None}
    acked: list[str] = []
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2})
    victim = leader_of(kaflet_cluster, "durable", 0)
    for i in range(1500):
        producer.produce(
            "durable",
            f"r{i}".encode(),
            partition=i % 3,
            on_delivery=lambda e, m: errors.append(str(e)) if e is not None else acked.append(m.value().decode()),
        )
        producer.poll(0)
        if i == 500:
            kaflet_cluster.chaos.node(victim).down()
        if i == 1000:
            kaflet_cluster.chaos.node(victim).up()
    assert producer.flush(60) == 0
    assert errors == [] and len(acked) == 1500
    values = consume_all(bootstrap, "durable", 3, 1500)
    assert sorted(values) == sorted(acked)  # none lost, none twice


def test_acks_all_waits_out_too_few_in_sync_replicas(kaflet_cluster: KafletCluster) -> None:
    bootstrap = kaflet_cluster.bootstrap
    admin_result = create(bootstrap, NewTopic("strict", 1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"}))
    assert admin_result == {"strict": None}
    kaflet_cluster.chaos.node(2).down()
    kaflet_cluster.chaos.node(3).down()
    refused = counting(kaflet_cluster, "Produce")
    delivered: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000, "retry.backoff.ms": 50})
    producer.produce("strict", b"needs-two", partition=0, on_delivery=lambda e, m: delivered.append(e))
    wait_until(lambda: producer.poll(0.05) >= 0 and hits(kaflet_cluster, refused)[1] >= 3, TIMEOUT, message="NOT_ENOUGH_REPLICAS retried")
    assert delivered == []  # NOT_ENOUGH_REPLICAS is retriable: the producer keeps trying
    kaflet_cluster.chaos.node(3).up()
    assert producer.flush(TIMEOUT) == 0 and delivered == [None]


# -- fetching from the follower in the consumer's rack ------------------------------------------


@pytest.mark.kaflet(broker_rack=RACKS, replica_selector="rack")
def test_consumer_fetches_from_the_follower_in_its_rack(kaflet_cluster: KafletCluster) -> None:
    """librdkafka's 0101 in the suite: with Kafka's RackAwareReplicaSelector the leader sends a
    consumer whose client.rack holds a follower there, and the follower serves the records."""
    bootstrap = kaflet_cluster.bootstrap
    assert create(bootstrap, NewTopic("near", 1, replica_assignment=[[1, 2, 3]])) == {"near": None}
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(500):
        producer.produce("near", b"x" * 100 + b"%d" % i, partition=0)
    assert producer.flush(TIMEOUT) == 0
    fetches = counting(kaflet_cluster, "Fetch")
    stats: dict[str, Any] = {}
    lock = threading.Lock()

    def on_stats(text: str) -> None:
        with lock:
            stats.update(json.loads(text))

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "rack-b-reader",
            "client.rack": "rack-b",
            "auto.offset.reset": "earliest",
            "statistics.interval.ms": 200,
            "stats_cb": on_stats,
        }
    )
    consumer.assign([TopicPartition("near", 0, 0)])
    got = 0
    deadline = time.monotonic() + 60
    while got < 500 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            got += 1
    wait_until(lambda: consumer.poll(0.1) is None and bool(stats), TIMEOUT, message="statistics")
    consumer.close()
    assert got == 500
    with lock:
        rx = {b["nodeid"]: b["rxbytes"] for b in stats["brokers"].values() if b["nodeid"] > 0}
    assert rx[2] > 500 * 100 and rx[2] > rx[1] and rx[2] > rx[3], rx
    counted = hits(kaflet_cluster, fetches)
    assert counted[2] > counted[3], counted


def test_a_group_carries_on_when_its_coordinators_node_is_taken_down(kaflet_cluster: KafletCluster) -> None:
    """`__consumer_offsets` has 3 replicas: its partition's leadership, so the group's coordinator,
    moves to an in-sync replica when the node goes down, with nothing else asked of the cluster."""
    bootstrap = kaflet_cluster.bootstrap
    assert create(bootstrap, NewTopic("work", 3, 3)) == {"work": None}
    group = "survivors"
    coordinator = kaflet_cluster.broker.run(lambda c: c.coordinator_of(group)[1])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i in range(300):
        producer.produce("work", f"v{i}".encode(), partition=i % 3)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["work"])
    seen: set[str] = set()

    def consume(until: int) -> None:
        deadline = time.monotonic() + 60
        while len(seen) < until and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen.add(msg.value().decode())
                consumer.commit(message=msg, asynchronous=True)

    consume(150)
    kaflet_cluster.chaos.node(coordinator).down()
    moved_to = kaflet_cluster.broker.run(lambda c: c.coordinator_of(group)[1])
    assert moved_to not in (coordinator, -1)
    for i in range(300, 400):
        producer.produce("work", f"v{i}".encode(), partition=i % 3)
    assert producer.flush(TIMEOUT) == 0
    consume(400)
    consumer.commit(asynchronous=False)
    consumer.close()
    assert seen == {f"v{i}" for i in range(400)}
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committed = check.committed([TopicPartition("work", p) for p in range(3)], timeout=TIMEOUT)
    check.close()
    assert sum(c.offset for c in committed) == 400  # the commits reached the coordinator where the group lives now
