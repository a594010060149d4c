"""Share groups (KIP-932) on kaflet beside Apache Kafka 4.4 (tests/support/kafka_reference.py).

- records/s delivered and acknowledged: confluent-kafka ShareConsumers (implicit
  acknowledgement, each in its own process) join a share group and are all assigned, then pause;
  a producer writes N records of 100 B (16 KiB batches, the Java producer's default); the
  consumers go, and the clock runs from the first record any consumer gets to the last one, with
  1 and 4 consumers on 1 partition and on 8.
  Every record must come exactly once (the consumers count them, the group's lag ends at 0).
- redelivery after a lock timeout: a member acquires a record and holds it; another member's
  ShareFetch is parked; the time from the acquisition to that fetch's answer with the record
  (its second delivery), minus the lock duration (1 s, a group config): how late the lock runs out.
- broker memory per in-flight record: 10 share groups each acquire 10,000 records of one
  partition (batches of 100) and acknowledge every other one (so each record's state is kept on
  its own, the costly case); the broker's RSS growth over the in-flight records.

Kafka runs with kaflet's group settings (share heartbeat 250 ms, assignment interval 0), the
share bounds of the tests (1 s locks allowed) and 10,000 in-flight records allowed per group;
kaflet with the same flags.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from bench import procs
from bench.bench_kafka import KafkaTarget, ensure_topic
from bench.context import Context, Row, Target, median

ABOUT = "share groups vs Kafka 4.4: records/s with 1 and 4 ShareConsumers on 1 and 8 partitions, redelivery after a lock timeout, memory per in-flight record"

SIZE = 100
KAFLET_FLAGS = (
    "--group-share-min-record-lock-duration-ms",
    "1000",
    "--group-share-min-session-timeout-ms",
    "6000",
    "--group-share-max-partition-max-record-locks",
    "10000",
)
KAFKA_PROPS = {"group.share.max.partition.max.record.locks": "10000"}
IN_FLIGHT = 10_000
MEMORY_GROUPS = 10
LOCK_MS = 1000


# -- workers (spawned processes) -------------------------------------------------------------


def share_consume(conn: Any, bootstrap: str, group: str, topic: str) -> dict[str, Any]:
    """Worker: a ShareConsumer that joins (polling an empty topic) until told to pause, waits for
    "go" while the records are written, then counts what it gets until told to stop; then it
    commits and closes."""
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    consumer.subscribe([topic])
    got, first, last, sent_at = 0, 0.0, 0.0, 0.0
    conn.send(("polling",))
    while not conn.poll():
        consumer.poll(0.1)
    assert conn.recv() == "pause"
    conn.send(("paused",))
    assert conn.recv() == "go"
    while not conn.poll():
        for msg in consumer.poll(0.1):
            if msg.error() is None:
                got += 1
                last = time.time()
                first = first or last
        if time.monotonic() - sent_at > 0.05:
            conn.send(("count", got))
            sent_at = time.monotonic()
    consumer.commit_sync(30)
    consumer.close()
    return {"count": got, "first": first, "last": last}


def share_produce(conn: Any, bootstrap: str, topic: str, partitions: int, total: int) -> dict[str, Any]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 16384, "log_level": 3})
    value = b"x" * SIZE
    for i in range(total):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    undelivered = producer.flush(60)
    return {"undelivered": undelivered}


# -- raw share-group steps (the suite's raw client) ----------------------------------------------


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _configure(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    from tests.support import share
    from tests.support.raw_client import RawClient

    client = await RawClient.connect(bootstrap)
    try:
        await share.set_group_configs(client, group, configs)
    finally:
        await client.close()


async def _assigned(bootstrap: str, group: str) -> int:
    from tests.support import share
    from tests.support.raw_client import RawClient

    client = await RawClient.connect(bootstrap)
    try:
        (described,) = (await share.describe(client, group)).groups
        return len([m for m in described.members if m.assignment.topic_partitions]) if described.error_code == 0 else 0
    finally:
        await client.close()


async def _lag(bootstrap: str, group: str) -> int:
    from protocol.kip932 import DescribeShareGroupOffsetsRequest
    from tests.support.raw_client import RawClient

    client = await RawClient.connect(bootstrap)
    try:
        g = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)
        resp = await client.request(DescribeShareGroupOffsetsRequest(version=1, groups=[g]))
        return sum(max(p.lag, 0) for t in resp.groups[0].topics for p in t.partitions)
    finally:
        await client.close()


# -- records/s ----------------------------------------------------------------------------------


def throughput(target: Any, consumers: int, partitions: int, total: int) -> dict[str, Any]:
    topic, group = f"bench-share-{uuid.uuid4().hex[:8]}", f"bench-share-{uuid.uuid4().hex[:8]}"
    ensure_topic(target, topic, partitions)
    workers = [procs.Worker(share_consume, target.bootstrap, group, topic) for _ in range(consumers)]
    try:
        for w in workers:
            assert w.recv(60) == ("polling",)
        deadline = time.monotonic() + 60
        while _run(_assigned(target.bootstrap, group)) < consumers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{target.name}: {consumers} share consumers not assigned within 60 s")
            time.sleep(0.05)
        for w in workers:
            w.send("pause")
        for w in workers:
            assert w.recv(30) == ("paused",)
        if procs.run_worker(share_produce, target.bootstrap, topic, partitions, total, timeout=300)["undelivered"]:
            raise RuntimeError(f"{target.name}: records left undelivered by the producer")
        cpu0 = target.cpu()
        for w in workers:
            w.send("go")
        counts = [0] * consumers
        deadline = time.monotonic() + 300
        while sum(counts) < total:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{target.name}: {sum(counts)} of {total} records within 300 s")
            for i, w in enumerate(workers):
                while w.conn.poll(0.01):
                    msg = w.recv(1)
                    if msg[0] == "count":
                        counts[i] = msg[1]
        cpu = target.cpu() - cpu0
        for w in workers:
            w.send("stop")
        results = [w.result(60) for w in workers]
    finally:
        for w in workers:
            w.kill()
    count = sum(r["count"] for r in results)
    if count != total:
        raise RuntimeError(f"{target.name}: {count} deliveries of {total} records")
    first = min(r["first"] for r in results if r["first"])
    last = max(r["last"] for r in results)
    lag = _run(_lag(target.bootstrap, group))
    return {"rate": total / (last - first), "seconds": last - first, "lag_after": lag, "broker_cpu": cpu / (last - first)}


# -- redelivery after a lock timeout -------------------------------------------------------------


async def _redelivery(bootstrap: str) -> float:
    """Milliseconds from a record's acquisition to its second delivery, less the lock duration."""
    from tests.support import share
    from tests.support.raw_client import RawClient

    topic, group = f"bench-lock-{uuid.uuid4().hex[:8]}", f"bench-lock-{uuid.uuid4().hex[:8]}"
    holder_client = await RawClient.connect(bootstrap)
    waiter_client = await RawClient.connect(bootstrap)
    try:
        await share.create_topic(holder_client, topic)
        await share.set_group_configs(
            holder_client, group, {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(LOCK_MS)}
        )
        await share.produce(holder_client, topic, [b"held"])
        holder, waiter = share.ShareMember(holder_client, group), share.ShareMember(waiter_client, group)
        await holder.join([topic])
        await waiter.join([topic])
        got = await holder.fetch(max_wait_ms=5000)
        acquired_at = time.perf_counter()
        assert sum(len(r) for r in share.acquired(got).values()) == 1, got
        again = await waiter.fetch(max_wait_ms=LOCK_MS * 5)
        answered_at = time.perf_counter()
        ranges = [r for rs in share.acquired(again).values() for r in rs]
        assert ranges and ranges[0][2] == 2, again  # the same record, delivered a second time
        return (answered_at - acquired_at) * 1000 - LOCK_MS
    finally:
        await holder_client.close()
        await waiter_client.close()


# -- memory per in-flight record ----------------------------------------------------------------


async def _hold(bootstrap: str, topic: str, groups: list[str]) -> list[Any]:
    """Each group acquires IN_FLIGHT records and accepts every other one; the open clients."""
    from tests.support import share
    from tests.support.raw_client import RawClient

    clients = []
    for group in groups:
        client = await RawClient.connect(bootstrap)
        clients.append(client)
        member = share.ShareMember(client, group)
        await member.join([topic])
        held = 0
        while held < IN_FLIGHT:
            resp = await member.fetch(max_records=IN_FLIGHT, batch_size=IN_FLIGHT, max_wait_ms=1000)
            acks = {}
            for key, ranges in share.acquired(resp).items():
                held += sum(b - a + 1 for a, b, _ in ranges)
                acks[key] = [(o, o, [share.ACCEPT]) for a, b, _ in ranges for o in range(a, b + 1, 2)]
            if acks:
                await member.ack(acks)
    return clients


def memory(target: Any) -> float:
    """Broker bytes per in-flight record."""
    from tests.support import share
    from tests.support.raw_client import RawClient

    topic = f"bench-inflight-{uuid.uuid4().hex[:8]}"
    groups = [f"bench-inflight-{uuid.uuid4().hex[:6]}" for _ in range(MEMORY_GROUPS)]

    async def prepare() -> None:
        client = await RawClient.connect(target.bootstrap)
        try:
            await share.create_topic(client, topic)
            for group in groups:
                await share.set_group_configs(
                    client, group, {"share.auto.offset.reset": "earliest", "share.partition.max.record.locks": str(IN_FLIGHT)}
                )
            for _ in range(0, IN_FLIGHT, 100):
                await share.produce(client, topic, [b"x" * SIZE] * 100)
        finally:
            await client.close()

    _run(prepare())
    time.sleep(1.0)
    before = target.rss()

    async def hold_and_measure() -> int:
        clients = await _hold(target.bootstrap, topic, groups)
        await asyncio.sleep(1.0)
        after = target.rss()
        for c in clients:
            await c.close()
        return after

    after = _run(hold_and_measure())
    return (after - before) / (IN_FLIGHT * MEMORY_GROUPS)


# -- the benchmark -------------------------------------------------------------------------------


class KafkaShareTarget(KafkaTarget):
    """Kafka 4.4 with kaflet's group settings and the share properties given."""

    def __init__(self, reference: Any, properties: dict[str, str]) -> None:
        self.ref = reference(properties=properties, offsets_partitions=50, transaction_state_partitions=50)


def run(ctx: Context) -> list[Row]:
    from tests.support.jvm import JvmUnavailable, classpath
    from tests.support.kafka_reference import SHARE_TEST_BOUNDS, KafkaReference

    try:
        classpath("kafka-broker")
    except JvmUnavailable as exc:
        ctx.note(f"share: Kafka 4.4 is not built (make jvm): {exc}")
        return []
    total = ctx.size(200_000, 20_000)
    shapes = [(1, 1), (4, 1), (1, 8), (4, 8)]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {f"{c}x{p}": {"kaflet": [], "kafka": []} for c, p in shapes}
    redelivery: dict[str, list[float]] = {"kaflet": [], "kafka": []}
    per_record: dict[str, list[float]] = {"kaflet": [], "kafka": []}
    with ctx.kaflet(*KAFLET_FLAGS) as k, KafkaShareTarget(KafkaReference, {**SHARE_TEST_BOUNDS, **KAFKA_PROPS}) as kafka:
        sides = {"kaflet": k, "kafka": kafka}
        for _ in range(ctx.reps):
            for consumers, partitions in shapes:
                for name, t in sides.items():
                    runs[f"{consumers}x{partitions}"][name].append(throughput(t, consumers, partitions, total))
            for name, t in sides.items():
                redelivery[name].append(_run(_redelivery(t.bootstrap)))
        for name, t in sides.items():
            per_record[name].append(memory(t))
    ctx.raw.update(runs=runs, redelivery_ms=redelivery, bytes_per_in_flight_record=per_record, records=total, size=SIZE)
    ctx.note("baseline: Apache Kafka 4.4 with kaflet's group settings; both brokers allow 1 s locks and 10,000 in-flight records per group")
    rows = []
    for consumers, partitions in shapes:
        r = runs[f"{consumers}x{partitions}"]
        target_ = Target("ratio>=", 0.5) if consumers == 4 else None
        label = f"{consumers} consumer{'s' if consumers > 1 else ''}, {partitions} partition{'s' if partitions > 1 else ''}"
        rows.append(
            Row(
                f"records/s delivered+acked, {label}",
                "rec/s",
                median([x["rate"] for x in r["kaflet"]]),
                median([x["rate"] for x in r["kafka"]]),
                True,
                target_,
                "kafka",
            )
        )
        rows.append(
            Row(
                f"  broker CPU, {label}",
                "cores",
                median([x["broker_cpu"] for x in r["kaflet"]]),
                median([x["broker_cpu"] for x in r["kafka"]]),
                baseline_name="kafka",
                compare=False,
            )
        )
    rows.append(
        Row(
            "redelivery after the lock, beyond 1 s",
            "ms",
            median(redelivery["kaflet"]),
            median(redelivery["kafka"]),
            False,
            Target("<=", 100),
            "kafka",
        )
    )
    rows.append(
        Row(
            "broker memory per in-flight record",
            "B",
            median(per_record["kaflet"]),
            median(per_record["kafka"]),
            False,
            Target("<=", 2048),
            "kafka",
        )
    )
    return rows
