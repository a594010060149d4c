"""Start-up replay of a large __consumer_offsets, and the memory a committed offset costs (kaflet only).

The log is filled through the protocol: one OffsetCommit per group carrying all its partitions,
pipelined over 8 connections. The broker is then stopped (SIGTERM) and started again on the
same data dir; the clock runs from process start until every coordinator shard serves the
committed offsets (one sampled group per shard, polled with OffsetFetch), and also to the
"broker ready" line. The mock has no persistence, so there is no baseline.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from bench import wire
from bench.context import Context, Row, Target
from bench.loadgen import run_load
from protocol.apis import ApiKey
from protocol.javahash import partition_for

ABOUT = "restart replaying 1,000,000 commits over 10,000 groups (kaflet only); RSS per committed offset"

NEEDS: dict[ApiKey, int | None] = {ApiKey.OFFSET_COMMIT: 8, ApiKey.OFFSET_FETCH: 6}  # the versions our frames use
TOPIC = "bench-replay"
SHARDS = 50  # kaflet's default --offsets-partitions
MB = 1_000_000


def commit_frames(groups: list[str], partitions: int) -> list[bytes]:
    req = wire.offset_commit_request("", TOPIC, {p: 1_000_000 + p for p in range(partitions)})
    frames = []
    for g in groups:
        req.group_id = g
        frames.append(wire.encode(req))
    return frames


def sample_groups(groups: list[str]) -> list[str]:
    """One group per coordinator shard (as many shards as the groups reach)."""
    by_shard: dict[int, str] = {}
    for g in groups:
        by_shard.setdefault(partition_for(g, SHARDS), g)
    return list(by_shard.values())


def wait_loaded(bootstrap: str, sample: list[str], partitions: int, timeout: float) -> None:
    """Until OffsetFetch returns every sampled group's committed offsets (no load-in-progress)."""
    want = [1_000_000 + p for p in range(partitions)]
    pending = list(sample)
    deadline = time.monotonic() + timeout
    with wire.SyncClient(bootstrap) as client:
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} sampled groups still not served after {timeout:.0f} s")
            still = []
            for g in pending:
                resp = client.request(wire.offset_fetch_request(g, TOPIC, list(range(partitions))))
                got = [p.committed_offset for t in resp.topics for p in t.partitions if not p.error_code]
                if resp.error_code or got != want:
                    still.append(g)
            pending = still
            if pending:
                time.sleep(0.005)


def run(ctx: Context) -> list[Row]:
    n_groups, partitions = (200, 10) if ctx.quick else (10_000, 100)
    records = n_groups * partitions
    data_dir = tempfile.mkdtemp(prefix="kaflet-bench-replay-")
    try:
        with ctx.kaflet("--default-partitions", str(partitions), data_dir=data_dir) as k:
            if ctx.missing(k, NEEDS):
                return [
                    Row(f"replay of {records:,} commits: start -> offsets served", "s", None, target=Target("<=", 3), note="not served yet")
                ]
            wire.ensure_topic(k, TOPIC, partitions)
            time.sleep(0.5)
            rss_empty = k.rss()
            groups = [f"bench-replay-{i}" for i in range(n_groups)]
            frames = commit_frames(groups, partitions)
            rings = [frames[c :: ctx.connections] for c in range(ctx.connections)]
            fill = run_load(k.bootstrap, rings, depth=ctx.depth, once=True, server_pid=k.pid)
            sample = sample_groups(groups)
            wait_loaded(k.bootstrap, sample, partitions, 30)
            time.sleep(0.5)
            rss_live = k.rss()
            k.stop(timeout=120)
            log_bytes = sum(f.stat().st_size for f in Path(data_dir).rglob("*") if "__consumer_offsets" in str(f) and f.is_file())
            k.start(timeout=300)
            ready_s = k.start_seconds
            wait_loaded(k.bootstrap, sample, partitions, 20 if ctx.quick else 120)
            loaded_s = time.perf_counter() - k.spawned_at
            time.sleep(0.5)
            rss_loaded = k.rss()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    ctx.raw.update(
        records=records, groups=n_groups, rss_empty=rss_empty, rss_live=rss_live, rss_loaded=rss_loaded, fill_seconds=fill.seconds
    )
    ctx.note(
        f"{n_groups:,} groups x {partitions} partitions = {records:,} commit records; the mock keeps no state across a restart (no baseline)"
    )
    return [
        Row(f"fill: commits written (OffsetCommit x{partitions})", "rec/s", records / fill.seconds),
        Row("__consumer_offsets on disk", "MB", log_bytes / MB),
        Row("restart: process start -> ready line", "s", ready_s),
        Row("restart: process start -> offsets served", "s", loaded_s, target=Target("<=", 3)),
        Row("RSS, empty broker", "MB", rss_empty / MB),
        Row("RSS after the fill (live)", "MB", rss_live / MB),
        Row("RSS after the replay", "MB", rss_loaded / MB),
        Row("bytes per committed offset (live)", "B", (rss_live - rss_empty) / records),
        Row("bytes per committed offset (replayed)", "B", (rss_loaded - rss_empty) / records),
    ]
