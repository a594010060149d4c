"""The cost of metrics: request throughput with the Prometheus endpoint on versus `--no-metrics`,
and the time a scrape of /metrics takes with 1,000 groups x 10 committed partitions."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any

from bench import bench_metadata, bench_offset_commit, wire
from bench.context import Context, Row, Target, load_rows, median
from bench.loadgen import run_load
from bench.procs import Kaflet

ABOUT = "Metadata and OffsetCommit requests/s with metrics on vs --no-metrics (kaflet only); /metrics scrape time"


def scrape(k: Kaflet, timeout: float = 10.0) -> tuple[float, int] | None:
    """(seconds, body bytes) of one GET /metrics; None when nothing serves it."""
    url = f"http://127.0.0.1:{k.metrics_port}/metrics"
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
    return time.perf_counter() - t0, len(body)


def serves_metrics(k: Kaflet) -> bool:
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        if scrape(k) is not None:
            return True
        time.sleep(0.1)
    return False


def run(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    flags = ("--default-partitions", str(bench_offset_commit.PARTITIONS))
    with ctx.kaflet(*flags) as on, ctx.kaflet(*flags, "--no-metrics") as off:
        if not serves_metrics(on):
            ctx.note("kaflet: not served yet: /metrics")
            return [
                Row("requests/s, metrics on vs off", "ratio", None, note="not served yet"),
                Row("/metrics scrape", "ms", None, note="not served yet"),
            ]
        # Metadata, then OffsetCommit (1 partition) when served: same load on both, alternating.
        # Until kaflet serves CreateTopics, topics come from auto-creation, so the Metadata
        # topic has the commit topic's partition count here.
        partitions = bench_offset_commit.PARTITIONS
        loads = [("Metadata", lambda t: bench_metadata.prepare(t, partitions), bench_metadata.rings(ctx))]
        if not ctx.missing(on, bench_offset_commit.NEEDS):
            loads.append(("OffsetCommit 1p", bench_offset_commit.prepare, bench_offset_commit.rings(ctx, 1)))
        for label, prepare, frames in loads:
            prepare(on)
            prepare(off)
            runs: dict[str, list[Any]] = {"on": [], "off": []}
            for _ in range(ctx.reps):
                runs["on"].append(ctx.load(on, frames))
                runs["off"].append(ctx.load(off, frames))
            rows += load_rows(f"{label}, metrics on", runs["on"], runs["off"], Target("ratio>=", 0.95), baseline_name="off")[:3]
        if len(loads) == 1:
            return [*rows, Row("/metrics scrape, 1,000 groups x 10 partitions", "ms", None, note="not served yet")]
        rows += scrape_rows(ctx, on)
    return rows


def scrape_rows(ctx: Context, k: Kaflet) -> list[Row]:
    n_groups = ctx.size(1000, 50)
    partitions = bench_offset_commit.PARTITIONS
    req = wire.offset_commit_request("", bench_offset_commit.TOPIC, {p: 500 + p for p in range(partitions)})
    frames = []
    for i in range(n_groups):
        req.group_id = f"bench-scrape-{i}"
        frames.append(wire.encode(req))
    run_load(k.bootstrap, [frames[c :: ctx.connections] for c in range(ctx.connections)], depth=ctx.depth, once=True)
    scrape(k)  # the first scrape may build caches: not counted
    samples = [scrape(k) for _ in range(ctx.size(10, 3))]
    times = [s[0] * 1000 for s in samples if s is not None]
    size = max(s[1] for s in samples if s is not None)
    ctx.raw.update(scrape_ms=times, scrape_bytes=size)
    return [
        Row(
            f"/metrics scrape, {n_groups:,} groups x {partitions} partitions",
            "ms",
            median(times),
            higher_is_better=False,
            target=Target("<=", 200),
        ),
        Row("/metrics body size", "kB", size / 1000),
    ]
