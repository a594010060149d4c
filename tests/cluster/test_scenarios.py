"""Real clients against a cluster that breaks on purpose (issue 15's scenarios), through the
pytest plugin's fixtures as a user would write them."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker.cluster.pytest_plugin import KafletBroker, KafletCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


def group_view(handle: KafletBroker, group: str) -> tuple[str, int, int] | None:
    """(state, generation, members) of a classic group on whichever coordinator serves it now."""

    def look(server: Any) -> tuple[str, int, int] | None:
        coordinator = server.state.coordinator if hasattr(server, "nodes") else server.coordinator
        shard = coordinator.shards[coordinator.partition_for(group)]
        g = shard.groups.get(group)
        return None if g is None else (g.state.value, g.generation_id, len(g.members))

    return handle.broker.run(look)


def consumer_group_view(handle: KafletBroker, group: str) -> tuple[str, int, int] | None:
    """(state, group epoch, members) of a KIP-848 consumer group on its current coordinator."""

    def look(server: Any) -> tuple[str, int, int] | None:
        coordinator = server.state.coordinator if hasattr(server, "nodes") else server.coordinator
        shard = coordinator.shards[coordinator.partition_for(group)]
        g = shard.consumer_groups.get(group)
        return None if g is None else (str(g.state), g.group_epoch, len(g.members))

    return handle.broker.run(look)


def stable_with(handle: KafletBroker, group: str, members: int) -> bool:
    view = group_view(handle, group)
    return view is not None and view[0] == "Stable" and view[2] == members


class Member(threading.Thread):
    """A confluent-kafka group member consuming until stopped; commits what it consumed."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, seen: dict[str, int], lock: threading.Lock, **extra: Any) -> None:
        super().__init__(daemon=True)
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
            **extra,
        }
        if config.get("group.protocol") != "consumer":  # KIP-848 members take these from the broker
            config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic])
        self.seen, self.lock = seen, lock
        self.stopping = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stopping.is_set():
            msg = self.consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                self.errors.append(str(msg.error()))
                continue
            with self.lock:
                value = msg.value().decode()
                self.seen[value] = self.seen.get(value, 0) + 1
            try:  # synchronous: librdkafka carries it over to a coordinator that moved
                self.consumer.commit(message=msg, asynchronous=False)
            except Exception as exc:  # refused for good (e.g. a rebalance): the next one covers it
                self.errors.append(str(exc))
        try:  # what the last asynchronous commits (refused while a coordinator moved) did not cover
            self.consumer.commit(asynchronous=False)
        except Exception as exc:  # nothing consumed: nothing to commit
            self.errors.append(str(exc))
        self.consumer.close()


def produce(bootstrap: str, topic: str, values: list[str], **extra: Any) -> list[str]:
    """Produce and wait; returns the values acknowledged."""
    acked: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **extra})
    for v in values:
        producer.produce(topic, v.encode(), on_delivery=lambda err, msg: acked.append(msg.value().decode()) if err is None else None)
        producer.poll(0)
    assert producer.flush(30) == 0
    return acked


@pytest.mark.kaflet(default_partitions=6)
def test_group_carries_on_while_its_coordinator_moves_twice(kaflet_cluster: KafletCluster) -> None:
    bootstrap, group, topic = kaflet_cluster.bootstrap, "movers", "orders"
    first = [f"a{i}" for i in range(300)]
    assert len(produce(bootstrap, topic, first)) == 300
    seen: dict[str, int] = {}
    lock = threading.Lock()
    members = [Member(bootstrap, group, topic, f"m{i}", seen, lock) for i in range(3)]
    for m in members:
        m.start()
    try:
        wait_until(lambda: stable_with(kaflet_cluster, group, 3), 30, message="3 members stable")
        coordinators = []
        for round_ in range(2):
            moved = kaflet_cluster.chaos.move_coordinator(group=group)
            coordinators.append(moved["leader"])
            more = [f"b{round_}-{i}" for i in range(100)]
            assert len(produce(bootstrap, topic, more)) == 100
            wait_until(lambda: stable_with(kaflet_cluster, group, 3), 30, message="group stable again")
        assert coordinators[0] != coordinators[1]
        expected = set(first) | {f"b{r}-{i}" for r in range(2) for i in range(100)}
        wait_until(lambda: expected <= set(seen), 60, message=lambda: f"{len(expected - set(seen))} records not consumed")
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(30)
    # Committed offsets survived both moves: a new member of the group starts at the end.
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    committed = check.committed([TopicPartition(topic, p) for p in range(6)], timeout=20)
    ends = [check.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(6)]
    check.close()
    # (an empty partition has nothing to commit)
    assert [c.offset if end else 0 for c, end in zip(committed, ends, strict=True)] == ends, [m.errors[-5:] for m in members]


@pytest.mark.kaflet(default_partitions=4)
def test_kip848_group_carries_on_while_its_coordinator_moves(kaflet_cluster: KafletCluster) -> None:
    bootstrap, group, topic = kaflet_cluster.bootstrap, "movers-848", "events"
    assert len(produce(bootstrap, topic, [f"a{i}" for i in range(100)])) == 100
    seen: dict[str, int] = {}
    lock = threading.Lock()
    members = [Member(bootstrap, group, topic, f"n{i}", seen, lock, **{"group.protocol": "consumer"}) for i in range(2)]
    for m in members:
        m.start()
    try:
        wait_until(lambda: (v := consumer_group_view(kaflet_cluster, group)) is not None and v[2] == 2, 30, message="2 members")
        for round_ in range(2):
            old = kaflet_cluster.chaos.move_coordinator(group=group)["old_leader"]
            assert old != kaflet_cluster.broker.run(lambda c: c.coordinator_of(group)[1])
            more = [f"b{round_}-{i}" for i in range(50)]
            assert len(produce(bootstrap, topic, more)) == 50
        expected = {f"a{i}" for i in range(100)} | {f"b{r}-{i}" for r in range(2) for i in range(50)}
        wait_until(lambda: expected <= set(seen), 60, message=lambda: f"{len(expected - set(seen))} records not consumed")
        view = consumer_group_view(kaflet_cluster, group)
        assert view is not None and view[2] == 2  # both members still in the group, on the new coordinator
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(30)
    # Their commits reached the coordinator where the group lives now.
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    committed = check.committed([TopicPartition(topic, p) for p in range(4)], timeout=20)
    ends = [check.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(4)]
    check.close()
    assert [c.offset if end else 0 for c, end in zip(committed, ends, strict=True)] == ends


@pytest.mark.kaflet(default_partitions=3)
def test_idempotent_producer_loses_and_duplicates_nothing_while_leaders_move(kaflet_cluster: KafletCluster) -> None:
    bootstrap, topic = kaflet_cluster.bootstrap, "ledger"
    acked: list[str] = []
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2})

    def delivered(err: Any, msg: Any) -> None:
        (errors.append(str(err)) if err is not None else acked.append(msg.value().decode()))

    produce(bootstrap, topic, ["warm-up"])
    moves = 0
    for i in range(3000):
        producer.produce(topic, f"r{i}".encode(), key=str(i % 30).encode(), on_delivery=delivered)
        producer.poll(0)
        if i % 600 == 300:
            for p in range(3):
                kaflet_cluster.chaos.move_leader(topic, p)
                moves += 1
            time.sleep(0.01)  # let records be in flight when the next ones move
    assert producer.flush(60) == 0
    assert errors == [] and len(acked) == 3000
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    values: list[str] = []
    deadline = time.monotonic() + 60
    while len(values) < 3001 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            values.append(msg.value().decode())
    consumer.close()
    assert sorted(v for v in values if v != "warm-up") == sorted(acked)  # none lost, none twice
    assert moves == 15


def test_black_holed_consumer_is_evicted_and_rejoins(kaflet_broker: KafletBroker) -> None:
    bootstrap, group, topic = kaflet_broker.bootstrap, "holes", "work"
    produce(bootstrap, topic, ["x"])
    seen: dict[str, int] = {}
    lock = threading.Lock()
    members = [Member(bootstrap, group, topic, f"c{i}", seen, lock) for i in range(3)]
    for m in members:
        m.start()
    try:
        wait_until(lambda: stable_with(kaflet_broker, group, 3), 30, message="3 members")
        generation = group_view(kaflet_broker, group)[1]  # type: ignore[index]
        kaflet_broker.chaos.hole(client_id="c2", duration_ms=9000)  # longer than session.timeout.ms (6 s)
        wait_until(lambda: stable_with(kaflet_broker, group, 2), 30, message="evicted")
        assert kaflet_broker.chaos.state()["holes"], "the hole closed before the eviction was seen"
        wait_until(lambda: stable_with(kaflet_broker, group, 3), 40, message="rejoined")
        assert group_view(kaflet_broker, group)[1] >= generation + 2  # type: ignore[index]
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(30)


@pytest.mark.kaflet(default_partitions=3)
def test_broker_down_and_back(kaflet_cluster: KafletCluster) -> None:
    bootstrap, topic = kaflet_cluster.bootstrap, "survive"
    produce(bootstrap, topic, ["first"])
    down_node = kaflet_cluster.broker.run(lambda c: c.leader(topic, 0))
    acked: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "message.timeout.ms": 60000})
    kaflet_cluster.chaos.node(down_node).down()
    for i in range(60):
        producer.produce(
            topic,
            f"d{i}".encode(),
            partition=i % 3,
            on_delivery=lambda err, msg: acked.append(msg.value().decode()) if err is None else None,
        )
    producer.poll(0)
    # The partitions the other brokers lead keep being served meanwhile.
    wait_until(lambda: producer.poll(0.1) >= 0 and len(acked) >= 40, 30, message="the other brokers' partitions acknowledged")
    assert not any(int(v[1:]) % 3 == 0 for v in acked)
    kaflet_cluster.chaos.node(down_node).up()
    assert producer.flush(60) == 0
    assert sorted(acked) == sorted(f"d{i}" for i in range(60))


@pytest.mark.kaflet(default_partitions=3)
def test_broker_down_with_failover_moves_its_partitions_and_groups(kaflet_cluster: KafletCluster) -> None:
    bootstrap, topic, group = kaflet_cluster.bootstrap, "failover", "fo"
    produce(bootstrap, topic, ["first"])
    coordinator = kaflet_cluster.broker.run(lambda c: c.coordinator_of(group)[1])
    led = kaflet_cluster.broker.run(lambda c: [p for p in range(3) if c.leader(topic, p) == coordinator])
    result = kaflet_cluster.chaos.node(coordinator).down(failover=True)
    assert result["down"] == "refuse" and result["moved"] >= len(led) + 1
    assert kaflet_cluster.broker.run(lambda c: c.coordinator_of(group)[1]) != coordinator
    # Every partition, those the dead broker led included, is served by the others.
    acked = produce(bootstrap, topic, [f"x{i}" for i in range(30)])
    assert len(acked) == 30
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: set[str] = set()
    deadline = time.monotonic() + 30
    while len(got) < 31 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            got.add(msg.value().decode())
    consumer.close()
    assert got == {"first", *acked}
    kaflet_cluster.chaos.node(coordinator).up()


@pytest.mark.kaflet(default_partitions=3)
def test_transactions_on_a_cluster(kaflet_cluster: KafletCluster) -> None:
    bootstrap = kaflet_cluster.bootstrap
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-cluster"})
    producer.init_transactions(30)
    for committed in (True, False, True):
        producer.begin_transaction()
        for i in range(9):
            producer.produce("tx-topic", f"{committed}-{i}".encode(), partition=i % 3)
        (producer.commit_transaction if committed else producer.abort_transaction)(30)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "txr", "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
    )
    consumer.assign([TopicPartition("tx-topic", p, 0) for p in range(3)])
    got: list[str] = []
    deadline = time.monotonic() + 30
    while len(got) < 18 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            got.append(msg.value().decode())
    consumer.close()
    assert sorted(got) == sorted(f"True-{i}" for i in range(9) for _ in range(2))
