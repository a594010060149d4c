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

from array import array
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any

from broker.metrics.errors import WALKERS, error_codes
from broker.metrics.stats import REQUEST_BUCKETS, Histogram
from broker.node.logging import summarize
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.network.context import RequestContext

Observer = Callable[["RequestContext", Any, float], None]
KnownObserver = Callable[[int, int, float], None]  # (api key, version, started): a fast-path answer

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
        # Each (api key, version)'s pending durations, by [api key][version]: the hooks append to
        # an array found by two indexings, and do nothing else on the common path. Measured in the
        # broker, every further attribute, test or hash there cost ~0.1-0.3 us per request.
        self.table: list[list[array[float] | None]] = [[None] * _VERSIONS for _ in range(_API_KEYS)]

    def pending(self, api: int, version: int) -> array[float]:
        """The pending durations of (api, version), created with its histogram on first use."""
        found = self.table[api][version]
        if found is None:
            h = self.latency[(api, version)] = Histogram(REQUEST_BUCKETS)
            found = self.table[api][version] = h.pending
        return found

    def known_observer(self) -> KnownObserver:
        """The hook for answers the connection sends from a handler's fast path (never an error)."""
        table = self.table
        pending_of = self.pending

        def observe_known(api: int, version: int, started: float) -> None:
            elapsed = perf_counter() - started
            pending = table[api][version]
            if pending is None:
                pending = pending_of(api, version)
            pending.append(elapsed)

        return observe_known

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
                body=summarize(result) if size is None and result is not None else None,
                sent=result is not None,
                errors=[error_name(c) for c in codes] if codes else [],
                bytes=size,
                duration_ms=round((perf_counter() - started) * 1000, 3),
            )

        return observe_and_log

    def fold(self) -> None:
        """Fold every latency histogram's pending durations (the service does it every second)."""
        for h in self.latency.values():
            h.fold()

    def _counting(self) -> Observer:
        errors = self.errors
        walkers = WALKERS
        encoded = _ENCODED_TYPES
        table = self.table
        pending_of = self.pending

        def count_errors(api: int, version: int, codes: list[int]) -> None:
            for code in codes:
                k = (api, version, code)
                errors[k] = errors.get(k, 0) + 1

        def observe(ctx: RequestContext, result: Any, started: float) -> None:
            elapsed = perf_counter() - started
            pending = table[ctx.api_key][ctx.api_version]
            if pending is None:
                pending = pending_of(ctx.api_key, ctx.api_version)
            pending.append(elapsed)
            cls = result.__class__
            if cls in encoded:  # bytes, a list of buffers, None (no answer): the handler noted its errors
                codes = ctx.errors
            else:
                walker = walkers.get((cls, ctx.api_version))
                codes = walker(result) if walker is not None else error_codes(result, ctx.api_version)
            if codes:
                count_errors(ctx.api_key, ctx.api_version, codes)

        return observe
