"""The metrics service of a broker: its hooks, its recorders and its HTTP endpoint.

- /metrics: kaflet's own families (prometheus_client collectors, plus the process, platform
  and GC collectors) followed by kafka_exporter's families (exporter.py), in text format 0.0.4.
  Prometheus accepts that format whatever it asks for, so there is no OpenMetrics variant.
- /healthz: 200 while the process serves HTTP at all (liveness).
- /control/...: the chaos control API, only with --control (broker/cluster/control.py).
- /readyz: 200 once the Kafka listener accepts connections and every coordinator shard is
  loaded (`GroupCoordinator.all_loaded`), 503 before (and for ever if a shard failed to load,
  since its groups are then not served); the JSON body says which.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import TYPE_CHECKING, Any

import structlog

from broker.metrics import exporter
from broker.metrics.http import Response, serve
from broker.metrics.requests import RequestMetrics
from broker.metrics.stats import REBALANCE_BUCKETS, STORAGE_BUCKETS, Histogram

if TYPE_CHECKING:
    from broker.metrics.source import MetricsSource

log = structlog.get_logger("kaflet.metrics")

TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
FOLD_INTERVAL_S = 1.0
JSON = "application/json"


@functools.cache
def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        return package_version("kaflet")
    except PackageNotFoundError:
        return "unknown"


class MetricsService:
    def __init__(self, broker: MetricsSource) -> None:
        self.broker = broker
        self.config = broker.config
        self.requests = RequestMetrics()
        self.append_duration = Histogram(STORAGE_BUCKETS)
        self.fsync_duration = Histogram(STORAGE_BUCKETS)
        self.rebalance_duration = Histogram(REBALANCE_BUCKETS)
        self.server: Any = None
        self.address: str | None = None  # host:port the endpoint is bound to
        self._registry: Any = None
        self._fold_timer: asyncio.TimerHandle | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def listen(self) -> None:
        """Bind the endpoint (first thing at start-up: a taken port fails before the data dir opens)."""
        if not self.config.metrics:
            return
        host = self.config.metrics_host
        # No port configured (an embedded Broker; `kaflet serve` fills in 9644): a free one.
        port = self.config.metrics_port if self.config.metrics_port is not None else 0
        control = None
        if self.config.control:  # the chaos control API (broker/cluster/control.py)
            from broker.cluster.control import handler

            control = handler(self.broker)
        from broker.metrics.http import Guard
        from broker.security.control_guard import ControlGuard

        checks = ControlGuard(host, self.config.control_token) if control is not None else None
        self.guard = Guard(self.config.metrics_max_connections, checks)
        try:
            self.server = await serve(host, port, self.handle, control, self.guard)
        except OSError as exc:
            from broker.network.bind import bind_error

            raise bind_error(exc, "the metrics endpoint", host, port, "--metrics-port", ", or turn metrics off with --no-metrics") from exc
        sockname = self.server.sockets[0].getsockname()
        if checks is not None:
            checks.port = sockname[1]
        self.address = f"{'[' + host + ']' if ':' in host else host}:{sockname[1]}"

    def install(self) -> None:
        """Hook into the request path, the logs and the coordinator (once they exist)."""
        broker = self.broker
        counting = self.config.metrics
        broker.observe_response = self.requests.observer(count=counting, debug=broker.debug_requests)
        if not counting:
            return
        broker.observe_known = self.requests.known_observer()
        broker.logs.set_observers(self.append_duration, self.fsync_duration.observe)
        if broker.coordinator is not None:
            broker.coordinator.stats.on_rebalance.append(lambda _group, seconds: self.rebalance_duration.observe(seconds))
        self._fold_timer = asyncio.get_running_loop().call_later(FOLD_INTERVAL_S, self._fold)

    def fold(self) -> None:
        """Fold the durations the hot paths appended into their histograms."""
        self.requests.fold()
        self.append_duration.fold()

    def _fold(self) -> None:
        # Every second: keeps the pending lists short (~1 s of requests) and each fold cheap.
        self.fold()
        self._fold_timer = asyncio.get_running_loop().call_later(FOLD_INTERVAL_S, self._fold)

    async def stop(self) -> None:
        if self._fold_timer is not None:
            self._fold_timer.cancel()
            self._fold_timer = None
        if self.server is not None:
            self.server.close()
            self.server = None

    # -- HTTP -----------------------------------------------------------------------------

    def handle(self, path: str) -> Response:
        if path == "/metrics":
            return self.metrics()
        if path == "/healthz":
            return 200, JSON, b'{"status":"ok"}\n'
        if path == "/readyz":
            ready, detail = self.readiness()
            return (200 if ready else 503), JSON, (json.dumps(detail) + "\n").encode()
        if path == "/":
            return 200, "text/plain; charset=utf-8", b"kaflet: /metrics /healthz /readyz\n"
        return 404, "text/plain; charset=utf-8", b"not found\n"

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        broker = self.broker
        coordinator = broker.coordinator
        shards: dict[str, int] = {}
        if coordinator is not None:
            for shard in coordinator.shards:
                shards[shard.state.value] = shards.get(shard.state.value, 0) + 1
        listening = broker.accepting and broker.faults.down is None
        loaded = coordinator is not None and coordinator.all_loaded
        txn = broker.txn
        txn_loaded = txn is not None and txn.all_loaded  # the transaction coordinator's shards too
        ready = listening and loaded and txn_loaded
        detail = {"ready": ready, "listening": listening, "coordinator_loaded": loaded, "shards": shards}
        detail["transaction_coordinator_loaded"] = txn_loaded
        return ready, detail

    def metrics(self) -> Response:
        if self.broker.coordinator is None:
            return 503, "text/plain; charset=utf-8", b"starting\n"
        return 200, TEXT_FORMAT, self.render()

    def render(self) -> bytes:
        from prometheus_client.exposition import generate_latest

        own = generate_latest(self.registry())
        return own + exporter.render(self.broker, self.config.group_metrics).encode()

    def registry(self) -> Any:
        """kaflet's collectors in a registry of this broker's own (several brokers may share a process)."""
        if self._registry is None:
            from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, CollectorRegistry

            from broker.metrics.collectors import KafletCollector

            registry = CollectorRegistry(auto_describe=False)
            for collector in (KafletCollector(self), PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                registry.register(collector)
            self._registry = registry
        return self._registry
