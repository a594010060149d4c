"""The cost of metrics: request throughput with the Prometheus endpoint on versus `--no-metrics`,
and the time a scrape of /metrics takes with 1,000 groups x 10 committed partitions.

Both brokers run at once and each repetition loads them in turn, the order swapped every
repetition so that neither side always runs first. Besides the rate, the broker's CPU time per
request is reported for both sides: it is what metrics add to each request, and it moves less
than the rate when other processes take the machine's two cores.

With other agents on the machine the two processes' rates still differ by +-20% from run to
run, more than metrics cost. So the cost is also measured in one process: a broker in this
process answers batches of the same frames through one connection (a transport that only
counts bytes), with its metrics hooks installed and removed in turn, batch after batch; the
thread's CPU time per request on and off gives the overhead free of scheduling noise.
"""

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


def check_scrape(k: Kaflet, groups: int, partitions: int) -> None:
    """The scrape being timed really carries every group's series (one per committed partition)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{k.metrics_port}/metrics", timeout=30) as resp:
        body = resp.read().decode()
    lines = sum(1 for line in body.splitlines() if line.startswith('kafka_consumergroup_current_offset{consumergroup="bench-scrape-'))
    if lines != groups * partitions:
        raise RuntimeError(f"/metrics has {lines} bench-scrape offsets, expected {groups * partitions}")


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
            for rep in range(ctx.reps):
                order = (("on", on), ("off", off)) if rep % 2 == 0 else (("off", off), ("on", on))
                for name, target in order:
                    runs[name].append(ctx.load(target, frames))
            rows += load_rows(f"{label}, metrics on", runs["on"], runs["off"], Target("ratio>=", 0.95), baseline_name="off")[:3]
            rows.append(cpu_per_request_row(f"{label}, metrics on", runs["on"], runs["off"]))
        if len(loads) == 1:
            return [*rows, Row("/metrics scrape, 1,000 groups x 10 partitions", "ms", None, note="not served yet")]
        rows += scrape_rows(ctx, on)
    rows += in_process_rows(ctx)
    return rows


class _CountingTransport:
    """Just enough of an asyncio transport for a KafkaConnection: it counts what is written."""

    def __init__(self) -> None:
        self.written = 0
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def writelines(self, buffers: Any) -> None:
        for b in buffers:
            self.written += len(b)

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def in_process_rows(ctx: Context) -> list[Row]:
    import uvloop

    return uvloop.run(_in_process(ctx))


async def _in_process(ctx: Context) -> list[Row]:
    import tempfile

    from broker import Broker, Config
    from broker.network.connection import KafkaConnection
    from broker.node import logging as kaflet_logging

    kaflet_logging.configure("json", "warning")  # the broker in this process: no lines on the table

    partitions = bench_offset_commit.PARTITIONS
    loads = [
        (
            "Metadata",
            wire.encode(wire.metadata_request([bench_metadata.TOPIC])),
            [wire.encode(wire.metadata_request([bench_metadata.TOPIC]))],
        ),
        ("OffsetCommit 1p", None, bench_offset_commit.rings(ctx, 1)[0]),
    ]
    # Many short batches, on and off back to back (order swapped each round): both halves of a
    # pair see the same machine; the medians over the rounds drop the disturbed pairs.
    batch = ctx.size(300, 100)
    rounds = ctx.size(60, 4)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="kaflet-bench-") as data_dir:
        config = Config(port=0, data_dir=data_dir, metrics=True, metrics_port=0, default_partitions=partitions, log_level="warning")
        broker = Broker(config)
        await broker.start()
        try:
            await broker.coordinator.loaded.wait()
            broker.topics.create(bench_metadata.TOPIC, partitions)
            broker.topics.create(bench_offset_commit.TOPIC, partitions)
            conn = KafkaConnection(broker)
            transport = _CountingTransport()
            conn.connection_made(transport)  # type: ignore[arg-type]
            logs = broker.logs
            hooks = (broker.observe_response, logs.append_histogram, logs.observe_fsync)

            def install(enabled: bool) -> None:
                broker.observe_response = hooks[0] if enabled else None
                logs.set_observers(*(hooks[1:] if enabled else (None, None)))

            for label, _first, ring in loads:
                frames = [ring[i % len(ring)] for i in range(batch)]
                for f in frames[: len(ring)]:  # warm up: caches, walkers, groups
                    conn.data_received(f)
                cpu: dict[bool, list[float]] = {True: [], False: []}
                for r in range(rounds):
                    for enabled in (True, False) if r % 2 == 0 else (False, True):
                        install(enabled)
                        t0 = time.thread_time()
                        for f in frames:
                            conn.data_received(f)
                        cpu[enabled].append((time.thread_time() - t0) / batch * 1e6)
                if conn.closing:
                    raise RuntimeError(f"in-process {label}: the connection closed")
                on_us, off_us = median(cpu[True]), median(cpu[False])
                rows.append(
                    Row(
                        f"{label}, in-process CPU per request, metrics on",
                        "us",
                        on_us,
                        off_us,
                        higher_is_better=False,
                        target=Target("ratio>=", 0.95),
                        baseline_name="off",
                    )
                )
                ctx.raw[f"in_process_{label}_us"] = {"on": cpu[True], "off": cpu[False]}
            install(True)
            conn.close()
        finally:
            await broker.stop()
    return rows


def cpu_per_request_row(label: str, on: list[Any], off: list[Any]) -> Row:
    """Broker CPU microseconds per request (median over repetitions), on versus off."""

    def per_request(runs: list[Any]) -> float | None:
        values = [r.server_cpu / r.rate * 1e6 for r in runs if r.server_cpu and r.rate]
        return median(values) if values else None

    return Row(f"{label} broker CPU per request", "us", per_request(on), per_request(off), higher_is_better=False, baseline_name="off")


def scrape_rows(ctx: Context, k: Kaflet) -> list[Row]:
    n_groups = ctx.size(1000, 50)
    partitions = bench_offset_commit.PARTITIONS
    req = wire.offset_commit_request("", bench_offset_commit.TOPIC, {p: 500 + p for p in range(partitions)})
    frames = []
    for i in range(n_groups):
        req.group_id = f"bench-scrape-{i}"
        frames.append(wire.encode(req))
    run_load(k.bootstrap, [frames[c :: ctx.connections] for c in range(ctx.connections)], depth=ctx.depth, once=True)
    check_scrape(k, n_groups, partitions)  # also the first scrape, which imports prometheus_client: not counted
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
