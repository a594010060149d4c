"""Group formation and re-formation with librdkafka consumers (classic protocol, eager range assignor).

N consumers subscribe to a 20-partition topic; the clock runs from the last subscribe() until
the group is stable: every member has been assigned (its on_assign came after its last
on_revoke) and the assignments cover the 20 partitions exactly once. Then the member owning
partition 0 closes (LeaveGroup, in a thread so the others keep being polled) and the clock
runs until every survivor has been assigned again and they cover the 20 partitions.

Both brokers get the same group.initial.rebalance.delay.ms (kaflet's default, 0): kaflet by
flag, the mock through `rd_kafka_mock_group_initial_rebalance_delay_ms()` (no config reaches it).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from bench import wire
from bench.context import Context, Row, Target
from bench.procs import run_worker
from protocol.apis import ApiKey

ABOUT = "time until 10/50/100 librdkafka consumers own 20 partitions, and until survivors do after one leaves"

NEEDS: dict[ApiKey, int | None] = {
    ApiKey.FIND_COORDINATOR: None,
    ApiKey.JOIN_GROUP: None,
    ApiKey.SYNC_GROUP: None,
    ApiKey.HEARTBEAT: None,
    ApiKey.LEAVE_GROUP: None,
    ApiKey.OFFSET_FETCH: None,
}
TOPIC = "bench-groups"
PARTITIONS = 20
SESSION_MS = 6000  # Kafka's group.min.session.timeout.ms; the mock waits session - 1 s for late joiners
HEARTBEAT_MS = 1000


def group_run(conn: Any, bootstrap: str, group: str, members: int, timeout: float) -> dict[str, Any]:
    """Worker: form the group, then close one member; the two times, in seconds."""
    from confluent_kafka import Consumer

    owned: list[set[int] | None] = [None] * members  # None: not (re)assigned since the last revoke
    assigns = [0] * members
    consumers = []
    for i in range(members):

        def on_assign(c: Any, parts: list[Any], i: int = i) -> None:
            owned[i] = {p.partition for p in parts}
            assigns[i] += 1

        def on_revoke(c: Any, parts: list[Any], i: int = i) -> None:
            owned[i] = None

        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "partition.assignment.strategy": "range",
                "enable.auto.commit": False,
                "log_level": 3,  # errors only: a hundred consumers' warnings would bury the results
            }
        )
        consumers.append((c, on_assign, on_revoke))

    def stable(live: list[int], since: list[int] | None) -> bool:
        total: set[int] = set()
        count = 0
        for i in live:
            parts = owned[i]
            if parts is None or (since is not None and assigns[i] <= since[i]):
                return False
            total |= parts
            count += len(parts)
        return count == PARTITIONS and len(total) == PARTITIONS

    def poll_until(live: list[int], since: list[int] | None, started: float) -> float:
        deadline = started + timeout
        while not stable(live, since):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"not stable after {timeout:.0f} s: {sum(o is not None for o in owned)} of {len(live)} assigned")
            for i in live:
                consumers[i][0].poll(0)
            time.sleep(0.001)
        return time.perf_counter() - started

    first = time.perf_counter()
    for c, on_assign, on_revoke in consumers:
        c.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
    last = time.perf_counter()
    everyone = list(range(members))
    formed = poll_until(everyone, None, last)
    rounds = max(assigns)  # generations the longest-standing member went through

    victim = next(i for i in everyone if 0 in (owned[i] or ()))
    survivors = [i for i in everyone if i != victim]
    before = list(assigns)
    closed = time.perf_counter()
    threading.Thread(target=consumers[victim][0].close, daemon=True).start()
    reformed = poll_until(survivors, before, closed)
    # No orderly close of the rest: each close would be another rebalance. The process exits.
    return {"formed": formed, "formed_from_first": formed + (last - first), "reformed": reformed, "rounds": rounds}


def measure(ctx: Context, members: int, target: Any) -> dict[str, Any]:
    return run_worker(group_run, target.bootstrap, f"bench-group-{members}", members, 60.0, timeout=180)


def run(ctx: Context) -> list[Row]:
    sizes = (10,) if ctx.quick else (10, 50, 100)
    delay = ctx.rebalance_delay_ms
    rows: list[Row] = []
    missing: list[str] | None = None
    for members in sizes:
        runs: dict[str, list[dict[str, Any]]] = {"kaflet": [], "mock": []}
        for _ in range(ctx.reps):
            # Fresh brokers each time: no leftover members from the previous run.
            with ctx.kaflet("--default-partitions", str(PARTITIONS), "--group-initial-rebalance-delay-ms", str(delay)) as k:
                if missing is None:
                    missing = ctx.missing(k, NEEDS)
                if not missing:
                    wire.ensure_topic(k, TOPIC, PARTITIONS)
                    runs["kaflet"].append(measure(ctx, members, k))
            with ctx.mock(rebalance_delay_ms=delay) as m:
                if not m.controllable:
                    ctx.note("the mock's initial rebalance delay could not be set: it uses its default, 3000 ms")
                wire.ensure_topic(m, TOPIC, PARTITIONS)
                runs["mock"].append(measure(ctx, members, m))
        rows += group_rows(members, runs, "not served yet" if missing else "")
        ctx.raw[f"{members}_members"] = runs
    ctx.raw.update(session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS, initial_rebalance_delay_ms=delay)
    ctx.note(
        f"session.timeout.ms {SESSION_MS}, heartbeat.interval.ms {HEARTBEAT_MS}, group.initial.rebalance.delay.ms {delay} on both; "
        "the mock waits session.timeout - 1 s for members to join once a group has formed, so its figures are long by design"
    )
    return rows


def group_rows(members: int, runs: dict[str, list[dict[str, Any]]], note: str) -> list[Row]:
    from bench.context import median

    def mid(name: str, key: str) -> float | None:
        return median([r[key] for r in runs[name]]) if runs[name] else None

    formed_target = {10: Target("<=", 1.0), 100: Target("<=", 3.0)}.get(members)
    reformed_target = Target("<=", HEARTBEAT_MS / 1000 + 0.25) if members == 10 else None
    return [
        Row(
            f"{members} members: last subscribe -> stable",
            "s",
            mid("kaflet", "formed"),
            mid("mock", "formed"),
            False,
            formed_target,
            note=note,
        ),
        Row(
            f"{members} members: first subscribe -> stable",
            "s",
            mid("kaflet", "formed_from_first"),
            mid("mock", "formed_from_first"),
            False,
            note=note,
        ),
        Row(
            f"{members} members: one closes -> stable",
            "s",
            mid("kaflet", "reformed"),
            mid("mock", "reformed"),
            False,
            reformed_target,
            note=note,
        ),
    ]
