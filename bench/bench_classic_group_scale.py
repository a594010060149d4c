"""Classic groups of hundreds and a thousand: raw JoinGroup/SyncGroup/Heartbeat/LeaveGroup members
(bench/classic_members.py), one connection each, in one client process, side by side with the librdkafka mock
and, with `BENCH_GROUP_SCALE_KAFKA=1`, Apache Kafka 4.4 (tests/support/kafka_reference.py).

One group per size (100 and 1,000 members) on one 1,000-partition topic; the members' leader computes a range
assignment. Every broker gets the same session timeout (30 s), rebalance timeout (60 s), heartbeat interval
(the members' own, 1 s) and initial rebalance delay (0: kaflet and Kafka by setting, the mock through its C
API). Figures:

* first rebalance: first JoinGroup sent -> every member synced at one generation, its partitions from
  SyncGroup covering the topic exactly once;
* second rebalance: one member's LeaveGroup sent -> every survivor synced again, covering the topic exactly
  once (survivors learn of the rebalance from a heartbeat, so up to one heartbeat interval is part of it);
* broker RSS per member (RSS once the first rebalance completed minus RSS before the first join).
"""

from __future__ import annotations

import os
from typing import Any

from bench import wire
from bench.classic_members import ClassicSpec, run_rebalances, versions_for
from bench.context import Context, Row
from bench.procs import Mock, run_worker

ABOUT = "classic groups of 100/1,000 raw members: first rebalance, rebalance after one leaves, RSS per member"

TOPIC = "bench-classic-scale"
PARTITIONS = 1000
SESSION_MS = 30_000
REBALANCE_MS = 60_000
HEARTBEAT_S = 1.0
# The rows of each size: (label, unit, the measured key).
FIGURES = (
    ("first rebalance", "s", "first_rebalance_s"),
    ("rebalance after one leaves", "s", "second_rebalance_s"),
    ("broker RSS per member", "KB", "rss_per_member_kb"),
)


def _sizes(ctx: Context) -> tuple[int, ...]:
    return (10,) if ctx.quick else (100, 1000)


def _session_ms(ctx: Context) -> int:
    # --quick: 3 s (kaflet's minimum lowered to it), as the mock waits a session timeout less 1 s for joiners.
    return 3000 if ctx.quick else SESSION_MS


def _heartbeat_s(ctx: Context) -> float:
    return 0.5 if ctx.quick else HEARTBEAT_S


def measure(
    target: Any, members: int, tag: str, pid: int, session_ms: int = SESSION_MS, heartbeat_s: float = HEARTBEAT_S
) -> dict[str, Any]:
    spec = ClassicSpec(
        group=f"bench-classic-{tag}-{members}",
        members=members,
        topic=TOPIC,
        partitions=PARTITIONS,
        # The mock advertises LeaveGroup up to v4 but answers every version in v0's layout: v1 there (as
        # librdkafka sends), v3 (a list of members, KIP-345) elsewhere.
        versions=versions_for(target.bootstrap, leave=1 if isinstance(target, Mock) else 3),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=REBALANCE_MS,
        heartbeat_s=heartbeat_s,
        deadline_s=REBALANCE_MS / 1000 + 60,
        broker_pid=pid,
    )
    out = run_worker(run_rebalances, target.bootstrap, spec, timeout=600)
    out["versions"] = spec.versions
    return out


def _kafka_target() -> Any:
    from bench.bench_kafka import KafkaTarget
    from tests.support.kafka_reference import KafkaReference

    target = KafkaTarget(kafka_defaults=False)
    target.ref = KafkaReference(offsets_partitions=50)  # initial rebalance delay 0, as kaflet's
    return target


def _guarded(results: dict[int, dict[str, Any]], target: Any, n: int, tag: str, session_ms: int, heartbeat_s: float) -> None:
    try:
        results[n] = measure(target, n, tag, target.pid, session_ms, heartbeat_s)
    except (TimeoutError, RuntimeError) as exc:
        results[n] = {"failed": str(exc)[-300:]}


def run(ctx: Context) -> list[Row]:
    sizes, session_ms, heartbeat_s = _sizes(ctx), _session_ms(ctx), _heartbeat_s(ctx)
    results: dict[str, dict[int, dict[str, Any]]] = {"kaflet": {}, "mock": {}, "kafka": {}}
    with ctx.kaflet("--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", str(min(session_ms, 6000))) as k:
        wire.ensure_topic(k, TOPIC, PARTITIONS)
        for n in sizes:
            results["kaflet"][n] = measure(k, n, "k", k.pid, session_ms, heartbeat_s)
    with ctx.mock(rebalance_delay_ms=0) as m:
        if not m.controllable:
            ctx.note("the mock's initial rebalance delay could not be set: it uses its default, 3000 ms")
        wire.ensure_topic(m, TOPIC, PARTITIONS)
        for n in sizes:
            _guarded(results["mock"], m, n, "m", session_ms, heartbeat_s)
    if os.environ.get("BENCH_GROUP_SCALE_KAFKA"):
        from bench.bench_kafka import ensure_topic as kafka_topic

        with _kafka_target() as kafka:
            kafka_topic(kafka, TOPIC, PARTITIONS)
            for n in sizes:
                _guarded(results["kafka"], kafka, n, "kafka", session_ms, heartbeat_s)
    ctx.raw["classic_group_scale"] = results

    def get(broker: str, n: int, key: str) -> float | None:
        value = results[broker].get(n, {}).get(key)
        return float(value) if value is not None else None

    rows: list[Row] = []
    for n in sizes:
        for baseline in ("mock", "kafka"):
            if not results[baseline]:
                continue
            rows += [
                Row(f"{n} members: {label}", unit, get("kaflet", n, key), get(baseline, n, key), False, baseline_name=baseline)
                for label, unit, key in FIGURES
            ]
    outcome = {
        b: {
            n: r.get("failed") or {"errors": r.get("errors"), "generations": [r.get("generation"), r.get("second_generation")]}
            for n, r in per.items()
        }
        for b, per in results.items()
        if per
    }
    ctx.note(
        f"session {session_ms} ms, rebalance {REBALANCE_MS} ms, heartbeat {heartbeat_s:g} s, initial rebalance delay 0 on every "
        f"broker; {PARTITIONS} partitions; per run: {outcome}"
    )
    return rows
