"""Process start until the broker answers: kaflet's "broker ready" line, the mock child's list_topics."""

from __future__ import annotations

from bench.context import Context, Row, Target, median
from bench.procs import Kaflet, Mock

ABOUT = "process start -> ready, median of 10 (kaflet: 'broker ready' line; mock: child answering list_topics)"


def run(ctx: Context) -> list[Row]:
    kaflet_ms: list[float] = []
    mock_ms: list[float] = []
    for _ in range(ctx.size(10, 3)):  # alternate, so background noise hits both alike
        with Kaflet().start() as k:  # a fresh data dir each time
            kaflet_ms.append(k.start_seconds * 1000)
        with Mock().start() as m:
            mock_ms.append(m.start_seconds * 1000)
    ctx.raw.update(kaflet_ms=kaflet_ms, mock_ms=mock_ms)
    return [
        Row("process start -> ready (median)", "ms", median(kaflet_ms), median(mock_ms), higher_is_better=False, target=Target("<=", 150)),
        Row("process start -> ready (min)", "ms", min(kaflet_ms), min(mock_ms), higher_is_better=False),
    ]
