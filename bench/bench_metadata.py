"""Metadata requests per second from 8 pipelined connections."""

from __future__ import annotations

from typing import Any

from bench import wire
from bench.context import Context, Row, Target, load_rows

ABOUT = "Metadata v12 (one topic) requests/s from 8 pipelined connections"

TOPIC = "bench-metadata"


def check(target: Any, partitions: int) -> None:
    """One decoded answer before the load: the load only counts response frames."""
    with wire.SyncClient(target.bootstrap) as client:
        resp = client.request(wire.metadata_request([TOPIC]))
    topic = resp.topics[0]
    if topic.error_code or len(topic.partitions) != partitions:
        raise RuntimeError(f"{target.name}: Metadata for {TOPIC}: error {topic.error_code}, {len(topic.partitions)} partitions")


def rings(ctx: Context) -> list[list[bytes]]:
    return [[wire.encode(wire.metadata_request([TOPIC]))]] * ctx.connections


def prepare(target: Any, partitions: int = 1) -> None:
    wire.ensure_topic(target, TOPIC, partitions)
    check(target, partitions)


def run(ctx: Context) -> list[Row]:
    frames = rings(ctx)
    runs: dict[str, list[Any]] = {"kaflet": [], "mock": []}
    with ctx.kaflet() as k, ctx.mock() as m:
        prepare(k)
        prepare(m)
        for _ in range(ctx.reps):
            runs["kaflet"].append(ctx.load(k, frames))
            runs["mock"].append(ctx.load(m, frames))
    return load_rows("Metadata", runs["kaflet"], runs["mock"], Target("ratio>=", 0.7))
