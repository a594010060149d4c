"""Produce throughput with confluent-kafka: linger.ms 5, acks=all, 100-byte and 1 KiB records."""

from __future__ import annotations

import os
import resource
import time
from typing import Any

from bench import wire
from bench.context import Context, Row, Target, median
from bench.procs import run_worker
from protocol.apis import ApiKey

ABOUT = "confluent-kafka produce throughput (linger.ms 5, acks=all), 100 B and 1 KiB records, one partition"

NEEDS: dict[ApiKey, int | None] = {ApiKey.PRODUCE: None}  # librdkafka negotiates the version
SIZES = (100, 1024)


def produce(
    conn: Any, bootstrap: str, topic: str, size: int, count: int | None, seconds: float = 0.0, partitions: int = 1
) -> dict[str, Any]:
    """Worker: produce records of `size` random bytes as fast as the client goes, then flush.

    It sends `count` records, or as many as it can in `seconds` when count is None. The clock
    stops when the last one is acknowledged. With several partitions the records go round-robin
    to them, so each holds an equal share. Only failed deliveries are reported back
    (delivery.report.only.error) to keep the client cheap.
    """
    from confluent_kafka import Producer

    errors: list[str] = []
    conf = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "acks": "all",
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "delivery.report.only.error": True,
        "on_delivery": lambda err, msg: errors.append(str(err)) if err else None,
    }
    producer = Producer(conf)
    payload = os.urandom(size)
    producer.produce(topic, payload, partition=0)  # connection and metadata before the clock starts
    if producer.flush(30):
        raise RuntimeError("warm-up record not delivered")
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    cpu0, t0 = time.process_time(), time.perf_counter()
    stop = t0 + seconds
    send = producer.produce
    sent = 0
    while count is None or sent < count:
        for _ in range(1000 if count is None else min(1000, count - sent)):
            try:
                send(topic, payload, partition=sent % partitions)
            except BufferError:
                producer.poll(0.01)
                send(topic, payload, partition=sent % partitions)
            sent += 1
        producer.poll(0)
        if count is None and time.perf_counter() >= stop:
            break
    left = producer.flush(120)
    elapsed = time.perf_counter() - t0
    return {
        "count": sent,
        "seconds": elapsed,
        "cpu": (time.process_time() - cpu0) / elapsed,
        "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0,
        "undelivered": left,
        "errors": errors[:5],
        "failed": len(errors),
    }


def measure(target: Any, topic: str, size: int, seconds: float) -> dict[str, Any]:
    cpu0 = target.cpu()
    result = run_worker(produce, target.bootstrap, topic, size, None, seconds)
    # Broker CPU over the worker's whole life (start-up included) per measured second: an upper bound.
    result["broker_cpu"] = (target.cpu() - cpu0) / result["seconds"]
    if result["failed"] or result["undelivered"]:
        raise RuntimeError(f"{target.name}: {result['failed']} failed, {result['undelivered']} undelivered: {result['errors']}")
    return result


def run(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    with ctx.kaflet() as k, ctx.mock() as m:
        missing = ctx.missing(k, NEEDS)
        seconds = 0.3 if ctx.quick else ctx.duration
        for size in SIZES:
            topic = f"bench-produce-{size}"
            wire.ensure_topic(m, topic, 1)
            if not missing:
                wire.ensure_topic(k, topic, 1)
            runs: dict[str, list[dict[str, Any]]] = {"kaflet": [], "mock": []}
            for _ in range(ctx.reps):
                if not missing:
                    runs["kaflet"].append(measure(k, topic, size, seconds))
                runs["mock"].append(measure(m, topic, size, seconds))
            rows += throughput_rows(f"produce {size} B", runs, size, Target("ratio>=", 0.8), "not served yet" if missing else "")
    return rows


def throughput_rows(label: str, runs: dict[str, list[dict[str, Any]]], size: int, target: Target, note: str) -> list[Row]:
    """MB/s and records/s (median run) plus the client's CPU, for a produce or consume run."""

    def pick(name: str, f: Any) -> float | None:
        values = [v for v in map(f, runs[name]) if v is not None]
        return median(values) if values else None

    def per_mb(value: float, r: dict[str, Any]) -> float | None:
        return value * 1e6 / (r["count"] * size) if r["count"] else None  # a --quick read can start at its end

    mbps = [pick(n, lambda r: r["count"] * size / r["seconds"] / 1e6) for n in ("kaflet", "mock")]
    rate = [pick(n, lambda r: r["count"] / r["seconds"]) for n in ("kaflet", "mock")]
    cpu = [pick(n, lambda r: r["cpu"]) for n in ("kaflet", "mock")]
    broker = [pick(n, lambda r: r["broker_cpu"]) for n in ("kaflet", "mock")]
    # Where the time goes, per MB of values: on 2 cores the client's own cost decides as much as
    # the broker's, and it differs by broker (bench/README.md, issue 17's figures).
    cpu_ms = [pick(n, lambda r: per_mb(r["cpu"] * r["seconds"] * 1000, r)) for n in ("kaflet", "mock")]
    faults = [pick(n, lambda r: per_mb(r["faults"], r)) for n in ("kaflet", "mock")]
    return [
        Row(f"{label} throughput", "MB/s", mbps[0], mbps[1], target=target, note=note),
        Row(f"{label} throughput", "msg/s", rate[0], rate[1], target=target, note=note),
        Row(f"{label} broker CPU", "cores", broker[0], broker[1], compare=False, note=note),
        Row(f"{label} client CPU", "cores", cpu[0], cpu[1], compare=False, note=note),
        Row(f"{label} client CPU per MB", "ms", cpu_ms[0], cpu_ms[1], compare=False, note=note),
        Row(f"{label} client page faults per MB", "faults", faults[0], faults[1], compare=False, note=note),
    ]
