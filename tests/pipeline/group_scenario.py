"""A consume-transform-produce scenario for the analytics tests, driven by the test itself.

Real confluent-kafka consumers in the test's thread form a group over a 4-partition topic
while members join and leave; every commit is explicit and synchronous (auto-commit off, so the
test knows each one), and the test plays the transform: for each record it consumes it produces
an output record carrying the source headers, with deliberate duplicates written in a known
generation and one source record left without output. Every group step waits (with a deadline)
until DescribeGroups shows the group settled, and keeps that description for the comparison.

Generations: 1 = c1 alone, 2 = c1 + c2, 3 = c2 alone (c1 left), 4 = Empty (c2 left).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pipeline.analytics.audit import source_headers
from tests.support.waiting import wait_until

TP = tuple[str, int]
SOURCE = "orders"
OUTPUT = "orders-enriched"
GROUP = "enricher"
PARTITIONS = 4
FANOUT = frozenset({(SOURCE, 2, 1)})  # source records the transform writes two outputs for


@dataclass
class Commit:
    topic: str
    partition: int
    offset: int
    before_ms: int  # wall clock around the synchronous commit
    after_ms: int


@dataclass
class Generation:
    number: int
    state: str
    members: dict[str, tuple[str, set[TP]]] = field(default_factory=dict)  # member id -> (client id, assignment)
    protocol: str | None = None
    settled_ms: int = 0


@dataclass
class Scenario:
    bootstrap: str
    produced: dict[TP, list[tuple[int, int]]] = field(default_factory=dict)  # tp -> [(offset, timestamp ms)]
    commits: list[Commit] = field(default_factory=list)
    generations: list[Generation] = field(default_factory=list)
    duplicated: dict[tuple[str, int, int], int] = field(default_factory=dict)  # source record -> generation of its extra copy
    lost: set[tuple[str, int, int]] = field(default_factory=set)
    outputs: int = 0
    unattributed: int = 0

    def log_end_at(self, tp: TP, t_ms: int) -> int:
        """Records of `tp` stamped at or before `t_ms` (the lag estimate's definition of the log end then)."""
        return sum(1 for _, ts in self.produced.get(tp, []) if ts <= t_ms)

    def timestamp_of(self, tp: TP, offset: int) -> int:
        return dict(self.produced[tp])[offset]


def now_ms() -> int:
    return int(time.time() * 1000)


class Driver:
    def __init__(self, bootstrap: str) -> None:
        self.s = Scenario(bootstrap)
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
        self.consumers: dict[str, Consumer] = {}
        self.owned: dict[str, set[TP]] = {}
        self.position: dict[TP, int] = {}  # next source offset to process, per partition

    # -- topics and records ---------------------------------------------------------------

    def create_topics(self) -> None:
        futures = self.admin.create_topics([NewTopic(SOURCE, PARTITIONS, 1), NewTopic(OUTPUT, 2, 1)])
        for f in futures.values():
            f.result(30)

    def produce_source(self, per_partition: int) -> None:
        # Records must not share a millisecond with the commits around them (the lag estimate's unit of time).
        self.next_millisecond()

        def report(err: Any, msg: Any) -> None:
            assert err is None, err
            self.s.produced.setdefault((msg.topic(), msg.partition()), []).append((msg.offset(), msg.timestamp()[1]))

        for p in range(PARTITIONS):
            for i in range(per_partition):
                self.producer.produce(SOURCE, value=f"order-{p}-{i}".encode(), partition=p, on_delivery=report)
        assert self.producer.flush(30) == 0
        self.next_millisecond()

    @staticmethod
    def next_millisecond() -> None:
        mark = now_ms()
        wait_until(lambda: now_ms() > mark, timeout=1, interval=0.0005)

    def emit(self, tp: TP, offset: int) -> None:
        key = f"{tp[0]}/{tp[1]}/{offset}".encode()
        if (tp[0], tp[1], offset) in FANOUT:
            # This transform writes two outputs for that record: copies 0 and 1, not duplicates.
            for index in (0, 1):
                self.producer.produce(OUTPUT, value=b"enriched", key=key, headers=source_headers(tp[0], tp[1], offset, index))
                self.s.outputs += 1
            return
        self.producer.produce(OUTPUT, value=b"enriched", key=key, headers=source_headers(tp[0], tp[1], offset))
        self.s.outputs += 1

    def emit_unattributed(self) -> None:
        """An output with no source headers (another writer's record in the output topic)."""
        self.producer.produce(OUTPUT, value=b"stray", headers=[("trace-id", b"x")])
        self.s.outputs += 1
        self.s.unattributed += 1

    # -- the group -------------------------------------------------------------------------

    def join(self, name: str) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.s.bootstrap,
                "group.id": GROUP,
                "client.id": name,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": "range",
            }
        )
        self.owned[name] = set()

        def on_assign(consumer: Any, parts: list[TopicPartition]) -> None:
            self.owned[name] = {(tp.topic, tp.partition) for tp in parts}
            # Resume from the group's committed positions as the test tracks them.
            for tp in parts:
                tp.offset = self.position.get((tp.topic, tp.partition), 0)
            consumer.assign(parts)

        def on_revoke(consumer: Any, parts: list[TopicPartition]) -> None:
            self.owned[name] = set()

        c.subscribe([SOURCE], on_assign=on_assign, on_revoke=on_revoke)
        self.consumers[name] = c

    def leave(self, name: str) -> None:
        self.consumers.pop(name).close()
        self.owned.pop(name)

    def settle(self, number: int) -> Generation:
        """Poll every member until DescribeGroups shows them all, each with what it believes it owns."""
        last: list[Any] = [None]

        def settled() -> Generation | None:
            for c in self.consumers.values():
                msg = c.poll(0.05)
                assert msg is None or msg.error() is None, msg.error()
                if msg is not None:
                    # Positions are the test's: what a poll fetched ahead is fetched again when processed.
                    c.seek(TopicPartition(msg.topic(), msg.partition(), self.position.get((msg.topic(), msg.partition()), 0)))
            try:
                d = self.admin.describe_consumer_groups([GROUP])[GROUP].result(10)
            except KafkaException as exc:
                last[0] = exc
                return None
            last[0] = d
            want_state = ConsumerGroupState.EMPTY if not self.consumers else ConsumerGroupState.STABLE
            if d.state != want_state or len(d.members) != len(self.consumers):
                return None
            members = {m.member_id: (m.client_id, {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}) for m in d.members}
            for name, c in self.consumers.items():
                mine = members.get(c.memberid())
                if mine is None or mine[1] != self.owned[name]:
                    return None
            return Generation(number, "Empty" if not members else "Stable", members, d.partition_assignor or None, now_ms())

        gen = wait_until(settled, timeout=60, interval=0.05, message=lambda: f"generation {number} to settle: {last[0]}")
        self.s.generations.append(gen)
        return gen

    def process(self, name: str, per_partition: int, *, skip: frozenset[tuple[str, int, int]] = frozenset()) -> None:
        """`name` consumes up to `per_partition` records of each partition it owns from the group's
        position, produces their outputs (but not for `skip`), and commits each partition's new
        position (one synchronous commit per partition)."""
        c = self.consumers[name]
        targets = {tp: min(self.position.get(tp, 0) + per_partition, len(self.s.produced.get(tp, []))) for tp in self.owned[name]}
        seen: dict[TP, list[int]] = {tp: [] for tp in targets}
        for tp in targets:
            c.seek(TopicPartition(tp[0], tp[1], self.position.get(tp, 0)))

        def done() -> bool:
            for msg in c.consume(200, 0.1):
                assert msg.error() is None, msg.error()
                tp = (msg.topic(), msg.partition())
                start = self.position.get(tp, 0)
                if tp in targets and start + len(seen[tp]) == msg.offset() < targets[tp]:
                    seen[tp].append(msg.offset())
            for other in self.consumers.values():
                if other is not c:
                    other.poll(0)
            return all(self.position.get(tp, 0) + len(seen[tp]) >= end for tp, end in targets.items())

        wait_until(done, timeout=30, interval=0, message=lambda: f"{name} to consume up to {targets}: {seen}")
        for tp in sorted(targets):
            for offset in seen[tp]:
                if (tp[0], tp[1], offset) in skip:
                    self.s.lost.add((tp[0], tp[1], offset))
                else:
                    self.emit(tp, offset)
            assert self.producer.flush(30) == 0
            if seen[tp]:
                self.commit(c, tp, targets[tp])
                c.seek(TopicPartition(tp[0], tp[1], targets[tp]))

    def commit(self, c: Consumer, tp: TP, offset: int) -> None:
        before = now_ms()
        result = c.commit(offsets=[TopicPartition(tp[0], tp[1], offset)], asynchronous=False)
        after = now_ms()
        assert result[0].error is None, result[0].error
        self.position[tp] = offset
        self.s.commits.append(Commit(tp[0], tp[1], offset, before, after))

    def duplicate(self, tp: TP, offset: int, generation: int) -> None:
        """Write a second output for an already processed record, as a member re-processing after a rebalance would."""
        self.emit(tp, offset)
        assert self.producer.flush(30) == 0
        self.s.duplicated[(tp[0], tp[1], offset)] = generation

    def close(self) -> None:
        for c in self.consumers.values():
            c.close()
        self.consumers.clear()


def run_scenario(bootstrap: str, between: Any = None) -> Scenario:
    """Build the scenario; `between(scenario)` runs after generation 2's commits (e.g. a first
    `lag-history --once`, before later commits arrive)."""
    d = Driver(bootstrap)
    d.create_topics()
    d.produce_source(10)
    try:
        d.join("c1")
        d.settle(1)
        d.process("c1", 3)
        d.join("c2")
        g2 = d.settle(2)
        # A record c1 processed in generation 1 is processed again in generation 2 by whoever owns it now.
        d.duplicate((SOURCE, 1), 2, 2)
        lost = frozenset({(SOURCE, 0, 4)})
        for name in ("c1", "c2"):
            d.process(name, 3, skip=lost)
        d.emit_unattributed()
        if between is not None:
            between(d.s)
        d.produce_source(5)
        d.leave("c1")
        d.settle(3)
        # c2 now owns every partition; records c1 had processed are re-processed twice over (duplicates of generation 3).
        for tp in sorted(g2.members[next(m for m in g2.members if g2.members[m][0] == "c1")][1]):
            d.duplicate(tp, d.position[tp] - 1, 3)
        d.process("c2", 20)
        d.leave("c2")
        d.settle(4)
    finally:
        d.close()
        d.producer.flush(10)
    return d.s


# -- a KIP-848 consumer group ------------------------------------------------------------

CG_TOPIC = "clicks"
CG_GROUP = "click-readers"


def run_consumer_group_scenario(bootstrap: str) -> list[dict[str, tuple[str, set[TP]]]]:
    """Consumers with group.protocol=consumer: r1 joins, r2 joins, r1 leaves, r2 leaves. Returns
    each settled step's members as DescribeGroups shows them (member id -> client id, assignment)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(CG_TOPIC, PARTITIONS, 1)])[CG_TOPIC].result(30)
    consumers: dict[str, Consumer] = {}
    steps: list[dict[str, tuple[str, set[TP]]]] = []

    def settle() -> None:
        last: list[Any] = [None]

        def settled() -> dict[str, tuple[str, set[TP]]] | None:
            for c in consumers.values():
                c.poll(0.05)
            try:
                d = admin.describe_consumer_groups([CG_GROUP])[CG_GROUP].result(10)
            except KafkaException as exc:
                last[0] = exc
                return None
            last[0] = d
            want = ConsumerGroupState.STABLE if consumers else ConsumerGroupState.EMPTY
            if d.state != want or len(d.members) != len(consumers):
                return None
            members = {}
            for m in d.members:
                current = {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
                target = {(tp.topic, tp.partition) for tp in m.target_assignment.topic_partitions} if m.target_assignment else current
                if current != target:
                    return None
                members[m.member_id] = (m.client_id, current)
            for c in consumers.values():
                mine = members.get(c.memberid())
                if mine is None or {(tp.topic, tp.partition) for tp in c.assignment()} != mine[1]:
                    return None
            if consumers and set().union(*(parts for _, parts in members.values())) != {(CG_TOPIC, p) for p in range(PARTITIONS)}:
                return None
            return members or {"": ("", set())}

        got = wait_until(settled, timeout=60, interval=0.05, message=lambda: f"consumer group step {len(steps)} to settle: {last[0]}")
        steps.append({} if "" in got else got)

    def join(name: str) -> None:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": CG_GROUP,
                "client.id": name,
                "group.protocol": "consumer",
                "group.remote.assignor": "range",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([CG_TOPIC])
        consumers[name] = c

    try:
        join("r1")
        settle()
        join("r2")
        settle()
        consumers.pop("r1").close()
        settle()
        consumers.pop("r2").close()
        settle()
    finally:
        for c in consumers.values():
            c.close()
    return steps
