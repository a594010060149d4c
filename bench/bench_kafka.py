"""kaflet beside Apache Kafka 4.4 (tests/support/kafka_reference.py, fetched by `make jvm`).

One run, two Kafka processes one after the other, each figure a ratio kaflet/Kafka:
* Kafka with kaflet's group settings (initial rebalance delay 0, consumer heartbeat 250 ms):
  process start to first answered Metadata, idle RSS, produce and consume MB/s at 100 B and
  1 KiB, OffsetCommit/s, classic and KIP-848 groups of 10 from subscribe to stable and from a
  member's close to stable again;
* Kafka at its own defaults (initial delay 3000 ms, consumer heartbeat 5000 ms): start-up, idle
  RSS and the same group figures, which is what a user who swaps Kafka for kaflet sees.
kaflet runs at its defaults in both. Clients and load are the other benchmarks' (confluent-kafka
workers, the pipelined OffsetCommit load); see bench/README.md.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench import bench_consume, bench_consumer_groups, bench_groups, bench_offset_commit, bench_produce, procs, wire
from bench.context import Context, Row, load_rows, median

ABOUT = "kaflet vs Apache Kafka 4.4: start-up to Metadata, idle RSS, produce/consume MB/s, OffsetCommit/s, groups of 10"

MB = 1_000_000
GROUP_MEMBERS = 10
# Consume: fewer partitions than bench_consume (Kafka keeps every byte; a JVM broker and its
# client share 2 cores): 3.5 MiB of values per partition either way.
CONSUME_PARTITIONS = {100: 4, 1024: 8}


class KafkaTarget:
    """A running KafkaReference, shaped like the bench's targets (bootstrap, pid, cpu, rss)."""

    name = "kafka"

    def __init__(self, kafka_defaults: bool) -> None:
        from tests.support.kafka_reference import KafkaReference

        self.ref = KafkaReference(kafka_defaults=kafka_defaults, offsets_partitions=50, transaction_state_partitions=50)

    def __enter__(self) -> KafkaTarget:
        self.ref.start()
        assert self.ref.process is not None
        self.bootstrap = self.ref.bootstrap
        self.pid = self.ref.process.pid
        return self

    def __exit__(self, *exc: object) -> None:
        self.ref.stop()

    def cpu(self) -> float:
        return procs.cpu_seconds(self.pid)

    def rss(self) -> int:
        return procs.rss_bytes(self.pid)


def kaflet_start_to_metadata() -> tuple[float, int]:
    """A fresh `kaflet serve` until it answers Metadata (seconds), and its RSS once idle (bytes)."""
    port = procs.free_port()
    data = tempfile.mkdtemp(prefix="kaflet-bench-kafka-")
    cmd = [sys.executable, "-m", "broker", "serve", "--port", str(port), "--data-dir", data, "--no-metrics", "--log-level", "warning"]
    env = None
    if procs.KAFLET_DIR:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [procs.KAFLET_DIR, os.environ.get("PYTHONPATH")]))}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=procs.KAFLET_DIR, env=env
    )
    try:
        seconds = _first_metadata(f"127.0.0.1:{port}", t0, proc)
        time.sleep(1.0)
        return seconds, procs.rss_bytes(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        shutil.rmtree(data, ignore_errors=True)


def _first_metadata(bootstrap: str, t0: float, proc: subprocess.Popen[bytes]) -> float:
    while True:
        try:
            with wire.SyncClient(bootstrap, timeout=5) as client:
                if client.request(wire.metadata_request(None)).brokers:
                    return time.perf_counter() - t0
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"kaflet exited with {proc.returncode} before answering")
        if time.perf_counter() - t0 > 30:
            raise TimeoutError("kaflet did not answer Metadata within 30 s")
        time.sleep(0.002)


def ensure_topic(target: Any, name: str, partitions: int) -> None:
    """wire.ensure_topic, waiting out Kafka's asynchronous creation (its Metadata can list a new
    topic without partitions for a moment)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            wire.ensure_topic(target, name, partitions)
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def idle_rss(target: Any) -> float:
    wire.api_versions(target.bootstrap)
    with wire.SyncClient(target.bootstrap) as client:
        client.request(wire.metadata_request(None))
    time.sleep(1.0)
    return float(target.rss()) / MB


def throughput(ctx: Context, kaflet: Any, kafka: Any) -> list[Row]:
    rows: list[Row] = []
    seconds = 0.3 if ctx.quick else ctx.duration
    for size in bench_produce.SIZES:
        runs: dict[str, list[dict[str, Any]]] = {"kaflet": [], "mock": []}
        topic = f"bench-kafka-produce-{size}"
        for target in (kaflet, kafka):
            ensure_topic(target, topic, 1)
        for _ in range(ctx.reps):
            runs["kaflet"].append(bench_produce.measure(kaflet, topic, size, seconds))
            runs["mock"].append(bench_produce.measure(kafka, topic, size, seconds))
        rows += _named(bench_produce.throughput_rows(f"produce {size} B", runs, size, None, ""), "kafka")  # type: ignore[arg-type]
    for size, partitions in CONSUME_PARTITIONS.items():
        partitions = 2 if ctx.quick else partitions
        topic = f"bench-kafka-consume-{size}"
        for t in (kaflet, kafka):
            ensure_topic(t, topic, partitions)
        total = {t.name: bench_consume.fill(t, topic, size, partitions) for t in (kaflet, kafka)}
        runs = {"kaflet": [], "mock": []}
        for _ in range(ctx.reps):
            for t, key in ((kaflet, "kaflet"), (kafka, "mock")):
                cpu0 = t.cpu()
                result = procs.run_worker(bench_consume.consume, t.bootstrap, topic, partitions, total[t.name])
                result["broker_cpu"] = (t.cpu() - cpu0) / result["seconds"]
                if result["failed"]:
                    raise RuntimeError(f"{t.name}: consume errors: {result['errors']}")
                runs[key].append(result)
        rows += _named(bench_produce.throughput_rows(f"consume {size} B", runs, size, None, ""), "kafka")  # type: ignore[arg-type]
    return rows


def offset_commits(ctx: Context, kaflet: Any, kafka: Any) -> list[Row]:
    for target in (kaflet, kafka):
        ensure_topic(target, bench_offset_commit.TOPIC, bench_offset_commit.PARTITIONS)
        bench_offset_commit.prepare(target)
    frames = bench_offset_commit.rings(ctx, 1)
    runs: dict[str, list[Any]] = {"kaflet": [], "kafka": []}
    for _ in range(ctx.reps):
        runs["kaflet"].append(ctx.load(kaflet, frames))
        runs["kafka"].append(ctx.load(kafka, frames))
    return load_rows("OffsetCommit 1p", runs["kaflet"], runs["kafka"], None, baseline_name="kafka")[:3]


def groups(ctx: Context, kaflet: Any, kafka: Any, label: str) -> list[Row]:
    """Classic (eager range, librdkafka) and KIP-848 groups of 10: subscribe -> stable, close -> stable."""
    rows: list[Row] = []
    for kind, module, topic, partitions in (
        ("classic", bench_groups, bench_groups.TOPIC, bench_groups.PARTITIONS),
        ("KIP-848", bench_consumer_groups, bench_consumer_groups.TOPIC, bench_consumer_groups.PARTITIONS),
    ):
        for target in (kaflet, kafka):
            ensure_topic(target, topic, partitions)
        runs: dict[str, list[dict[str, Any]]] = {"kaflet": [], "kafka": []}
        for rep in range(ctx.reps):
            for target, key in ((kaflet, "kaflet"), (kafka, "kafka")):
                group = f"bench-kafka-{kind}-{label}-{rep}"
                runs[key].append(procs.run_worker(module.group_run, target.bootstrap, group, GROUP_MEMBERS, 90.0, timeout=300))

        def mid(key: str, field: str, runs: dict[str, list[dict[str, Any]]] = runs) -> float:
            return median([r[field] for r in runs[key]])

        base = f"kafka {label}"
        rows += [
            Row(
                f"{kind} group of 10: subscribe -> stable", "s", mid("kaflet", "formed"), mid("kafka", "formed"), False, baseline_name=base
            ),
            Row(
                f"{kind} group of 10: one closes -> stable",
                "s",
                mid("kaflet", "reformed"),
                mid("kafka", "reformed"),
                False,
                baseline_name=base,
            ),
        ]
        ctx.raw[f"{kind}-{label}"] = runs
    return rows


def _named(rows: list[Row], name: str) -> list[Row]:
    for row in rows:
        row.baseline_name = name
        row.target = None
    return rows


def run(ctx: Context) -> list[Row]:
    kaflet_ms, kaflet_rss = [], []
    for _ in range(ctx.size(5, 2)):
        seconds, rss = kaflet_start_to_metadata()
        kaflet_ms.append(seconds * 1000)
        kaflet_rss.append(rss / MB)
    rows: list[Row] = []
    ctx.note(f"kaflet start -> Metadata, each run (ms): {', '.join(f'{v:.0f}' for v in kaflet_ms)}")
    for label, kafka_defaults in (("kaflet's group settings", False), ("defaults", True)):
        target = KafkaTarget(kafka_defaults)
        with target as kafka, ctx.kaflet() as kaflet:
            base = f"kafka {label}"
            kafka_ms = kafka.ref.metadata_seconds * 1000
            ctx.note(f"Kafka ({label}): storage format + start until its coordinators answer {kafka.ref.start_seconds:.1f} s")
            rows += [
                Row("process start -> first Metadata answer", "ms", median(kaflet_ms), kafka_ms, False, baseline_name=base),
                Row("idle RSS (kaflet alone; Kafka's JVM)", "MB", median(kaflet_rss), idle_rss(kafka), False, baseline_name=base),
            ]
            if not kafka_defaults:
                rows += throughput(ctx, kaflet, kafka)
                rows += offset_commits(ctx, kaflet, kafka)
            rows += groups(ctx, kaflet, kafka, "defaults" if kafka_defaults else "equal")
    ctx.note(
        "Kafka 4.4 runs KRaft combined mode with a 1 GiB heap (-Xms1g -Xmx1g, G1), 50 offsets and transaction-state "
        "partitions like kaflet's defaults; 'defaults': group.initial.rebalance.delay.ms 3000 and "
        "group.consumer.heartbeat.interval.ms 5000, else 0 and 250 ms like kaflet"
    )
    ctx.raw.update(kaflet_start_ms=kaflet_ms, kaflet_idle_rss_mb=kaflet_rss)
    return rows
