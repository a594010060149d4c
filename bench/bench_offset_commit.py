"""OffsetCommit requests/s and latency from 8 pipelined connections, 1 and 10 partitions per request."""

from __future__ import annotations

from typing import Any

from bench import wire
from bench.context import Context, Row, Target, load_rows
from protocol.apis import ApiKey

ABOUT = "OffsetCommit v8 (simple commits) requests/s and p50/p99 from 8 pipelined connections, 1 and 10 partitions"

NEEDS: dict[ApiKey, int | None] = {ApiKey.OFFSET_COMMIT: 8, ApiKey.OFFSET_FETCH: 6}  # the versions our frames use
TOPIC = "bench-commits"
PARTITIONS = 10
GROUPS_PER_CONNECTION = 64


def rings(ctx: Context, partitions: int, prefix: str = "bench-oc") -> list[list[bytes]]:
    """Per connection, commits cycling over its own groups (spread over the coordinator shards)."""
    out = []
    for c in range(ctx.connections):
        ring = []
        for j in range(GROUPS_PER_CONNECTION):
            offsets = {p: 1000 + j for p in range(partitions)}
            ring.append(wire.encode(wire.offset_commit_request(f"{prefix}-{c}-{j}", TOPIC, offsets)))
        out.append(ring)
    return out


def prepare(target: Any) -> None:
    """The topic, and one commit read back, before the load (which only counts response frames)."""
    wire.ensure_topic(target, TOPIC, PARTITIONS)
    with wire.SyncClient(target.bootstrap) as client:
        errors = wire.offset_commit_errors(client.request(wire.offset_commit_request("bench-oc-check", TOPIC, {0: 42, 9: 43})))
        if errors:
            raise RuntimeError(f"{target.name}: OffsetCommit errors {errors}")
        resp = client.request(wire.offset_fetch_request("bench-oc-check", TOPIC, [0, 9]))
    got = [p.committed_offset for t in resp.topics for p in t.partitions]
    if got != [42, 43]:
        raise RuntimeError(f"{target.name}: OffsetFetch after commit returned {got}")


def run(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    partition_flag = ("--default-partitions", str(PARTITIONS))
    with ctx.kaflet(*partition_flag) as k, ctx.kaflet(*partition_flag, "--fsync", "always") as kf, ctx.mock() as m:
        missing = ctx.missing(k, NEEDS)
        targets = {"mock": m} if missing else {"kaflet": k, "kaflet-fsync": kf, "mock": m}
        for t in targets.values():
            prepare(t)
        for n in (1, 10):
            frames = rings(ctx, n)
            runs: dict[str, list[Any]] = {name: [] for name in ("kaflet", "kaflet-fsync", "mock")}
            for _ in range(ctx.reps):
                for name, t in targets.items():
                    runs[name].append(ctx.load(t, frames))
            label = f"OffsetCommit {n}p"
            rows += load_rows(label, runs["kaflet"], runs["mock"], Target("ratio>=", 0.6))
            rows += load_rows(f"{label} fsync=always", runs["kaflet-fsync"], runs["mock"], None)[:3]
        if missing:
            for row in rows:
                row.note = "not served yet"
    return rows
