"""Fuzz throughput and the broker's RSS curve over 1 M mutated frames (issue 11).

The frames are tests/support/fuzz.py's: seeded mutations of valid requests of every served
(api, version), one connection per frame that gets closed, reused while the broker answers.
Run in chunks of 50,000 with a fresh seed each; after every chunk the broker's RSS is sampled
and its log checked (an ERROR or a traceback would void the run). The figure is bounded by the
fuzzing client (Python, in this process) as much as by the broker: it is a cost, not a speed
target. There is no mock figure: librdkafka's mock cluster is not a target for malformed input.
"""

from __future__ import annotations

import asyncio

from bench.context import Context, Row, Target

ABOUT = "mutated frames of every served (api, version): frames/s, and the broker's RSS over 1 M frames (kaflet only)"

MB = 1_000_000
CHUNK = 50_000


def run(ctx: Context) -> list[Row]:
    from tests.support.fuzz import bad_lines, fuzz, seed_corpus

    total = ctx.size(1_000_000, 4_000)
    chunk = min(CHUNK, total)
    corpus = seed_corpus(1)
    curve: list[tuple[int, float]] = []
    sent = 0
    seconds = 0.0
    bad: list[str] = []
    with ctx.kaflet("--offsets-partitions", "3", "--no-auto-create-topics", "--no-metrics") as k:
        host, port = k.bootstrap.rsplit(":", 1)
        curve.append((0, k.rss() / MB))
        chunk_no = 0
        while sent < total:
            chunk_no += 1
            stats = asyncio.run(
                fuzz(host, int(port), k.pid, rng_seed=chunk_no, frames=min(chunk, total - sent), seconds=3600, corpus=corpus)
            )
            sent += stats.sent
            seconds += stats.seconds
            curve.append((sent, k.rss() / MB))
            bad += bad_lines(k.lines)
            k.lines.clear()  # a million warning lines would otherwise fill this process
            k.records.clear()
            ctx.say(f"  {sent} frames, {sent / seconds:.0f} frames/s, RSS {curve[-1][1]:.1f} MB")
    if bad:
        ctx.note(f"{len(bad)} log lines broke the fuzzer's rules, e.g. {bad[0][:300]}")
    ctx.raw.update(rss_curve_mb=curve, frames=sent, seconds=seconds, bad_lines=len(bad))
    start_mb, end_mb = curve[0][1], curve[-1][1]
    peak_mb = max(mb for _n, mb in curve)
    return [
        Row("fuzz frames/s (client in this process)", "fr/s", sent / seconds if seconds else None, compare=False),
        Row("RSS before fuzzing", "MB", start_mb, compare=False),
        Row(f"RSS after {sent} frames", "MB", end_mb, higher_is_better=False, target=Target("<=", start_mb + 64), compare=False),
        Row(f"RSS peak over {sent} frames", "MB", peak_mb, higher_is_better=False, compare=False),
        Row("log lines breaking the rules", "lines", float(len(bad)), higher_is_better=False, target=Target("<=", 0), compare=False),
    ]
