"""KIP-848 consumer groups (`group.protocol=consumer`) with librdkafka consumers, side by side with
the librdkafka mock cluster, which serves ConsumerGroupHeartbeat too.

* N consumers (4, 10, 100) subscribe to a 12-partition topic; the clock runs from the last
  subscribe() until every member owns its share and the shares cover the 12 partitions exactly
  once; then the owner of partition 0 closes and the clock runs until the survivors cover them.
  Both brokers at their own default heartbeat interval (kaflet 250 ms, the mock's), then both at
  Kafka's 5000 ms.
* Heartbeats per second: steady-state ConsumerGroupHeartbeats (a Stable member, nothing changed:
  what a consumer sends every interval) from pipelined connections, and on kaflet the classic
  Heartbeat of a Stable classic member, for the CPU a heartbeat costs. kaflet runs every shard on
  one event loop, so one shard's rate is the broker's.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from bench import wire
from bench.context import Context, Row, Target, load_rows
from bench.procs import run_worker
from protocol.apis import ApiKey

ABOUT = "KIP-848: time until 4/10/100 consumer-protocol librdkafka consumers own 12 partitions, after a close; heartbeats/s"

NEEDS: dict[ApiKey, int | None] = {ApiKey.CONSUMER_GROUP_HEARTBEAT: 1}  # the mock serves v1 only
TOPIC = "bench-cgroups"
PARTITIONS = 12
KAFKA_HEARTBEAT_MS = 5000
GROUPS_PER_CONNECTION = 32


def group_run(conn: Any, bootstrap: str, group: str, members: int, timeout: float) -> dict[str, Any]:
    """Worker: form the group, then close one member; the two times, in seconds."""
    from confluent_kafka import Consumer

    owned: list[set[int]] = [set() for _ in range(members)]
    consumers = []
    for i in range(members):

        def on_assign(c: Any, parts: list[Any], i: int = i) -> None:
            owned[i] |= {p.partition for p in parts}

        def on_revoke(c: Any, parts: list[Any], i: int = i) -> None:
            owned[i] -= {p.partition for p in parts}

        c = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer", "enable.auto.commit": False, "log_level": 3}
        )
        consumers.append((c, on_assign, on_revoke))

    def stable(live: list[int]) -> bool:
        # Balanced (as both brokers' uniform assignors end) and covering every partition once.
        low, high = PARTITIONS // len(live), -(-PARTITIONS // len(live))
        total: set[int] = set()
        count = 0
        for i in live:
            n = len(owned[i])
            if not low <= n <= high:
                return False
            total |= owned[i]
            count += n
        return count == PARTITIONS and len(total) == PARTITIONS

    def poll_until(live: list[int], started: float) -> float:
        deadline = started + timeout
        while not stable(live):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"not stable after {timeout:.0f} s: {sorted(len(owned[i]) for i in live)}")
            for i in live:
                consumers[i][0].poll(0)
            time.sleep(0.001)
        return time.perf_counter() - started

    for c, on_assign, on_revoke in consumers:
        c.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
    last = time.perf_counter()
    everyone = list(range(members))
    formed = poll_until(everyone, last)
    victim = next(i for i in everyone if 0 in owned[i])
    survivors = [i for i in everyone if i != victim]
    closed = time.perf_counter()
    threading.Thread(target=consumers[victim][0].close, daemon=True).start()
    reformed = poll_until(survivors, closed)
    return {"formed": formed, "reformed": reformed}


def measure(members: int, target: Any, tag: str) -> dict[str, Any]:
    return run_worker(group_run, target.bootstrap, f"bench-cg-{tag}-{members}", members, 90.0, timeout=240)


def _median(values: list[float]) -> float | None:
    from bench.context import median

    return median(values) if values else None


def formation_rows(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    sizes = (4,) if ctx.quick else (4, 10, 100)
    for label, kaflet_flags, mock_interval in (
        ("defaults", (), None),
        ("5000 ms heartbeats", ("--group-consumer-heartbeat-interval-ms", str(KAFKA_HEARTBEAT_MS)), KAFKA_HEARTBEAT_MS),
    ):
        for members in sizes:
            if label != "defaults" and members == 100:
                continue  # minutes per repetition at 5 s a step; 4 and 10 show the trend
            runs: dict[str, list[dict[str, Any]]] = {"kaflet": [], "mock": []}
            for _ in range(ctx.reps):
                with ctx.kaflet("--default-partitions", str(PARTITIONS), *kaflet_flags) as k:
                    if ctx.missing(k, NEEDS):
                        return rows
                    wire.ensure_topic(k, TOPIC, PARTITIONS)
                    runs["kaflet"].append(measure(members, k, "k"))
                with ctx.mock(consumer_heartbeat_interval_ms=mock_interval) as m:
                    wire.ensure_topic(m, TOPIC, PARTITIONS)
                    runs["mock"].append(measure(members, m, "m"))
            ctx.raw[f"{label}_{members}_members"] = runs
            at_defaults = label == "defaults"
            formed_target = Target("<=", 1.0) if at_defaults and members == 10 else (Target("ratio>=", 1.0) if not at_defaults else None)
            reformed_target = Target("<=", 1.0) if at_defaults and members == 10 else (Target("ratio>=", 1.0) if not at_defaults else None)
            rows += [
                Row(
                    f"{members} members ({label}): last subscribe -> stable",
                    "s",
                    _median([r["formed"] for r in runs["kaflet"]]),
                    _median([r["formed"] for r in runs["mock"]]),
                    False,
                    formed_target,
                ),
                Row(
                    f"{members} members ({label}): one closes -> stable",
                    "s",
                    _median([r["reformed"] for r in runs["kaflet"]]),
                    _median([r["reformed"] for r in runs["mock"]]),
                    False,
                    reformed_target,
                ),
            ]
    return rows


# -- heartbeats per second ---------------------------------------------------------------------


def _join_members(bootstrap: str, connection: int) -> list[tuple[str, str, int]]:
    """One Stable consumer-protocol member per group: (group, member id, epoch)."""
    from protocol.kip848 import ConsumerGroupHeartbeatRequest

    out = []
    with wire.SyncClient(bootstrap) as client:
        for j in range(GROUPS_PER_CONNECTION):
            group, member = f"bench-hb-{connection}-{j}", str(uuid.uuid4())
            req = ConsumerGroupHeartbeatRequest(
                version=1,
                group_id=group,
                member_id=member,
                member_epoch=0,
                instance_id=None,
                rack_id=None,
                rebalance_timeout_ms=60_000,
                subscribed_topic_names=[TOPIC],
                subscribed_topic_regex="",  # as librdkafka sends it (the mock asserts both or neither are null)
                server_assignor=None,
                topic_partitions=[],
            )
            resp = client.request(req)
            if resp.error_code:
                raise RuntimeError(f"ConsumerGroupHeartbeat join: error {resp.error_code} {resp.error_message}")
            owned = [
                ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
                for tp in resp.assignment.topic_partitions
            ]
            # One full heartbeat reporting the assignment: the member is then Stable and reconciled.
            req = ConsumerGroupHeartbeatRequest(
                version=1,
                group_id=group,
                member_id=resp.member_id or member,
                member_epoch=resp.member_epoch,
                instance_id=None,
                rack_id=None,
                rebalance_timeout_ms=-1,
                subscribed_topic_names=None,
                subscribed_topic_regex=None,
                server_assignor=None,
                topic_partitions=owned,
            )
            resp = client.request(req)
            out.append((group, req.member_id, resp.member_epoch))
    return out


def consumer_heartbeat_rings(ctx: Context, target: Any) -> list[list[bytes]]:
    from protocol.kip848 import ConsumerGroupHeartbeatRequest

    rings = []
    for c in range(ctx.connections):
        ring = []
        for group, member, epoch in _join_members(target.bootstrap, c):
            req = ConsumerGroupHeartbeatRequest(
                version=1,
                group_id=group,
                member_id=member,
                member_epoch=epoch,
                instance_id=None,
                rack_id=None,
                rebalance_timeout_ms=-1,
                subscribed_topic_names=None,
                subscribed_topic_regex=None,
                server_assignor=None,
                topic_partitions=None,
            )
            ring.append(wire.encode(req))
        rings.append(ring)
    return rings


def classic_heartbeat_rings(ctx: Context, target: Any) -> list[list[bytes]]:
    """One Stable classic member per group (JoinGroup v5 + SyncGroup), then its Heartbeat v4."""
    import struct

    from kafka.protocol.consumer import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest

    topic = TOPIC.encode()
    metadata = struct.pack(">hih", 0, 1, len(topic)) + topic + struct.pack(">i", -1)
    rings = []
    for c in range(ctx.connections):
        ring = []
        with wire.SyncClient(target.bootstrap) as client:
            for j in range(GROUPS_PER_CONNECTION):
                group = f"bench-classic-hb-{c}-{j}"
                protocols = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=metadata)]
                join = JoinGroupRequest[5](
                    group_id=group,
                    session_timeout_ms=45_000,
                    rebalance_timeout_ms=60_000,
                    member_id="",
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=protocols,
                )
                resp = client.request(join)
                if resp.error_code == 79:
                    join.member_id = resp.member_id
                    resp = client.request(join)
                if resp.error_code:
                    raise RuntimeError(f"JoinGroup: error {resp.error_code}")
                sync = SyncGroupRequest[3](
                    group_id=group,
                    generation_id=resp.generation_id,
                    member_id=resp.member_id,
                    group_instance_id=None,
                    assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=resp.member_id, assignment=b"")],
                )
                if client.request(sync).error_code:
                    raise RuntimeError("SyncGroup failed")
                hb = HeartbeatRequest[4](group_id=group, generation_id=resp.generation_id, member_id=resp.member_id, group_instance_id=None)
                ring.append(wire.encode(hb))
        rings.append(ring)
    return rings


def heartbeat_rows(ctx: Context) -> list[Row]:
    with ctx.kaflet("--default-partitions", str(PARTITIONS)) as k, ctx.mock() as m:
        if ctx.missing(k, NEEDS):
            return []
        for t in (k, m):
            wire.ensure_topic(t, TOPIC, PARTITIONS)
        k_rings, m_rings, classic_rings = (
            consumer_heartbeat_rings(ctx, k),
            consumer_heartbeat_rings(ctx, m),
            classic_heartbeat_rings(ctx, k),
        )
        runs: dict[str, list[Any]] = {"kaflet": [], "mock": [], "classic": []}
        for _ in range(ctx.reps):
            runs["kaflet"].append(ctx.load(k, k_rings))
            runs["mock"].append(ctx.load(m, m_rings))
            runs["classic"].append(ctx.load(k, classic_rings))
    rows = load_rows("ConsumerGroupHeartbeat (steady)", runs["kaflet"], runs["mock"], Target("ratio>=", 0.5))
    # The same broker, the classic Heartbeat as the baseline: a KIP-848 heartbeat should cost no more.
    rows += load_rows("ConsumerGroupHeartbeat vs classic Heartbeat", runs["kaflet"], runs["classic"], Target("ratio>=", 1.0), "classic")[:1]
    return rows


def run(ctx: Context) -> list[Row]:
    rows = formation_rows(ctx)
    rows += heartbeat_rows(ctx)
    ctx.note(
        f"{PARTITIONS} partitions; defaults: kaflet --group-consumer-heartbeat-interval-ms 250, the mock its own; "
        f"then both at Kafka's {KAFKA_HEARTBEAT_MS} ms. Heartbeats: {GROUPS_PER_CONNECTION} one-member groups per connection"
    )
    return rows
