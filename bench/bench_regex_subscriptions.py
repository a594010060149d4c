"""Regex subscriptions off the request path: another client's Metadata while a group's expressions resolve.

kaflet with 10,000 one-partition topics (`rx-00000` .. `rx-09999`). A prober sends Metadata for one topic, one
request at a time, for the whole run; meanwhile a KIP-848 group of 1,000 raw members (bench/group_members.py)
joins, member i subscribing to the distinct expression `rx-0{i:03d}\\d` (its ten topics), and stays until every
partition is owned once; then 100 more topics are created (each a refresh of the group's expressions). The
prober's latencies while the group forms and resolves are set against its latencies on the same broker before
the group exists: the target is a p99 under 20 ms.

The librdkafka mock resolves no expression on the broker side, so there is no side-by-side figure.
"""

from __future__ import annotations

import time
from typing import Any

from bench import wire
from bench.context import Context, Row, Target
from bench.group_members import GroupSpec, run_group
from bench.procs import Worker, run_worker

ABOUT = "1,000 members with distinct regexes over 10,000 topics: another client's Metadata p50/p99 while they resolve"

TOPICS = 10_000
MEMBERS = 1000
BATCH = 1000


def _create(bootstrap: str, names: list[str]) -> None:
    from kafka.protocol.admin import CreateTopicsRequest

    T = CreateTopicsRequest.CreatableTopic
    with wire.SyncClient(bootstrap, timeout=120) as client:
        for i in range(0, len(names), BATCH):
            topics = [T(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[]) for n in names[i : i + BATCH]]
            resp = client.request(CreateTopicsRequest[2](topics=topics, timeout_ms=60_000, validate_only=False))
            bad = [t for t in resp.topics if t.error_code]
            if bad:
                raise RuntimeError(f"CreateTopics: {bad[:3]}")


def probe(conn: Any, bootstrap: str, topic: str) -> dict[str, list[float]]:
    """Worker: Metadata for `topic`, one at a time, until told to stop; latencies (ms) per phase label."""
    request = wire.metadata_request([topic])
    phases: dict[str, list[float]] = {}
    phase = "idle"
    with wire.SyncClient(bootstrap, timeout=30) as client:
        conn.send("ready")
        while True:
            if conn.poll():
                msg = conn.recv()
                if msg == "stop":
                    return phases
                phase = msg
            started = time.perf_counter()
            client.request(request)
            phases.setdefault(phase, []).append((time.perf_counter() - started) * 1000)
            time.sleep(0.002)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(ctx: Context) -> list[Row]:
    topics = ctx.size(TOPICS, 1000)
    members = ctx.size(MEMBERS, 100)
    names = [f"rx-{k:05d}" for k in range(topics)]
    with ctx.kaflet() as k:
        started = time.perf_counter()
        _create(k.bootstrap, names)
        create_s = time.perf_counter() - started
        prober = Worker(probe, k.bootstrap, names[0])
        try:
            prober.recv(60)
            time.sleep(ctx.size(5, 1))
            prober.send("group")
            spec = GroupSpec(
                group="bench-regex",
                members=members,
                topics=None,
                regex_of=_regex,
                partitions=topics,
                connections=16,
                settle_s=120.0,
                steady_s=2.0,
                broker_pid=k.pid,
            )
            group = run_worker(run_group, k.bootstrap, spec, timeout=900)
            prober.send("creations")
            _create(k.bootstrap, [f"rx-late-{i:03d}" for i in range(100)])
            time.sleep(1.0)
            prober.send("stop")
            phases = prober.result(60)
        finally:
            prober.kill()
    ctx.raw["regex_subscriptions"] = {"group": group, "create_s": create_s, "probes": {p: len(v) for p, v in phases.items()}}
    idle, busy = phases.get("idle", []), phases.get("group", []) + phases.get("creations", [])
    ctx.note(
        f"{topics} topics created in {create_s:.1f} s; {members} members joined in {group['join_s']:.1f} s, stable "
        f"{group['stable_after_last_join_s']} s after the last join, {group['errors']} error answers; "
        f"{len(busy)} Metadata probes while the group formed and resolved, {len(idle)} before"
    )
    return [
        Row("another client's Metadata p50, group resolving", "ms", _pct(busy, 0.5), None, False, compare=False),
        Row("another client's Metadata p99, group resolving", "ms", _pct(busy, 0.99), None, False, Target("<=", 20.0), compare=False),
        Row("another client's Metadata max, group resolving", "ms", max(busy) if busy else None, None, False, compare=False),
        Row("another client's Metadata p99, no group", "ms", _pct(idle, 0.99), None, False, compare=False),
        Row(f"{members} regex members: last join -> stable", "s", group["stable_after_last_join_s"], None, False, compare=False),
    ]


def _regex(i: int) -> str:
    return f"rx-0{i % 1000:03d}\\d"
