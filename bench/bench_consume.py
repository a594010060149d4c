"""Group-less consume throughput: a confluent-kafka consumer in assign mode reading filled partitions."""

from __future__ import annotations

import resource
import time
from typing import Any

from bench import wire
from bench.bench_produce import produce, throughput_rows
from bench.context import Context, Row, Target
from bench.procs import run_worker
from protocol.apis import ApiKey

ABOUT = "confluent-kafka consume throughput, assign mode (no group), 100 B records over 16 partitions, 1 KiB over 64"

NEEDS: dict[ApiKey, int | None] = {ApiKey.PRODUCE: None, ApiKey.FETCH: None, ApiKey.LIST_OFFSETS: None}  # librdkafka negotiates versions
# The mock keeps at most 5 MiB per partition (it drops older batches), so the data is spread
# over partitions of 3.5 MiB of values each, enough of them for a read of a few seconds.
PER_PARTITION_BYTES = 3_670_016
SIZES = {100: 16, 1024: 64}  # record size: partitions


def consume(conn: Any, bootstrap: str, topic: str, partitions: int, total: int) -> dict[str, Any]:
    """Worker: read all `total` records once, from the beginning of every partition.

    The clock runs from the first batch handed over to the last record, so it measures the
    steady flow rather than the start (connection, ListOffsets, the first fetch). Reading
    once matters: a consumer that reaches the end and is re-assigned waits for its pending
    Fetch, which both brokers hold for fetch.wait.max.ms (500 ms).

    confluent-kafka insists on a group.id, but an assigned (not subscribed) consumer without
    commits never joins the group: no group request is needed from the broker.
    fetch.queue.backoff.ms 0: by default librdkafka stops fetching a partition for 1 s once
    its local queue is over queued.min.messages, which capped both brokers at the same rate.
    fetch.wait.max.ms 100 (librdkafka's default 500) on both brokers: once a large answer fills
    librdkafka's local queue, its next Fetch names only partitions already read to their end, and
    a broker parks that Fetch for fetch.wait.max.ms (Kafka does too) while librdkafka keeps one
    Fetch in flight. kaflet answers as Kafka does (up to fetch.max.bytes per Fetch) and hit that
    park in some runs and not others; 500 ms of it in a run of about a second made the ratio
    swing 0.5x-1.7x. The mock answers one batch per partition and rarely fills the queue.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-assign-only",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 0,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got, errors = 0, []
    t_first = cpu_first = 0.0
    first_batch = faults_first = 0
    deadline = time.perf_counter() + 120
    while got < total:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{got} of {total} records within 120 s")
        batch = consumer.consume(num_messages=10_000, timeout=0.1)
        for msg in batch:
            if msg.error():
                errors.append(str(msg.error()))
            else:
                got += 1
        if batch and not t_first:
            t_first, cpu_first, first_batch = time.perf_counter(), time.process_time(), got
            faults_first = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    elapsed = time.perf_counter() - t_first
    cpu = time.process_time() - cpu_first
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_first
    consumer.close()
    return {
        "count": got - first_batch,
        "seconds": elapsed,
        "cpu": cpu / elapsed,
        "faults": faults,
        "errors": errors[:5],
        "failed": len(errors),
    }


def fill(target: Any, topic: str, size: int, partitions: int) -> int:
    """Put PER_PARTITION_BYTES of `size`-byte records in each partition; the total record count."""
    total = PER_PARTITION_BYTES // size * partitions
    wire.ensure_topic(target, topic, partitions)
    result = run_worker(produce, target.bootstrap, topic, size, total, 0.0, partitions)
    if result["failed"] or result["undelivered"]:
        raise RuntimeError(f"{target.name}: filling {topic} failed: {result['errors']}")
    return total


def run(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    missing: list[str] | None = None
    for size, partitions in SIZES.items():
        if ctx.quick:
            partitions = 2
        with ctx.kaflet("--default-partitions", str(partitions)) as k, ctx.mock() as m:
            if missing is None:
                missing = ctx.missing(k, NEEDS)
            targets = [m] if missing else [k, m]
            topic = f"bench-consume-{size}"
            total = {t.name: fill(t, topic, size, partitions) for t in targets}
            runs: dict[str, list[dict[str, Any]]] = {"kaflet": [], "mock": []}
            for _ in range(ctx.reps):
                for t in targets:
                    cpu0 = t.cpu()
                    result = run_worker(consume, t.bootstrap, topic, partitions, total[t.name])
                    result["broker_cpu"] = (t.cpu() - cpu0) / result["seconds"]
                    if result["failed"]:
                        raise RuntimeError(f"{t.name}: consume errors: {result['errors']}")
                    runs[t.name].append(result)
        rows += throughput_rows(f"consume {size} B", runs, size, Target("ratio>=", 1.0), "not served yet" if missing else "")
    return rows
