"""A cluster in one process (issue 15): start-up of 3 brokers against 1, a coordinator move until a
10-member librdkafka group is back at work, a leadership move until the producer's next ack.

Baselines: the 1-broker kaflet for start-up; the librdkafka mock cluster with 3 brokers for the
moves (`rd_kafka_mock_coordinator_set`, `rd_kafka_mock_partition_set_leader`; a broker more per
coordinator move beyond two, see run()). After a coordinator move the mock's old coordinator is made
to answer OffsetCommit with NOT_COORDINATOR, as Kafka's and kaflet's do: the mock by itself accepts
a commit on any broker, so its members never had to find the new coordinator to commit.

"Back at work" after a coordinator move: every member has had an OffsetCommit, sent after the move
was made, accepted by the new coordinator (each member commits every 100 ms). kaflet's group stays
Stable through a move (the new coordinator loads it from the log, as Kafka's does), so this is the
time the members take to find the new coordinator and be served by it, Kafka's recovery path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from bench.context import Context, Row, Target, median
from bench.procs import Kaflet, Mock

ABOUT = "3-broker start vs 1; coordinator move -> 10-member group served again; leader move -> next acknowledged record"

HEARTBEAT_MS = 1000
COMMIT_EVERY = 0.1  # seconds between one member's synchronous commits
# librdkafka (2.x; its open issue #3645) can lose the group after a coordinator move, against kaflet
# and against the mock made to answer as Kafka does alike: the commit that got NOT_COORDINATOR is
# retried (retry.backoff.ms, 100 ms) on the coordinator's logical broker while FindCoordinator is
# still out. librdkafka sends FindCoordinator to its least idle connection, the one its Fetch long
# polls go to, and a broker answers a connection's requests in order (Kafka mutes the connection
# until the Fetch is answered, up to fetch.wait.max.ms, 500 ms). Setting the new coordinator's
# address then closes that broker with the retry queued on it; the retry fails with a transport
# error, which marks the coordinator dead and clears the address again, and so on: no Heartbeat
# goes out until the session expires (seen with commits every 100 ms and, under load, every 1 s).
# A long poll shorter than the retry backoff answers FindCoordinator before the retry is queued.
FETCH_WAIT_MAX_MS = 50


class _Member(threading.Thread):
    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        from confluent_kafka import Consumer

        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": name,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "enable.auto.commit": False,
                "fetch.wait.max.ms": FETCH_WAIT_MAX_MS,
            }
        )
        self.consumer.subscribe([topic])
        self.stopping = threading.Event()
        self.last_ok = 0.0  # perf_counter() of the last commit accepted
        self.last_ok_sent = 0.0  # perf_counter() when that commit was sent

    def run(self) -> None:
        from confluent_kafka import TopicPartition

        last_try = 0.0
        while not self.stopping.is_set():
            self.consumer.poll(0.02)
            now = time.perf_counter()
            assignment = self.consumer.assignment()
            if assignment and now - last_try >= COMMIT_EVERY:
                last_try = now
                try:
                    self.consumer.commit(offsets=[TopicPartition(tp.topic, tp.partition, 0) for tp in assignment], asynchronous=False)
                    self.last_ok, self.last_ok_sent = time.perf_counter(), now
                except Exception:
                    pass
        self.consumer.close()


def _coordinator_moves(bootstrap: str, move: Callable[[str, int], None], rounds: int, group: str | None = None) -> list[float]:
    """Seconds from each move until every member of a 10-member group had a commit, sent after the
    move was made, accepted."""
    group, topic = group or f"bench-{time.time_ns()}", "moves"
    members = [_Member(bootstrap, group, topic, f"m{i}") for i in range(10)]
    for m in members:
        m.start()
    times: list[float] = []
    try:
        deadline = time.monotonic() + 60
        while not all(m.last_ok for m in members):
            if time.monotonic() > deadline:
                raise TimeoutError("the group never formed")
            time.sleep(0.05)
        for r in range(rounds):
            t0 = time.perf_counter()
            move(group, r)
            # A commit sent before the move was applied proves nothing (the mock applies it on its own
            # thread, after a commit already on the wire may have been answered by the old coordinator).
            moved = time.perf_counter()
            deadline = time.monotonic() + 60
            while not all(m.last_ok_sent > moved for m in members):
                if time.monotonic() > deadline:
                    raise TimeoutError("the group never came back")
                time.sleep(0.005)
            times.append(max(m.last_ok for m in members) - t0)
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(30)
    return times


def _leader_moves(bootstrap: str, topic: str, move: Callable[[int], None], rounds: int) -> list[float]:
    """Seconds from each leadership move of partition 0 until an ack of a record produced after it."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    acks: list[tuple[float, float]] = []  # (sent, acknowledged)

    def delivered(err: Any, msg: Any, sent: float) -> None:
        if err is None:
            acks.append((sent, time.perf_counter()))

    stop = threading.Event()

    def pump() -> None:
        while not stop.is_set():
            sent = time.perf_counter()
            producer.produce(topic, b"x", partition=0, on_delivery=lambda err, msg, s=sent: delivered(err, msg, s))
            producer.poll(0.002)
        producer.flush(30)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    times: list[float] = []
    try:
        deadline = time.monotonic() + 30
        while not acks and time.monotonic() < deadline:
            time.sleep(0.01)
        for r in range(rounds):
            time.sleep(0.2)
            t0 = time.perf_counter()
            move(r)
            deadline = time.monotonic() + 30
            while not any(sent > t0 for sent, _ in list(acks)) and time.monotonic() < deadline:
                time.sleep(0.002)
            after = [ack for sent, ack in list(acks) if sent > t0]
            if after:
                times.append(min(after) - t0)
    finally:
        stop.set()
        thread.join(30)
    return times


def _create_topics(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for topic in topics:
        producer.produce(topic, b"create")  # auto-created (10 partitions: --default-partitions)
    producer.flush(30)


def run(ctx: Context) -> list[Row]:
    from broker.cluster.control import ControlClient

    rows: list[Row] = []
    three: list[float] = []
    one: list[float] = []
    for _ in range(ctx.size(6, 2)):  # alternate, so background noise hits both alike
        with Kaflet("--brokers", "3").start() as k:
            three.append(k.start_seconds * 1000)
        with Kaflet().start() as k:
            one.append(k.start_seconds * 1000)
    ctx.raw.update(startup_3_ms=three, startup_1_ms=one)
    rows.append(
        Row(
            "3-broker cluster start -> ready (median)",
            "ms",
            median(three),
            median(one),
            higher_is_better=False,
            baseline_name="1 broker",
            target=Target("ratio>=", 1 / 1.5),
        )
    )

    rounds = ctx.size(4, 2)
    with Kaflet("--brokers", "3", "--control", "--default-partitions", "10").start() as k:
        control = ControlClient(f"127.0.0.1:{k.metrics_port}")
        _create_topics(k.bootstrap, ["moves", "lead"])
        kaflet_coord = _coordinator_moves(k.bootstrap, lambda group, _r: control.apply("move_coordinator", {"group": group}), rounds)
        kaflet_leader = _leader_moves(
            k.bootstrap, "lead", lambda r: control.apply("move_leader", {"topic": "lead", "partition": 0}), rounds
        )
    mock_coord: list[float] = []
    mock_leader: list[float] = []
    # The mock's old coordinator answers OffsetCommit NOT_COORDINATOR through its error stack, which
    # cannot be cleared (bench/procs.py): the coordinator walks brokers 1, 2, 3, ... and never comes
    # back to one, so the mock has rounds + 1 brokers (3 at least; any two take part in a move).
    with Mock(brokers=max(3, rounds + 1)).start() as m:
        if m.controllable:
            m.create_topic("moves", 10)
            m.create_topic("lead", 1)
            group = f"bench-{time.time_ns()}"
            m.command("coordinator_set", key=group, broker=1)
            mock_coord = _coordinator_moves(
                m.bootstrap, lambda group, r: m.command("coordinator_set", key=group, broker=r + 2, old_broker=r + 1), rounds, group
            )
            mock_leader = _leader_moves(
                m.bootstrap, "lead", lambda r: m.command("partition_set_leader", topic="lead", partition=0, broker=(r % 2) + 2), rounds
            )
        else:
            ctx.note("mock C API unavailable: no mock baseline for the moves")
    ctx.raw.update(
        kaflet_coordinator_s=kaflet_coord, mock_coordinator_s=mock_coord, kaflet_leader_s=kaflet_leader, mock_leader_s=mock_leader
    )
    rows.append(
        Row(
            "coordinator move -> 10-member group served (median)",
            "ms",
            median(kaflet_coord) * 1000 if kaflet_coord else None,
            median(mock_coord) * 1000 if mock_coord else None,
            higher_is_better=False,
            target=Target("<=", HEARTBEAT_MS + 1000),
        )
    )
    rows.append(
        Row(
            "leader move -> next acknowledged record (median)",
            "ms",
            median(kaflet_leader) * 1000 if kaflet_leader else None,
            median(mock_leader) * 1000 if mock_leader else None,
            higher_is_better=False,
        )
    )
    return rows
