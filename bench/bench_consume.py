"""Group-less consume throughput: a confluent-kafka consumer in assign mode reading filled partitions."""

from __future__ import annotations

import time
from typing import Any

from bench import wire
from bench.bench_produce import produce, throughput_rows
from bench.context import Context, Row, Target
from bench.procs import run_worker
from protocol.apis import ApiKey

ABOUT = "confluent-kafka consume throughput, assign mode (no group), 100 B and 1 KiB records over 8 partitions"

NEEDS: dict[ApiKey, int | None] = {ApiKey.PRODUCE: None, ApiKey.FETCH: None, ApiKey.LIST_OFFSETS: None}  # librdkafka negotiates versions
PARTITIONS = 8
# The mock keeps at most 5 MiB per partition (older batches are dropped), so each partition
# gets 3.5 MiB of values; the consumer reads them repeatedly (fresh assign from the beginning).
PER_PARTITION_BYTES = 3_670_016
SIZES = (100, 1024)


def consume(conn: Any, bootstrap: str, topic: str, partitions: int, per_pass: int, seconds: float) -> dict[str, Any]:
    """Worker: read all `per_pass` records from the beginning, again and again for `seconds`.

    confluent-kafka insists on a group.id, but an assigned (not subscribed) consumer without
    commits never joins the group: no group request is needed from the broker.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-assign-only", "enable.auto.commit": False})
    assignment = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
    count, errors, passes = 0, [], 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    deadline = t0 + seconds
    while passes == 0 or time.perf_counter() < deadline:
        consumer.assign(assignment)
        got = 0
        pass_deadline = time.perf_counter() + 60
        while got < per_pass:
            if time.perf_counter() > pass_deadline:
                raise RuntimeError(f"pass {passes}: {got} of {per_pass} records within 60 s")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                if msg.error():
                    errors.append(str(msg.error()))
                else:
                    got += 1
        count += got
        passes += 1
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    consumer.close()
    return {"count": count, "seconds": elapsed, "cpu": cpu / elapsed, "passes": passes, "errors": errors[:5], "failed": len(errors)}


def fill(target: Any, topic: str, size: int) -> int:
    """Put PER_PARTITION_BYTES of `size`-byte records in each partition; the total record count."""
    per_pass = PER_PARTITION_BYTES // size * PARTITIONS
    wire.ensure_topic(target, topic, PARTITIONS)
    result = run_worker(produce, target.bootstrap, topic, size, per_pass, 0.0, PARTITIONS)
    if result["failed"] or result["undelivered"]:
        raise RuntimeError(f"{target.name}: filling {topic} failed: {result['errors']}")
    return per_pass


def run(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    seconds = 0.3 if ctx.quick else ctx.duration
    with ctx.kaflet("--default-partitions", str(PARTITIONS)) as k, ctx.mock() as m:
        missing = ctx.missing(k, NEEDS)
        targets = [m] if missing else [k, m]
        for size in SIZES:
            topic = f"bench-consume-{size}"
            per_pass = {t.name: fill(t, topic, size) for t in targets}
            runs: dict[str, list[dict[str, Any]]] = {"kaflet": [], "mock": []}
            for _ in range(ctx.reps):
                for t in targets:
                    result = run_worker(consume, t.bootstrap, topic, PARTITIONS, per_pass[t.name], seconds)
                    if result["failed"]:
                        raise RuntimeError(f"{t.name}: consume errors: {result['errors']}")
                    runs[t.name].append(result)
            rows += throughput_rows(f"consume {size} B", runs, size, Target("ratio>=", 1.0), "not served yet" if missing else "")
    return rows
