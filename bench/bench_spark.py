"""The Spark pipeline: the kaflet source beside Spark's own Kafka connector, and the analytics' run time.

Read: 1 M records of 100 B in a 4-partition kaflet topic, loaded and counted with
`spark.read.format("kaflet")` and with `spark.read.format("kafka")` (spark-sql-kafka-0-10, the jars
`make jvm` fetched) in the same session, and read to its end by one confluent-kafka Consumer
(assign mode, `fetch.queue.backoff.ms=0` so that it is not idle-bound), on `local[1]`, `local[2]`
and a standalone cluster of two one-core workers (`pipeline.cluster`). Each side is timed whole:
planning, Python workers, Arrow or JVM decoding included; the session is warmed up first (a small
read through each format) and JVM start-up is not counted. Each repetition runs the three readers
in turn, so background load hits them alike. Target: the kaflet source at least 0.7x the connector.

Write: `df.write.format("kaflet")` of 1 M records (2 tasks) against one idempotent producer.

Analytics: a group with 1,000 commits; `python -m pipeline lag-history --once`, `rebalance-timeline
--once` and `audit`, each a command of its own on `local[2]` timed end to end (JVM start included).
Target: each under 30 s.
"""

from __future__ import annotations

import os
import time
from typing import Any

from bench.bench_produce import produce
from bench.context import Context, Row, Target
from bench.procs import Worker, run_worker

ABOUT = "Spark pipeline: read 1 M 100 B records with format(kaflet), format(kafka) and one consumer on local[1], local[2], a 2-worker cluster; write; the analytics over 1,000 commits"

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
    """Worker: a Spark session that runs ("read", format, topic, expected) and ("write", topic, count) on command."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import functions as F

    from pipeline.spark import session

    conf = {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "2g"}
    if master.startswith("spark://"):
        conf.update({"spark.executor.memory": "1g", "spark.cores.max": "2"})
    spark = session(master, "kaflet-bench", conf, connector="kafka")
    payload = os.urandom(SIZE)
    conn.send(("ready",))
    while True:
        cmd = conn.recv()
        if cmd[0] == "stop":
            break
        t0 = time.perf_counter()
        if cmd[0] == "read":
            _, fmt, topic, expected = cmd
            n = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load().count()
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


MASTERS = ("local[1]", "local[2]", "cluster")


def _reads(ctx: Context, bootstrap: str, master: str, held: int, warm: int) -> dict[str, list[dict[str, Any]]]:
    """The three readers over the same topic, in turn, `ctx.reps` times, with one Spark session on `master`."""
    out: dict[str, list[dict[str, Any]]] = {"kaflet": [], "kafka": [], "consumer": []}
    worker = Worker(spark_worker, bootstrap, master)
    try:
        worker.recv(300)  # ("ready",)
        for fmt in ("kaflet", "kafka"):
            _ask(worker, "read", fmt, "bench-spark-warm", warm)  # Python workers, JVM classes, imports: once
        for _ in range(ctx.reps):
            for fmt in ("kaflet", "kafka"):
                out[fmt].append(_ask(worker, "read", fmt, "bench-spark-read", held))
            out["consumer"].append(run_worker(consume_all, bootstrap, "bench-spark-read", PARTITIONS, held))
        worker.send(("stop",))
    finally:
        worker.kill()
    return out


def _rate(runs: list[dict[str, Any]]) -> float:
    return sorted(r["count"] / r["seconds"] for r in runs)[len(runs) // 2]


def _commits(bootstrap: str, topic: str, group: str, count: int) -> None:
    """`count` synchronous commits of one group over the topic's partitions, and outputs to audit."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for i in range(count):
            c.commit(offsets=[TopicPartition(topic, i % PARTITIONS, 1 + i // PARTITIONS)], asynchronous=False)
    finally:
        c.close()


def _audited(bootstrap: str, source: str, output: str, count: int) -> None:
    from confluent_kafka import Producer

    from pipeline.analytics.audit import source_headers

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        part, offset = i % PARTITIONS, i // PARTITIONS
        p.produce(output, b"x", partition=part, headers=source_headers(source, part, offset))
        if i % 1000 == 0:
            p.poll(0)
    p.flush(60)


def _session_cpu(sid: int, seen: dict[int, float]) -> None:
    """CPU seconds so far of every process in session `sid` (the command, its JVM, its Python workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # field 6 of stat: the session id
            seen[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime


def _command(*args: str) -> tuple[float, float]:
    """Run `python -m pipeline ARGS` in a session of its own; (wall seconds, CPU seconds of all its processes)."""
    import subprocess
    import sys

    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    seen: dict[int, float] = {}
    while proc.poll() is None:
        _session_cpu(proc.pid, seen)
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"pipeline {args[0]} failed: {err[-2000:]}")
    return wall, sum(seen.values())


def run(ctx: Context) -> list[Row]:
    try:
        import pyspark  # noqa: F401

        from pipeline.spark import kafka_connector_jars
    except ImportError:
        ctx.note("spark: the pipeline extra is not installed (pip install -e '.[pipeline]')")
        return []
    if not kafka_connector_jars():
        ctx.note('spark: Spark\'s Kafka connector is not fetched (make jvm): format("kafka") would download it at start')
    total = ctx.size(1_000_000, 20_000)
    commits = ctx.size(1_000, 100)
    reads: dict[str, dict[str, list[dict[str, Any]]]] = {}
    writes: dict[str, list[dict[str, Any]]] = {"spark": [], "producer": []}
    analytics: dict[str, list[tuple[float, float]]] = {"lag-history": [], "rebalance-timeline": [], "audit": []}
    with ctx.kaflet("--default-partitions", str(PARTITIONS)) as k:
        held = _fill(k.bootstrap, "bench-spark-read", total)
        warm = _fill(k.bootstrap, "bench-spark-warm", 1000)
        for master in MASTERS:
            if master == "cluster":
                import tempfile

                from pipeline import cluster

                with tempfile.TemporaryDirectory(prefix="kaflet-bench-cluster-") as d:
                    url = cluster.start(d, workers=2, cores=1, memory="1536m").master_url
                    try:
                        reads[master] = _reads(ctx, k.bootstrap, url, held, warm)
                    finally:
                        cluster.stop(d)
            else:
                reads[master] = _reads(ctx, k.bootstrap, master, held, warm)
        worker = Worker(spark_worker, k.bootstrap, "local[2]")
        try:
            worker.recv(300)
            _create(k.bootstrap, "bench-spark-warm-out")
            _ask(worker, "write", "bench-spark-warm-out", 1000)
            for rep in range(ctx.reps):
                _create(k.bootstrap, f"bench-spark-out-{rep}")
                writes["spark"].append(_ask(worker, "write", f"bench-spark-out-{rep}", total))
                _create(k.bootstrap, f"bench-spark-single-{rep}")
                writes["producer"].append(run_worker(produce_idempotent, k.bootstrap, f"bench-spark-single-{rep}", total, timeout=600))
            worker.send(("stop",))
        finally:
            worker.kill()
        # The analytics, each command a process of its own, as a user runs them.
        source, output = "bench-analytics-src", "bench-analytics-out"
        _fill(k.bootstrap, source, commits)
        _create(k.bootstrap, output)
        _audited(k.bootstrap, source, output, commits)
        _commits(k.bootstrap, source, "bench-analytics", commits)
        import tempfile

        for _ in range(ctx.reps):
            with tempfile.TemporaryDirectory(prefix="kaflet-bench-analytics-") as out:
                common = ["--bootstrap-server", k.bootstrap, "--out", out, "--master", "local[2]"]
                analytics["lag-history"].append(_command("lag-history", *common, "--once"))
                analytics["rebalance-timeline"].append(_command("rebalance-timeline", *common, "--once"))
                audit = ["--source-topics", source, "--output-topics", output, "--group", "bench-analytics"]
                analytics["audit"].append(_command("audit", *common, *audit))

    rows: list[Row] = []
    for master in MASTERS:
        r = reads[master]
        where = "standalone, 2 workers x 1 core" if master == "cluster" else master
        rows.append(
            Row(
                f"read+count {total:,} x {SIZE} B, {where}: format(kaflet) vs format(kafka)",
                "msg/s",
                _rate(r["kaflet"]),
                _rate(r["kafka"]),
                target=Target("ratio>=", 0.7),
                baseline_name="kafka",
            )
        )
        rows.append(
            Row(
                f"read+count {total:,} x {SIZE} B, {where}: format(kafka) vs 1 consumer",
                "msg/s",
                _rate(r["kafka"]),
                _rate(r["consumer"]),
                baseline_name="consumer",
                note="context: the JVM connector against one confluent-kafka consumer in one process",
            )
        )
    rows.append(
        Row(
            f"write {total:,} x {SIZE} B: format(kaflet) local[2] vs 1 producer",
            "msg/s",
            _rate(writes["spark"]),
            _rate(writes["producer"]),
            baseline_name="producer",
        )
    )
    for command, runs in analytics.items():
        wall, cpu = sorted(runs)[len(runs) // 2]
        rows.append(
            Row(
                f"{command} end to end, {commits:,} commits, local[2]",
                "s",
                wall,
                higher_is_better=False,
                target=Target("<=", 30.0),
                compare=False,
                note=f"CPU {cpu:.1f} s over all its processes (JVM, Python workers): at least {cpu / 2:.1f} s on 2 idle cores",
            )
        )
    return rows


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
