"""confluent-kafka (librdkafka) against kaflet and against Kafka 4.4: the same program runs on
both at once (one thread each) and its outcomes are compared: records delivered with their
offsets, assignments once stable, committed offsets, the admin client's answers and error codes."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.differential.clients.peers import Peers


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def error_name(future: Any) -> str:
    try:
        future.result(30)
    except KafkaException as exc:
        return exc.args[0].name()  # type: ignore[no-any-return]
    return "NO_ERROR"


def produce(bootstrap: str, topic: str, partitions: int, count: int) -> list[tuple[int, int]]:
    a = admin(bootstrap)  # kept: a handle destroyed too early fails its futures
    a.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    delivered: list[tuple[int, int]] = []
    for i in range(count):
        producer.produce(
            topic, f"v{i}".encode(), key=f"k{i}".encode(), on_delivery=lambda err, msg: delivered.append((msg.partition(), msg.offset()))
        )
    assert producer.flush(30) == 0
    return sorted(delivered)


def group_run(bootstrap: str, topic: str, group: str, protocol: str, members: int, partitions: int, count: int) -> dict[str, Any]:
    """Members subscribe, read everything, commit; the stable assignment and what was read."""
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"partition.assignment.strategy": "range", "heartbeat.interval.ms": 200})
    consumers = [Consumer({**conf, "client.id": f"m{i}"}) for i in range(members)]
    for c in consumers:
        c.subscribe([topic])
    records: set[tuple[int, int, bytes, bytes]] = set()
    deadline = time.monotonic() + 60
    quiet_since = time.monotonic()
    last: list[list[int]] = []
    while True:
        for c in consumers:
            msg = c.poll(0.02)
            if msg is not None and not msg.error():
                records.add((msg.partition(), msg.offset(), msg.key(), msg.value()))
        now = sorted(sorted(tp.partition for tp in c.assignment()) for c in consumers)
        if now != last:
            last, quiet_since = now, time.monotonic()
        covered = sorted(p for share in now for p in share) == list(range(partitions))
        fair = all(partitions // members <= len(share) <= -(-partitions // members) for share in now)
        if covered and fair and len(records) == count and time.monotonic() - quiet_since > 0.5:
            break
        assert time.monotonic() < deadline, f"not stable: {now}, {len(records)} records"
    # Each member commits the end of its partitions, explicitly: librdkafka's own "commit what was
    # consumed" fails with _NO_OFFSET for a member handed nothing since it joined, which is timing.
    end: dict[int, int] = {}
    for partition, offset, _key, _value in records:
        end[partition] = max(end.get(partition, 0), offset + 1)
    for c in consumers:
        if c.assignment():
            c.commit(offsets=[TopicPartition(topic, tp.partition, end[tp.partition]) for tp in c.assignment()], asynchronous=False)
    committed = consumers[0].committed([TopicPartition(topic, p) for p in range(partitions)], 30)
    a = admin(bootstrap)
    described = a.describe_consumer_groups([group])[group].result(30)
    out = {
        "assignment": last,
        "records": sorted(records),
        "committed": [(tp.partition, tp.offset) for tp in committed],
        "described": {
            "state": described.state.name,
            "type": described.type.name,
            "assignor": described.partition_assignor,
            "simple": described.is_simple_consumer_group,
            "clients": sorted(m.client_id for m in described.members),
            "shares": sorted(sorted(tp.partition for tp in m.assignment.topic_partitions) for m in described.members),
        },
        "delete_while_active": error_name(a.delete_consumer_groups([group])[group]),
    }
    for c in consumers:
        c.close()
    return out


def test_confluent_kafka_groups_of_both_protocols(peers: Peers) -> None:
    def scenario(side: str, bootstrap: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["produced"] = produce(bootstrap, "ck-events", 4, 20)
        out["classic"] = group_run(bootstrap, "ck-events", "ck-classic", "classic", 2, 4, 20)
        out["consumer"] = group_run(bootstrap, "ck-events", "ck-848", "consumer", 2, 4, 20)
        a = admin(bootstrap)
        listed = a.list_consumer_groups().result(30)
        out["listed"] = sorted((g.group_id, g.state.name, g.type.name) for g in listed.valid if g.group_id.startswith("ck-"))
        offsets = a.list_consumer_group_offsets([_request("ck-classic")])["ck-classic"].result(30)
        out["offsets"] = sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions)
        altered = a.alter_consumer_group_offsets([_request("ck-classic", [TopicPartition("ck-events", 0, 1)])])["ck-classic"].result(30)
        out["altered"] = [(tp.partition, tp.offset, tp.error) for tp in altered.topic_partitions]
        deletes = a.delete_consumer_groups(["ck-classic", "ck-848", "ck-nobody"])
        out["deleted"] = {g: error_name(f) for g, f in deletes.items()}
        return out

    results = peers.both(scenario)
    assert results["kaflet"] == results["kafka"]
    got = results["kaflet"]
    assert got["classic"]["assignment"] == [[0, 1], [2, 3]] and got["consumer"]["assignment"] == [[0, 1], [2, 3]]
    assert got["classic"]["described"]["type"] == "CLASSIC" and got["consumer"]["described"]["type"] == "CONSUMER"
    assert got["classic"]["delete_while_active"] == got["consumer"]["delete_while_active"] == "NON_EMPTY_GROUP"
    assert got["deleted"] == {"ck-classic": "NO_ERROR", "ck-848": "NO_ERROR", "ck-nobody": "GROUP_ID_NOT_FOUND"}


def _request(group: str, partitions: list[TopicPartition] | None = None) -> Any:
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group, partitions)
