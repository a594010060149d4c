"""KIP-848 groups of thousands: raw heartbeat members (bench/group_members.py), cheap enough that 5,000 of
them fit in one client process, side by side with the librdkafka mock and, with `BENCH_GROUP_SCALE_KAFKA=1`,
Apache Kafka 4.4 (tests/support/kafka_reference.py).

One group per size (10, 1,000 and 5,000 members) on one 1,000-partition topic, every member joining as fast as
the broker answers, every broker at the same heartbeat interval (INTERVAL_MS: at kaflet's default of 250 ms a
5,000-member group sends 20,000 heartbeats a second, more than one Python client process can send). Figures:

* joins per second (first join sent -> last join answered);
* seconds from the last join until the group is stable (every partition owned once, every member at one
  epoch) - the target is 10 s at 5,000 members;
* broker CPU per steady heartbeat (nothing changes: what every member sends each interval), at 5,000 members
  against 1,000 (at 10 members a run holds too few heartbeats for the 10 ms CPU clock) - the target is the
  same cost (a ratio of at most 1.5, for the noise of a shared machine);
* broker RSS per member (RSS once stable minus RSS before the first join, over the members).
"""

from __future__ import annotations

import os
from typing import Any

from bench import wire
from bench.context import Context, Row, Target
from bench.group_members import GroupSpec, run_group
from bench.procs import rss_bytes, run_worker

ABOUT = "KIP-848 groups of 10/1,000/5,000 raw members: joins/s, last join -> stable, CPU per steady heartbeat, RSS per member"

TOPIC = "bench-scale"
PARTITIONS = 1000
INTERVAL_MS = 1000
SETTLE_S = 60.0


def _sizes(ctx: Context) -> tuple[int, ...]:
    return (10, 200) if ctx.quick else (10, 1000, 5000)


def measure(target: Any, members: int, tag: str, pid: int) -> dict[str, Any]:
    spec = GroupSpec(
        group=f"bench-scale-{tag}-{members}",
        members=members,
        topics=[TOPIC],
        partitions=PARTITIONS,
        connections=min(32, max(1, members // 50)),
        settle_s=SETTLE_S,
        steady_s=5.0 if members > 100 else 3.0,
        broker_pid=pid,
    )
    before = rss_bytes(pid) if pid else 0
    out = run_worker(run_group, target.bootstrap, spec, timeout=600)
    out["rss_per_member_kb"] = (rss_bytes(pid) - before) / members / 1024 if pid else None
    return out


def _kafka_target() -> Any:
    from bench.bench_kafka import KafkaTarget
    from tests.support.kafka_reference import KafkaReference

    target = KafkaTarget(kafka_defaults=False)
    interval = str(INTERVAL_MS)
    target.ref = KafkaReference(
        properties={"group.consumer.heartbeat.interval.ms": interval, "group.consumer.min.heartbeat.interval.ms": interval},
        offsets_partitions=50,
    )
    return target


def run(ctx: Context) -> list[Row]:
    sizes = _sizes(ctx)
    results: dict[str, dict[int, dict[str, Any]]] = {"kaflet": {}, "mock": {}, "kafka": {}}
    with ctx.kaflet("--group-consumer-heartbeat-interval-ms", str(INTERVAL_MS)) as k:
        wire.ensure_topic(k, TOPIC, PARTITIONS)
        for n in sizes:
            results["kaflet"][n] = measure(k, n, "k", k.pid)
    with ctx.mock(consumer_heartbeat_interval_ms=INTERVAL_MS) as m:
        wire.ensure_topic(m, TOPIC, PARTITIONS)
        for n in sizes:
            try:
                results["mock"][n] = measure(m, n, "m", m.pid)
            except (TimeoutError, RuntimeError) as exc:
                results["mock"][n] = {"failed": str(exc)[-300:]}
    if os.environ.get("BENCH_GROUP_SCALE_KAFKA"):
        from bench.bench_kafka import ensure_topic as kafka_topic

        with _kafka_target() as kafka:
            kafka_topic(kafka, TOPIC, PARTITIONS)
            for n in sizes:
                try:
                    results["kafka"][n] = measure(kafka, n, "kafka", kafka.pid)
                except (TimeoutError, RuntimeError) as exc:
                    results["kafka"][n] = {"failed": str(exc)[-300:]}
    ctx.raw["group_scale"] = results

    def get(broker: str, n: int, key: str) -> float | None:
        value = results[broker].get(n, {}).get(key)
        return float(value) if value is not None else None

    rows: list[Row] = []
    largest = sizes[-1]
    for n in sizes:
        rows += [
            Row(f"{n} members: joins per second", "/s", get("kaflet", n, "joins_per_s"), get("mock", n, "joins_per_s"), True),
            Row(
                f"{n} members: last join -> stable",
                "s",
                get("kaflet", n, "stable_after_last_join_s"),
                get("mock", n, "stable_after_last_join_s"),
                False,
                Target("<=", 10.0) if n == largest else None,
            ),
            Row(
                f"{n} members: broker CPU per steady heartbeat",
                "us",
                get("kaflet", n, "broker_us_per_steady_heartbeat"),
                get("mock", n, "broker_us_per_steady_heartbeat"),
                False,
            ),
            Row(
                f"{n} members: broker RSS per member",
                "KB",
                get("kaflet", n, "rss_per_member_kb"),
                get("mock", n, "rss_per_member_kb"),
                False,
            ),
        ]
        if results["kafka"]:
            rows += [
                Row(
                    f"{n} members: joins per second",
                    "/s",
                    get("kaflet", n, "joins_per_s"),
                    get("kafka", n, "joins_per_s"),
                    True,
                    baseline_name="kafka",
                ),
                Row(
                    f"{n} members: last join -> stable",
                    "s",
                    get("kaflet", n, "stable_after_last_join_s"),
                    get("kafka", n, "stable_after_last_join_s"),
                    False,
                    baseline_name="kafka",
                ),
            ]
    # Against the middle size: at 10 members a run holds about 30 heartbeats, below what the 10 ms CPU clock
    # can tell apart from the idle broker's own timers.
    base = sizes[-2] if len(sizes) > 2 else sizes[0]
    small, big = get("kaflet", base, "broker_us_per_steady_heartbeat"), get("kaflet", largest, "broker_us_per_steady_heartbeat")
    rows.append(
        Row(
            f"steady heartbeat cost, {largest} members over {base}",
            "x",
            big / small if big and small else None,
            None,
            False,
            Target("<=", 1.5),
            compare=False,
        )
    )
    errors = {b: {n: r.get("errors", r.get("failed")) for n, r in per.items()} for b, per in results.items() if per}
    ctx.note(f"heartbeat interval {INTERVAL_MS} ms on every broker; {PARTITIONS} partitions; answer errors per run: {errors}")
    return rows
