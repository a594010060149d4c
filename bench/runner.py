"""`python -m bench [NAME ...]`: run benchmarks against kaflet and the librdkafka mock, print and save figures."""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench import procs
from bench.context import Context, Row, fmt

# Run order: cheap first. Each module has ABOUT and run(ctx) -> list[Row].
BENCHMARKS = [
    "startup",
    "rss",
    "connections",
    "metadata",
    "produce",
    "consume",
    "latency",
    "offset_commit",
    "offsets_replay",
    "groups",
    "consumer_groups",
    "group_scale",
    "classic_group_scale",
    "regex_subscriptions",
    "heartbeat_default",
    "metrics",
    "assignors",
    "transactions",
    "cluster",
    "fuzz",
    "security",
    "spark",
    "kafka",
    "share",
    "streams",
]

RESULTS_DIR = Path(__file__).parent / "results"


def load(name: str) -> Any:
    return importlib.import_module(f"bench.bench_{name}")


def _row_line(row: Row) -> str:
    ratio = "-" if row.ratio is None else f"{row.ratio:.2f} ({row.ratio_kind})"
    target = row.target.text(row.unit) if row.target else "-"
    met = {True: "yes", False: "NO", None: "-"}[row.met]
    base = fmt(row.baseline)
    if row.baseline is not None and row.baseline_name != "mock":
        base += f" [{row.baseline_name}]"
    kaflet = fmt(row.kaflet) if row.kaflet is not None else (row.note or "-")
    return f"  {row.name:<48} {row.unit:<6} {kaflet:>12} {base:>12} {ratio:>13} {target:>14} {met:>4}"


HEADER = f"  {'figure':<48} {'unit':<6} {'kaflet':>12} {'mock':>12} {'ratio':>13} {'target':>14} {'met':>4}"


def _git_commit(where: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True, cwd=where)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="kaflet benchmarks, each run side by side with the librdkafka mock cluster. "
        "Ratios are kaflet relative to the baseline, > 1 means kaflet is better: k/b = kaflet/baseline "
        "(higher is better), b/k = baseline/kaflet (lower is better).",
    )
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all): {', '.join(BENCHMARKS)}")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and short runs: a smoke test, not a measurement")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per figure, the median is reported (default 3, quick 1)")
    parser.add_argument("--duration", type=float, default=3.0, help="measured seconds of each request-rate load (default 3)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of load before measuring (default 1)")
    parser.add_argument("--depth", type=int, default=16, help="requests in flight per connection (default 16)")
    parser.add_argument("--load-processes", type=int, default=1, help="load generator processes (default 1; this machine has 2 cores)")
    parser.add_argument("--pace-ms", type=float, default=0.5, help="load generator sleep between polls, ms (default 0.5)")
    parser.add_argument(
        "--rebalance-delay-ms",
        type=int,
        default=0,
        help="group.initial.rebalance.delay.ms for both brokers in 'groups' (default 0, kaflet's)",
    )
    parser.add_argument(
        "--kaflet-dir", type=Path, default=None, help="run kaflet from another checkout (e.g. an unmerged branch's worktree)"
    )
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="where the JSON results go (default bench/results)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.list:
        for name in BENCHMARKS:
            print(f"{name:<16} {load(name).ABOUT}")
        return 0
    names = args.names or BENCHMARKS
    if args.kaflet_dir is not None:
        procs.KAFLET_DIR = str(args.kaflet_dir.resolve())
    started = datetime.datetime.now(datetime.UTC)
    results: dict[str, Any] = {
        "started": started.isoformat(timespec="seconds"),
        "git": _git_commit(Path(__file__).parent),
        "kaflet_git": _git_commit(args.kaflet_dir or Path(__file__).parent),
        "host": {"cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg(), "python": platform.python_version()},
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "benchmarks": {},
    }
    print(f"kaflet benchmarks ({'quick' if args.quick else 'full'}), {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}")
    if procs.KAFLET_DIR:
        print(f"kaflet from {procs.KAFLET_DIR} ({results['kaflet_git']})")
    print("ratio: kaflet relative to the baseline, > 1 is better for kaflet (k/b = kaflet/baseline, b/k = baseline/kaflet)")
    failed = False
    for name in names:
        module = load(name)
        print(f"\n{name}: {module.ABOUT}")
        ctx = Context(
            quick=args.quick,
            reps=args.reps or (1 if args.quick else 3),
            duration=args.duration,
            warmup=args.warmup,
            depth=args.depth,
            pace=args.pace_ms / 1000,
            load_processes=args.load_processes,
            rebalance_delay_ms=args.rebalance_delay_ms,
        )
        t0 = time.monotonic()
        entry: dict[str, Any] = {}
        try:
            rows = module.run(ctx)
        except Exception:
            failed = True
            entry["error"] = traceback.format_exc()
            print("  ERROR:\n" + "\n".join("    " + line for line in entry["error"].rstrip().splitlines()))
            rows = []
        if rows:
            print(HEADER)
            for row in rows:
                print(_row_line(row))
        entry.update(rows=[r.as_json() for r in rows], notes=ctx.notes, raw=ctx.raw, seconds=round(time.monotonic() - t0, 1))
        results["benchmarks"][name] = entry
    args.results_dir.mkdir(parents=True, exist_ok=True)
    path = args.results_dir / f"{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nresults: {path}")
    return 1 if failed else 0
