"""End-to-end latency: a producer at 1,000 records/s, a consumer in another process, time from
produce() to the consumer's hand (CLOCK_MONOTONIC is shared by all processes)."""

from __future__ import annotations

import struct
import time
from typing import Any

from bench import wire
from bench.context import Context, Row, Target, median
from bench.loadgen import percentile
from bench.procs import Worker
from protocol.apis import ApiKey

ABOUT = "produce-to-consume latency at 1,000 records/s (100 B, linger.ms 0, acks=all; consumer in assign mode)"

NEEDS: dict[ApiKey, int | None] = {ApiKey.PRODUCE: None, ApiKey.FETCH: None, ApiKey.LIST_OFFSETS: None}  # librdkafka negotiates versions
TOPIC = "bench-latency"
RATE = 1000
_STAMP = struct.Struct(">qq")  # sequence number, send time (ns)


def consumer(conn: Any, bootstrap: str, total: int, warmup: int) -> dict[str, Any]:
    """Worker: from the log end, collect each record's latency; signal ready once fetching."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-assign-only", "enable.auto.commit": False})
    end = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)[1]
    c.assign([TopicPartition(TOPIC, 0, end)])
    if c.poll(0.5) is not None:  # a first fetch round trip, before the producer starts
        raise RuntimeError("a record arrived before the producer started")
    conn.send(("ready",))
    latencies: list[float] = []
    seen = 0
    deadline = time.monotonic() + total / RATE + 30
    while seen < total and time.monotonic() < deadline:
        msg = c.poll(0.1)
        if msg is None or msg.error():
            continue
        now = time.monotonic_ns()
        seq, sent = _STAMP.unpack_from(msg.value())
        seen += 1
        if seq >= warmup:
            latencies.append((now - sent) / 1e6)
    c.close()
    return {"latencies_ms": latencies, "received": seen}


def producer(conn: Any, bootstrap: str, total: int) -> dict[str, Any]:
    """Worker: `total` 100-byte records, one every 1/RATE s, each stamped with its send time."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    p.produce(TOPIC, b"warm-up", partition=0)  # the first record pays for metadata and connect
    p.flush(30)
    conn.send(("ready",))
    conn.recv()  # go (the consumer is positioned after the warm-up record)
    pad = bytes(100 - _STAMP.size)
    start = time.monotonic()
    for seq in range(total):
        delay = start + seq / RATE - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        p.produce(TOPIC, _STAMP.pack(seq, time.monotonic_ns()) + pad, partition=0)
        p.poll(0)
    left = p.flush(30)
    return {"undelivered": left}


def measure(target: Any, seconds: float, warmup_seconds: float) -> dict[str, Any]:
    total, warmup = int((seconds + warmup_seconds) * RATE), int(warmup_seconds * RATE)
    prod = Worker(producer, target.bootstrap, total)
    cons = None
    try:
        prod.recv(60)  # warm-up record written: the topic exists with data before the consumer looks
        cons = Worker(consumer, target.bootstrap, total, warmup)
        cons.recv(60)
        prod.send(("go",))
        if prod.result(total / RATE + 60)["undelivered"]:
            raise RuntimeError(f"{target.name}: records not delivered")
        result = cons.result(90)
    finally:
        prod.kill()
        if cons is not None:
            cons.kill()
    if result["received"] < total:
        raise RuntimeError(f"{target.name}: consumer got {result['received']} of {total} records")
    ordered = sorted(result["latencies_ms"])
    return {"p50": percentile(ordered, 0.5), "p99": percentile(ordered, 0.99), "max": ordered[-1], "n": len(ordered)}


def run(ctx: Context) -> list[Row]:
    seconds = 0.5 if ctx.quick else 5.0
    warmup = 0.2 if ctx.quick else 1.0
    runs: dict[str, list[dict[str, Any]]] = {"kaflet": [], "mock": []}
    with ctx.kaflet() as k, ctx.mock() as m:
        missing = ctx.missing(k, NEEDS)
        targets = [m] if missing else [k, m]
        for t in targets:
            wire.ensure_topic(t, TOPIC, 1)
        for _ in range(ctx.reps):
            for t in targets:
                runs[t.name].append(measure(t, seconds, warmup))
    ctx.raw.update(runs=runs)
    ctx.note(
        "the mock does not wake a waiting Fetch when data arrives (it answers after fetch.wait.max.ms, 500 ms by "
        "default), so its latency tail is long by design; the target is on kaflet's p99 alone"
    )
    note = "not served yet" if missing else ""

    def mid(name: str, key: str) -> float | None:
        return median([r[key] for r in runs[name]]) if runs[name] else None

    return [
        Row("end-to-end latency p50", "ms", mid("kaflet", "p50"), mid("mock", "p50"), higher_is_better=False, note=note),
        Row(
            "end-to-end latency p99",
            "ms",
            mid("kaflet", "p99"),
            mid("mock", "p99"),
            higher_is_better=False,
            target=Target("<=", 5),
            note=note,
        ),
        Row("end-to-end latency max", "ms", mid("kaflet", "max"), mid("mock", "max"), higher_is_better=False, note=note),
    ]
