"""Which consumer heartbeat interval kaflet answers by default (`--group-consumer-heartbeat-interval-ms`).

librdkafka (KIP-848) sends a full heartbeat again only after a coordinator error, not after a timed-out
request, so an assignment carried by an answer that comes too late is never seen again: a group can stay
unbalanced for good. The shorter the interval, the more heartbeats race one another on a loaded machine.
This measures, at 250, 500, 1000 and 2000 ms, on whatever load the machine has:

* groups: 10 librdkafka consumers (`group.protocol=consumer`) on a 12-partition topic, from the last
  subscribe() until each owns its share and the shares cover the 12 partitions once, then after the
  owner of partition 0 closes; a run fails when either takes more than 10 s. RUNS runs per interval.
* subscribe-many-updates: librdkafka's own 0045_subscribe_many_updates pattern, one consumer, 100 topics
  of 4 partitions, 100 subscriptions to five consecutive topics (every 7th followed at once by an
  unsubscribe), the assignment checked every 5th (it must be exactly the last subscription's, or empty)
  within 30 s; with and without a rebalance callback. MANY_RUNS runs per interval and variant.

The smallest interval with no failed run is the default (docs/decisions.md has the figures).
BENCH_HEARTBEAT_BURNERS=N adds N busy processes for the whole run, to load an otherwise idle machine.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import Any

from bench import wire
from bench.bench_consumer_groups import PARTITIONS, TOPIC, group_run
from bench.context import Context, Row
from bench.procs import run_worker

ABOUT = "the consumer heartbeat interval: 10-member librdkafka groups balanced within 10 s, and 0045_subscribe_many_updates"

INTERVALS = (250, 500, 1000, 2000)
RUNS = 20
MANY_RUNS = 3
LIMIT_S = 10.0


def group_or_failure(conn: Any, bootstrap: str, group: str, members: int) -> dict[str, Any]:
    try:
        return group_run(conn, bootstrap, group, members, LIMIT_S)
    except TimeoutError as exc:
        return {"failed": str(exc)}


def many_updates(conn: Any, bootstrap: str, base: str, with_rebalance_cb: bool) -> dict[str, Any]:
    """librdkafka's do_test_subscribe_many_updates, in confluent-kafka."""
    from confluent_kafka import Consumer

    topics = [f"{base}-topic{i}" for i in range(100)]
    assigned: set[tuple[str, int]] = set()

    def on_assign(c: Any, parts: list[Any]) -> None:
        assigned.update((p.topic, p.partition) for p in parts)
        if with_rebalance_cb:
            c.incremental_assign(parts)

    def on_revoke(c: Any, parts: list[Any]) -> None:
        assigned.difference_update((p.topic, p.partition) for p in parts)
        if with_rebalance_cb:
            c.incremental_unassign(parts)

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topics[0], "group.protocol": "consumer", "enable.auto.commit": False, "log_level": 3}
    )
    waits: list[float] = []
    try:
        for i in range(100):
            subscription = topics[i : i + 5]
            if with_rebalance_cb:
                consumer.subscribe(subscription, on_assign=on_assign, on_revoke=on_revoke)
            else:
                consumer.subscribe(subscription)
            unsubscribe = i % 7 == 0
            if unsubscribe:
                consumer.unsubscribe()
            if i % 5 == 0 or i == 99:
                expected = set() if unsubscribe else {(t, p) for t in subscription for p in range(4)}
                started = time.perf_counter()
                while True:
                    consumer.poll(0.05)
                    now = {(tp.topic, tp.partition) for tp in consumer.assignment()} if not with_rebalance_cb else set(assigned)
                    if now == expected:
                        waits.append(time.perf_counter() - started)
                        break
                    if time.perf_counter() - started > 30:
                        return {"failed": f"iteration {i}: assignment {len(now)} partitions, expected {len(expected)}", "waits": waits}
        return {"waits": waits}
    finally:
        consumer.close()


def _create_many(target: Any, base: str) -> None:
    from kafka.protocol.admin import CreateTopicsRequest

    topics = [
        CreateTopicsRequest.CreatableTopic(name=f"{base}-topic{i}", num_partitions=4, replication_factor=1, assignments=[], configs=[])
        for i in range(100)
    ]
    with wire.SyncClient(target.bootstrap, timeout=120) as client:
        resp = client.request(CreateTopicsRequest[2](topics=topics, timeout_ms=60_000, validate_only=False))
        if any(t.error_code for t in resp.topics):
            raise RuntimeError(f"CreateTopics: {resp}")


def _burn() -> None:
    while True:
        pass


def run(ctx: Context) -> list[Row]:
    burners = [
        multiprocessing.get_context("spawn").Process(target=_burn, daemon=True)
        for _ in range(int(os.environ.get("BENCH_HEARTBEAT_BURNERS") or 0))
    ]
    for b in burners:
        b.start()
    try:
        return _measure(ctx, len(burners))
    finally:
        for b in burners:
            b.terminate()
            b.join()


def _measure(ctx: Context, burners: int) -> list[Row]:
    # BENCH_HEARTBEAT_RUNS / BENCH_HEARTBEAT_MANY_RUNS shorten a run on a machine too busy for the full one.
    runs = int(os.environ.get("BENCH_HEARTBEAT_RUNS") or ctx.size(RUNS, 2))
    many_runs = int(os.environ.get("BENCH_HEARTBEAT_MANY_RUNS") or ctx.size(MANY_RUNS, 1))
    rows: list[Row] = []
    figures: dict[int, dict[str, Any]] = {}
    for interval in INTERVALS:
        groups: list[dict[str, Any]] = []
        many: list[dict[str, Any]] = []
        with ctx.kaflet("--default-partitions", str(PARTITIONS), "--group-consumer-heartbeat-interval-ms", str(interval)) as k:
            wire.ensure_topic(k, TOPIC, PARTITIONS)
            for r in range(runs):
                groups.append(run_worker(group_or_failure, k.bootstrap, f"hb-{interval}-{r}", 10, timeout=120))
            for r in range(many_runs):
                for cb in (False, True):
                    base = f"many-{interval}-{r}-{int(cb)}"
                    _create_many(k, base)
                    many.append(run_worker(many_updates, k.bootstrap, base, cb, timeout=1200))
        failed = [g for g in groups if "failed" in g]
        slow = [max(g["formed"], g["reformed"]) for g in groups if "failed" not in g]
        many_failed = [m for m in many if "failed" in m]
        waits = [w for m in many for w in m.get("waits", [])]
        figures[interval] = {"groups": groups, "many": many}
        rows += [
            Row(f"{interval} ms: groups failing to balance in 10 s", "runs", len(failed), None, False, compare=False, note=f"of {runs}"),
            Row(f"{interval} ms: slowest balanced group", "s", max(slow) if slow else None, None, False, compare=False),
            Row(
                f"{interval} ms: subscribe-many-updates runs failing",
                "runs",
                len(many_failed),
                None,
                False,
                compare=False,
                note=f"of {len(many)}",
            ),
            Row(f"{interval} ms: subscribe-many-updates longest wait", "s", max(waits) if waits else None, None, False, compare=False),
        ]
    ctx.raw["heartbeat_default"] = figures
    clean = [
        i for i in INTERVALS if not any("failed" in g for g in figures[i]["groups"]) and not any("failed" in m for m in figures[i]["many"])
    ]
    ctx.note(
        f"smallest interval with no failed run: {min(clean) if clean else 'none'} ms; {burners} busy processes; load average {_load()}"
    )
    return rows


def _load() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"
