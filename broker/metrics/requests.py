"""Per-request accounting: the hook the connection calls once a response is written.

`KafkaConnection` notes `perf_counter()` when it starts on a frame and, after writing the
answer (or deciding there is none, acks=0), calls `broker.observe_response(ctx, result,
started)`. That hook is None when neither metrics nor debug logging is on, so a broker run with
`--no-metrics` pays one attribute test per request.

Per (api key, version) a latency histogram is kept; its count is the request count, so
requests by api and version and the latency by api come from one structure. Errors are
counted per (api key, version, code) as Kafka's ErrorsPerSec counts them (see errors.py).
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any

from broker.metrics.errors import WALKERS, error_codes
from broker.metrics.stats import REQUEST_BUCKETS, Histogram
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import RequestContext

Observer = Callable[["RequestContext", Any, float], None]

_ENCODED = (bytes, bytearray, memoryview, list)
_ENCODED_TYPES = frozenset({bytes, bytearray, memoryview, list, type(None)})
_API_KEYS = 128  # above every Kafka API key the registry can hold (kafka-python's highest is < 100)
_VERSIONS = 32  # above every version of every API


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


class RequestMetrics:
    def __init__(self) -> None:
        self.latency: dict[tuple[int, int], Histogram] = {}
        self.errors: dict[tuple[int, int, int], int] = {}

    def observer(self, count: bool, debug: bool) -> Observer | None:
        """The hook to install: counting, debug logging, both, or None."""
        if count and not debug:
            return self._counting()
        if not count and not debug:
            return None
        counting = self._counting() if count else None

        def observe_and_log(ctx: RequestContext, result: Any, started: float) -> None:
            if counting is not None:
                counting(ctx, result, started)
            if isinstance(result, _ENCODED) or result is None:
                codes = ctx.errors
                size = None if result is None else (sum(len(b) for b in result) if isinstance(result, list) else len(result))
            else:
                codes = error_codes(result, ctx.api_version)
                size = None
            ctx.log.debug(
                "response",
                sent=result is not None,
                errors=[error_name(c) for c in codes] if codes else [],
                bytes=size,
                duration_ms=round((perf_counter() - started) * 1000, 3),
            )

        return observe_and_log

    def _counting(self) -> Observer:
        latency = self.latency
        errors = self.errors
        bounds = REQUEST_BUCKETS
        walkers = WALKERS
        encoded = _ENCODED_TYPES
        fold_at = Histogram.FOLD_AT
        # Histograms by [api key][version]: two list indexings instead of hashing a tuple key
        # (see bench `metrics` for what the hook costs per request).
        table: list[list[Histogram | None]] = [[None] * _VERSIONS for _ in range(_API_KEYS)]

        def histogram(api: int, version: int) -> Histogram:
            h = latency[(api, version)] = Histogram(bounds)
            table[api][version] = h
            return h

        def observe(ctx: RequestContext, result: Any, started: float) -> None:
            elapsed = perf_counter() - started
            api = ctx.api_key
            version = ctx.api_version
            h = table[api][version]
            if h is None:
                h = histogram(api, version)
            pending = h.pending
            pending.append(elapsed)
            if len(pending) >= fold_at:
                h.fold()
            cls = result.__class__
            if cls in encoded:  # bytes, a list of buffers, None (no answer): the handler noted its errors
                codes = ctx.errors
            else:
                walker = walkers.get((cls, version))
                codes = walker(result) if walker is not None else error_codes(result, version)
            if codes:
                for code in codes:
                    k = (api, version, code)
                    errors[k] = errors.get(k, 0) + 1

        return observe
