"""Kafka Streams 4.4 on kaflet and on Kafka 4.4, both at their defaults, with the classic group
protocol and with the streams group protocol (KIP-1071, `group.protocol=streams`).

The application is the suite's word count (tests/jvm/kafka-streams-apps: lines split into
words, re-keyed through a repartition topic, counted in a RocksDB store with a changelog) under
exactly_once_v2, with every Streams and client setting at its default; one JVM per instance.
Three input partitions, so 6 tasks. Each JVM builds its application first and calls
KafkaStreams.start() when told, so that JVM start-up is not counted and three instances start
at the same moment.

- start() to RUNNING, 1 instance: until the instance is RUNNING with every task (its first
  start: the internal topics are created on the way).
- start() to RUNNING, 3 instances: start() on the three at once; from the first start() until
  all three are RUNNING with the tasks shared out, each task once.
- re-balance after one leaves: one of the three closes (KafkaStreams.close with LEAVE_GROUP);
  from the close until the other two are RUNNING with every task between them. At the default
  heartbeat interval (3 s) a member hears of the re-balance on its next heartbeat.
- word count records/s: N lines (5 words each) produced beforehand; from RUNNING until the
  output, read under read_committed, holds every word's final count.

The start-up and re-balance rows are measured with each protocol, the same application but
for `group.protocol`. With the streams protocol the broker assigns the tasks: Kafka at its
defaults waits group.streams.initial.rebalance.delay.ms (3 s) before a new group's first
assignment, batches assignments every group.streams.assignment.interval.ms (1 s) and has members
heartbeat every group.streams.heartbeat.interval.ms (5 s); kaflet's defaults are 0, 0 and 250 ms
(docs/decisions.md).

Times come from the instances' own state events (wall clock, ms); the figure is the median of
the repetitions. Kafka runs at its defaults (KafkaReference(kafka_defaults=True): initial
rebalance delay 3 s, 50 offsets and transaction-state partitions), kaflet as `kaflet serve`.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from bench.context import Context, Row, Target, median
from bench.procs import cpu_seconds
from tests.support.streams_apps import LEAN_JVM

ABOUT = (
    "Kafka Streams word count (exactly_once_v2): start() to RUNNING with 1 and 3 instances, re-balance after a leave, "
    "with the classic and the streams group protocol; records/s; against Kafka 4.4 at its defaults"
)

PARTITIONS = 3
WORDS_PER_LINE = 5
VOCABULARY = [f"w{i:04d}" for i in range(2000)]
# The instances' JVMs, the same on both brokers. Start-up and re-balance: the suite's (C1 only,
# the serial collector: what a test run uses, and quicker to start); records/s: the JVM's
# defaults (both compilers, its collector) but for the heap.
STARTUP_JVM = LEAN_JVM
RATE_JVM = ("-Xmx512m",)


def _app(prefix: str, name: str, protocol: str = "classic") -> Any:
    from tests.support.streams_apps import AppSpec

    return AppSpec(
        name=name,
        application_id=f"{prefix}-{name}",
        guarantee="exactly_once_v2",
        protocol=protocol,
        inputs=prefix,
        outputs=f"{prefix}-{name}",
        topologies=("wordcount",),
    )


def _instances(bootstrap: str, work: Path, app: Any, count: int, jvm: tuple[str, ...]) -> list[Any]:
    from tests.support.streams_apps import StreamsInstance

    return [StreamsInstance(f"{app.name}-{n}", bootstrap, work, [app], jvm_options=jvm, hold=True) for n in range(count)]


def _start_together(instances: list[Any], app: str, timeout: float) -> float:
    """Launch the JVMs, let each build its app, then start() them at once; the first start (ms)."""
    for inst in instances:
        inst.start()
    for inst in instances:
        inst.wait_for(lambda r: r.get("event") == "ready", timeout)
    for inst in instances:
        inst.send("start")
    return min(_start_at(inst, app, timeout) for inst in instances)


def _wait_settled(instances: list[Any], app: str, tasks: set[str] | None, after: float, timeout: float) -> tuple[float, set[str]]:
    """(ms, tasks): when `instances` were all RUNNING with `tasks` (all of them once; with None, the
    tasks of a single instance's first RUNNING)."""
    from tests.support.streams_apps import settled_at

    deadline = time.monotonic() + timeout
    while True:
        for inst in instances:
            if inst.errors() or not inst.alive:
                raise RuntimeError(inst.describe())
        if tasks is None:
            running = [r for r in instances[0].states(app) if r["to"] == "RUNNING" and r["at"] >= after]
            if running:
                return float(running[0]["at"]), set(running[0]["active"])
        else:
            at = settled_at(instances, app, tasks, after)
            if at is not None:
                return at, tasks
        if time.monotonic() > deadline:
            raise TimeoutError(f"not settled within {timeout:.0f} s:\n" + "\n".join(i.describe() for i in instances))
        time.sleep(0.05)


def _start_at(inst: Any, app: str, timeout: float) -> float:
    record = inst.wait_for(lambda r: r.get("event") == "start" and r.get("app") == app, timeout)
    return float(record["at"])


def startup_and_leave(bootstrap: str, work: Path, prefix: str, timeout: float, protocol: str = "classic") -> dict[str, float]:
    """Seconds: 1 instance start() -> RUNNING; 3 instances; the re-balance after one leaves."""
    from tests.support.streams_apps import create_topics

    create_topics(bootstrap, [f"{prefix}-wc-input", f"{prefix}-one-wc-output", f"{prefix}-three-wc-output"], PARTITIONS)
    out: dict[str, float] = {}
    one = _instances(bootstrap, work, _app(prefix, "one", protocol), 1, STARTUP_JVM)
    try:
        started = _start_together(one, "one", timeout)
        running, tasks = _wait_settled(one, "one", None, started, timeout)
        out["one"] = (running - started) / 1000
    finally:
        for inst in one:
            inst.stop()
    three = _instances(bootstrap, work, _app(prefix, "three", protocol), 3, STARTUP_JVM)
    try:
        started = _start_together(three, "three", timeout)
        settled, _ = _wait_settled(three, "three", tasks, started, timeout)
        out["three"] = (settled - started) / 1000
        leaving = three[0]
        mark = len(leaving.records)
        leaving.send("close leave")
        closing = float(leaving.wait_for(lambda r: r.get("event") == "closing", timeout, after=mark)["at"])
        settled, _ = _wait_settled(three[1:], "three", tasks, closing, timeout)
        out["leave"] = (settled - closing) / 1000
    finally:
        for inst in three:
            inst.stop()
    return out


def throughput(bootstrap: str, work: Path, prefix: str, lines: int, timeout: float, broker_pid: int | None) -> dict[str, float]:
    """Input records/s of the word count under exactly_once_v2, one instance, from RUNNING until
    every final count is committed; and the broker's CPU over that time."""
    from confluent_kafka import Producer

    from tests.support.streams_apps import OutputReader, create_topics

    app = _app(prefix, "rate")
    create_topics(bootstrap, [f"{prefix}-wc-input", f"{app.outputs}-wc-output"], PARTITIONS)
    rng = random.Random(29)
    expected: Counter[str] = Counter()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True, "partitioner": "murmur2_random"})
    for n in range(lines):
        words = [rng.choice(VOCABULARY) for _ in range(WORDS_PER_LINE)]
        expected.update(words)
        while True:
            try:
                producer.produce(f"{prefix}-wc-input", key=str(n).encode(), value=" ".join(words).encode())
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0, "input not acknowledged"
    reader = OutputReader(bootstrap, [f"{app.outputs}-wc-output"], PARTITIONS)
    inst = _instances(bootstrap, work, app, 1, RATE_JVM)[0]
    try:
        started = _start_together([inst], app.name, timeout)
        running, _ = _wait_settled([inst], app.name, None, started, timeout)
        cpu0 = cpu_seconds(broker_pid) if broker_pid else None
        latest: dict[str, int] = {}
        seen = 0
        deadline = time.monotonic() + timeout
        while True:
            reader.poll(0.05)
            rows = reader.records[f"{app.outputs}-wc-output"]
            for _, key, value in rows[seen:]:
                latest[key] = int(value)
            seen = len(rows)
            if len(latest) == len(expected) and all(latest[w] == n for w, n in expected.items()):
                done = time.time()
                break
            if inst.errors() or not inst.alive:
                raise RuntimeError(inst.describe())
            if time.monotonic() > deadline:
                raise TimeoutError(f"word count not complete within {timeout:.0f} s ({len(latest)} of {len(expected)} words)")
        cpu = (cpu_seconds(broker_pid) - cpu0) if broker_pid and cpu0 is not None else None
        seconds = done - running / 1000
        return {"rate": lines / seconds, "seconds": seconds, "broker_cpu": (cpu / seconds) if cpu is not None else float("nan")}
    finally:
        inst.stop()
        reader.close()


def _measure(ctx: Context, name: str, bootstrap: str, pid: int | None, work: Path, lines: int) -> dict[str, float]:
    prefix = f"b{uuid.uuid4().hex[:8]}"
    result = startup_and_leave(bootstrap, work / f"{name}-{prefix}", prefix, 120.0)
    streams = startup_and_leave(bootstrap, work / f"{name}-{prefix}s", f"{prefix}s", 120.0, protocol="streams")
    result.update({f"streams_{k}": v for k, v in streams.items()})
    result.update(throughput(bootstrap, work / f"{name}-{prefix}", f"{prefix}t", lines, 300.0, pid))
    ctx.say(
        f"  {name}: classic RUNNING 1 {result['one']:.2f} s, 3 {result['three']:.2f} s, leave {result['leave']:.2f} s; "
        f"streams RUNNING 1 {result['streams_one']:.2f} s, 3 {result['streams_three']:.2f} s, leave {result['streams_leave']:.2f} s; "
        f"{result['rate']:,.0f} records/s ({lines} in {result['seconds']:.1f} s)"
    )
    return result


def run(ctx: Context) -> list[Row]:
    from tests.support.jvm import JvmUnavailable, classpath
    from tests.support.kafka_reference import KafkaReference

    try:
        classpath("kafka-streams-apps")
        classpath("kafka-broker")
    except JvmUnavailable as exc:
        ctx.note(f"streams: the JVM pieces are not built (make jvm): {exc}")
        return []
    lines = ctx.size(50_000, 5_000)
    work = Path(tempfile.mkdtemp(prefix="bench-streams-"))
    runs: dict[str, list[dict[str, float]]] = {"kaflet": [], "kafka": []}
    try:
        kafka = KafkaReference(work / "kafka", kafka_defaults=True, offsets_partitions=50, transaction_state_partitions=50)
        with ctx.kaflet() as k, kafka:
            pid = kafka.process.pid if kafka.process else None
            for _ in range(ctx.reps):
                runs["kaflet"].append(_measure(ctx, "kaflet", k.bootstrap, k.pid, work, lines))
                runs["kafka"].append(_measure(ctx, "kafka", kafka.bootstrap, pid, work, lines))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ctx.raw.update(
        runs=runs,
        lines=lines,
        words_per_line=WORDS_PER_LINE,
        partitions=PARTITIONS,
        jvm={"startup": list(STARTUP_JVM), "rate": list(RATE_JVM)},
    )
    ctx.note(
        "baseline: Apache Kafka 4.4 at its defaults (group.initial.rebalance.delay.ms 3000; group.streams.initial.rebalance.delay.ms 3000, "
        "group.streams.assignment.interval.ms 1000, group.streams.heartbeat.interval.ms 5000); Streams and clients at theirs"
    )

    def mid(side: str, key: str) -> float:
        return median([r[key] for r in runs[side]])

    three_x = Target("ratio>=", 3.0)
    return [
        Row("start() -> RUNNING, 1 instance", "s", mid("kaflet", "one"), mid("kafka", "one"), False, three_x, "kafka"),
        Row("start() -> RUNNING, 3 instances", "s", mid("kaflet", "three"), mid("kafka", "three"), False, three_x, "kafka"),
        Row("re-balance after one of 3 leaves", "s", mid("kaflet", "leave"), mid("kafka", "leave"), False, None, "kafka"),
        Row(
            "streams protocol: start() -> RUNNING, 1 instance",
            "s",
            mid("kaflet", "streams_one"),
            mid("kafka", "streams_one"),
            False,
            three_x,
            "kafka",
        ),
        Row(
            "streams protocol: start() -> RUNNING, 3 instances",
            "s",
            mid("kaflet", "streams_three"),
            mid("kafka", "streams_three"),
            False,
            three_x,
            "kafka",
        ),
        Row(
            "streams protocol: re-balance after one of 3 leaves",
            "s",
            mid("kaflet", "streams_leave"),
            mid("kafka", "streams_leave"),
            False,
            None,
            "kafka",
        ),
        Row("word count, exactly_once_v2", "rec/s", mid("kaflet", "rate"), mid("kafka", "rate"), True, Target("ratio>=", 0.5), "kafka"),
        Row(
            "word count broker CPU", "cores", mid("kaflet", "broker_cpu"), mid("kafka", "broker_cpu"), baseline_name="kafka", compare=False
        ),
    ]
