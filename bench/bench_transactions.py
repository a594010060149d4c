"""Transactions: a transactional producer's transactions/s, and read_committed against read_uncommitted."""

from __future__ import annotations

import time
from statistics import median
from typing import Any

from bench import wire
from bench.context import Context, Row, Target
from bench.procs import run_worker
from protocol.apis import ApiKey

ABOUT = (
    "confluent-kafka transactions/s (10 records of 100 B to 2 partitions plus send_offsets_to_transaction per transaction, "
    "one producer), side by side with the mock; read_committed vs read_uncommitted consume throughput on one transactional log"
)

NEEDS: dict[ApiKey, int | None] = {
    ApiKey.INIT_PRODUCER_ID: None,
    ApiKey.ADD_PARTITIONS_TO_TXN: None,
    ApiKey.ADD_OFFSETS_TO_TXN: None,
    ApiKey.END_TXN: None,
    ApiKey.TXN_OFFSET_COMMIT: None,
}
RECORDS_PER_TXN = 10
VALUE = b"x" * 100


def transactions(conn: Any, bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    """Worker: `count` transactions of 10 records over partitions 0 and 1 plus the offsets of a
    group, each committed before the next begins (the clock starts after init_transactions)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-txn-{time.time_ns()}", "linger.ms": 0})
    producer.init_transactions(30)
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-txn-group"}).consumer_group_metadata()
    started = time.perf_counter()
    cpu0 = time.process_time()
    for i in range(count):
        producer.begin_transaction()
        for j in range(RECORDS_PER_TXN):
            producer.produce(topic, VALUE, partition=j % 2)
        offsets = [TopicPartition(topic, 0, i * 5 + 5), TopicPartition(topic, 1, i * 5 + 5)]
        producer.send_offsets_to_transaction(offsets, group, 30)
        producer.commit_transaction(30)
    elapsed = time.perf_counter() - started
    return {"count": count, "seconds": elapsed, "cpu": (time.process_time() - cpu0) / elapsed}


def fill_transactional(conn: Any, bootstrap: str, topic: str, txns: int, per_txn: int) -> dict[str, Any]:
    """Worker: a log of transactions of `per_txn` records on partition 0, one in ten aborted."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-fill-{time.time_ns()}", "linger.ms": 5})
    producer.init_transactions(30)
    committed = 0
    for i in range(txns):
        producer.begin_transaction()
        for _ in range(per_txn):
            producer.produce(topic, VALUE, partition=0)
        if i % 10 == 9:
            producer.flush(30)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += per_txn
    return {"committed": committed, "total": txns * per_txn}


def consume(conn: Any, bootstrap: str, topic: str, isolation: str, expect: int) -> dict[str, Any]:
    """Worker: read partition 0 from the start to its end under `isolation`."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-txn-read",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.queue.backoff.ms": 0,
        }
    )
    # The clock runs from the assignment to the last record, the same way for both levels.
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    deadline = started + 120
    while got < expect:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{got} of {expect} records within 120 s ({isolation})")
        batch = consumer.consume(num_messages=10_000, timeout=0.1)
        got += sum(1 for m in batch if m.error() is None)
    elapsed = time.perf_counter() - started
    consumer.close()
    return {"count": got, "seconds": elapsed}


def run(ctx: Context) -> list[Row]:
    count = 20 if ctx.quick else 300
    rows: list[Row] = []
    rates: dict[str, list[float]] = {"kaflet": [], "mock": []}
    with ctx.kaflet() as k, ctx.mock() as m:
        missing = ctx.missing(k, NEEDS)
        targets = [m] if missing else [k, m]
        for t in targets:
            wire.ensure_topic(t, "bench-txn", 2)
        for _ in range(ctx.reps):
            for t in targets:
                result = run_worker(transactions, t.bootstrap, "bench-txn", count)
                rates[t.name].append(result["count"] / result["seconds"])
    kaflet_rate = median(rates["kaflet"]) if rates["kaflet"] else None
    mock_rate = median(rates["mock"]) if rates["mock"] else None
    rows.append(
        Row("transactions/s (10 records, 2 partitions, offsets)", "txn/s", kaflet_rate, mock_rate, note="not served" if missing else "")
    )
    # read_committed against read_uncommitted on the same kaflet log: the cost of honouring the
    # LSO and the aborted-transaction lists (the client drops the aborted records itself).
    txns, per_txn = (20, 100) if ctx.quick else (200, 1000)
    with ctx.kaflet() as k:
        wire.ensure_topic(k, "bench-txn-read", 1)
        filled = run_worker(fill_transactional, k.bootstrap, "bench-txn-read", txns, per_txn)
        speeds: dict[str, list[float]] = {"read_committed": [], "read_uncommitted": []}
        for _ in range(ctx.reps):
            for isolation, expect in (("read_uncommitted", filled["total"]), ("read_committed", filled["committed"])):
                result = run_worker(consume, k.bootstrap, "bench-txn-read", isolation, expect)
                speeds[isolation].append(result["count"] / result["seconds"])
    rows.append(
        Row(
            "read_committed consume (vs read_uncommitted)",
            "msg/s",
            median(speeds["read_committed"]),
            median(speeds["read_uncommitted"]),
            target=Target("ratio>=", 0.9),
            baseline_name="read_uncommitted",
        )
    )
    return rows
