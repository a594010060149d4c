"""The Spark pipeline's data source: Spark (`local[2]`) against one confluent-kafka client in one process.

Read: 1 M records of 100 B in a 4-partition kaflet topic, loaded with `spark.read.format("kaflet")`
and counted, against one Consumer (assign mode) reading the same topic to its end. Write: 1 M
records of 100 B written with `df.write.format("kaflet")` (spark.range(1 M) with a constant value,
2 tasks), against one idempotent Producer producing as many. Both sides are timed the same way:
wall time of the whole operation, connection and metadata included (for Spark: planning the job,
the Python workers and the Arrow hand-over to the JVM too). The Spark session and its Python
workers are warmed up first (a small read and write); JVM start-up is not counted. Each repetition
runs Spark and the single client alternately, so background load hits both alike.

The baseline here is the single client, not the mock cluster: both sides talk to the same kaflet.
The issue's target is Spark >= 0.5x the single consumer on 2 cores (and scaling with cores).
"""

from __future__ import annotations

import os
import time
from typing import Any

from bench.bench_produce import produce
from bench.context import Context, Row, Target
from bench.procs import Worker, run_worker

ABOUT = "Spark pipeline source: read+count / write 1 M 100 B records with local[2] vs one confluent-kafka client"

SIZE = 100
PARTITIONS = 4


def consume_all(conn: Any, bootstrap: str, topic: str, partitions: int, total: int) -> dict[str, Any]:
    """Worker: one consumer, assign mode, reads every partition from the start until `total` records; timed whole."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    t0, cpu0 = time.perf_counter(), time.process_time()
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-spark-baseline", "enable.auto.commit": False, "fetch.queue.backoff.ms": 0}
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    deadline = t0 + 300
    while got < total:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{got} of {total} records within 300 s")
        for msg in consumer.consume(num_messages=10_000, timeout=0.1):
            if msg.error() is None:
                got += 1
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    consumer.close()
    return {"count": got, "seconds": elapsed, "cpu": cpu / elapsed}


def spark_worker(conn: Any, bootstrap: str, master: str) -> dict[str, Any]:
    """Worker: a Spark session that runs ("read", topic, expected) and ("write", topic, count) on command."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import functions as F

    from pipeline.spark import session

    spark = session(master, "kaflet-bench", {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "2g"})
    payload = os.urandom(SIZE)
    conn.send(("ready",))
    while True:
        cmd = conn.recv()
        if cmd[0] == "stop":
            break
        t0 = time.perf_counter()
        if cmd[0] == "read":
            _, topic, expected = cmd
            n = spark.read.format("kaflet").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load().count()
            if n != expected:
                raise RuntimeError(f"Spark counted {n} records in {topic}, expected {expected}")
        else:
            _, topic, count = cmd
            df = spark.range(0, count, 1, 2).select(F.lit(payload).alias("value"))
            df.write.format("kaflet").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).mode("append").save()
            n = count
        conn.send(("done", {"count": n, "seconds": time.perf_counter() - t0}))
    spark.stop()
    return {}


def _create(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until the answer is in
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=10)[topic].result(timeout=30)


def _fill(bootstrap: str, topic: str, count: int) -> int:
    """Fill `topic` with `count` records; the number it holds (the producer's warm-up record is one more)."""
    _create(bootstrap, topic)
    result = run_worker(produce, bootstrap, topic, SIZE, count, 0.0, PARTITIONS, timeout=600)
    if result["failed"] or result["undelivered"]:
        raise RuntimeError(f"filling {topic} failed: {result['errors']}")
    return count + 1


def _ask(worker: Worker, *cmd: Any) -> dict[str, Any]:
    worker.send(cmd)
    msg = worker.recv(600)
    return msg[1]


def run(ctx: Context) -> list[Row]:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        ctx.note("spark: the pipeline extra is not installed (pip install -e '.[pipeline]')")
        return []
    total = ctx.size(1_000_000, 20_000)
    reads: dict[str, list[dict[str, Any]]] = {"spark": [], "consumer": []}
    writes: dict[str, list[dict[str, Any]]] = {"spark": [], "producer": []}
    with ctx.kaflet("--default-partitions", str(PARTITIONS)) as k:
        held = _fill(k.bootstrap, "bench-spark-read", total)
        warm = _fill(k.bootstrap, "bench-spark-warm", 1000)
        worker = Worker(spark_worker, k.bootstrap, "local[2]")
        try:
            worker.recv(300)  # ("ready",)
            _ask(worker, "read", "bench-spark-warm", warm)  # Python workers and imports, once
            _create(k.bootstrap, "bench-spark-warm-out")
            _ask(worker, "write", "bench-spark-warm-out", 1000)
            for rep in range(ctx.reps):
                reads["spark"].append(_ask(worker, "read", "bench-spark-read", held))
                reads["consumer"].append(run_worker(consume_all, k.bootstrap, "bench-spark-read", PARTITIONS, held))
                _create(k.bootstrap, f"bench-spark-out-{rep}")
                writes["spark"].append(_ask(worker, "write", f"bench-spark-out-{rep}", total))
                _create(k.bootstrap, f"bench-spark-single-{rep}")
                result = run_worker(produce_idempotent, k.bootstrap, f"bench-spark-single-{rep}", total, timeout=600)
                writes["producer"].append(result)
            worker.send(("stop",))
        finally:
            worker.kill()
        # The same read on one core: how the source scales with cores.
        one_core: list[dict[str, Any]] = []
        worker = Worker(spark_worker, k.bootstrap, "local[1]")
        try:
            worker.recv(300)
            _ask(worker, "read", "bench-spark-warm", warm)
            for _ in range(ctx.reps):
                one_core.append(_ask(worker, "read", "bench-spark-read", held))
            worker.send(("stop",))
        finally:
            worker.kill()

    def rate(runs: list[dict[str, Any]]) -> float:
        return sorted(r["count"] / r["seconds"] for r in runs)[len(runs) // 2]

    return [
        Row(
            f"read+count {total:,} x {SIZE} B: Spark local[2] vs 1 consumer",
            "msg/s",
            rate(reads["spark"]),
            rate(reads["consumer"]),
            target=Target("ratio>=", 0.5),
            baseline_name="consumer",
        ),
        Row(
            f"read+count {total:,} x {SIZE} B: Spark local[1] vs local[2]",
            "msg/s",
            rate(one_core),
            rate(reads["spark"]),
            baseline_name="local[2]",
            note="scaling with cores: a ratio < 1 means two cores read faster than one",
        ),
        Row(
            f"write {total:,} x {SIZE} B: Spark local[2] vs 1 producer",
            "msg/s",
            rate(writes["spark"]),
            rate(writes["producer"]),
            baseline_name="producer",
        ),
    ]


def produce_idempotent(conn: Any, bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    """Worker: one idempotent producer (as the Spark sink's) sends `count` records round-robin; timed whole."""
    from confluent_kafka import Producer

    t0 = time.perf_counter()
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "delivery.report.only.error": True,  # as the Spark sink's producer
            "on_delivery": lambda err, msg: errors.append(str(err)) if err else None,
        }
    )
    payload = os.urandom(SIZE)
    send = producer.produce
    for i in range(count):
        while True:
            try:
                send(topic, payload)
                break
            except BufferError:  # the local queue is full: serve callbacks, then retry (as the sink does)
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left or errors:
        raise RuntimeError(f"{left} undelivered, errors {errors[:3]}")
    return {"count": count, "seconds": time.perf_counter() - t0}
