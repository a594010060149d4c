"""Idle resident memory of the broker process, after one client has looked at it."""

from __future__ import annotations

import time

from bench import wire
from bench.context import Context, Row, Target

ABOUT = "idle RSS of the broker process after ApiVersions + Metadata (mock: its whole helper process)"

MB = 1_000_000


def run(ctx: Context) -> list[Row]:
    with ctx.kaflet() as k, ctx.mock() as m:
        for target in (k, m):
            wire.api_versions(target.bootstrap)
            with wire.SyncClient(target.bootstrap) as client:
                client.request(wire.metadata_request(None))
        time.sleep(0.2 if ctx.quick else 1.0)
        kaflet, mock = k.rss() / MB, m.rss() / MB
    ctx.note("the mock's figure is a Python interpreter with confluent-kafka loaded plus librdkafka's mock cluster")
    return [Row("idle RSS", "MB", kaflet, mock, higher_is_better=False, target=Target("<=", 50))]
