"""The broker: data dir, topics, listeners and connections, started and stopped as one."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import shutil
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog

from broker.config import Config
from broker.config.dynamic_configs import DynamicBrokerConfigs
from broker.config.log_config import log_config
from broker.network.connection import KafkaConnection
from broker.network.faults import FaultInjector
from broker.network.limits import ConnectionLimits
from broker.node.clock import Clock
from broker.node.datadir import DataDir
from broker.topics.catalog import TopicManager
from broker.txn.producer_ids import ProducerIdManager
from protocol import compiled
from protocol.errors import ErrorCode
from storage.manager import LogManager

if TYPE_CHECKING:
    from broker.cluster.cluster import Cluster
    from broker.coordinator.service import GroupCoordinator
    from broker.embed.process import BrokerProcess
    from broker.embed.thread import BrokerThread
    from broker.metrics.requests import KnownObserver, Observer
    from broker.metrics.service import MetricsService
    from broker.share.coordinator.service import ShareCoordinator
    from broker.share.manager import SharePartitionManager
    from broker.txn.coordinator import TransactionCoordinator

log = structlog.get_logger("kaflet.broker")


def host_port(host: str, port: int) -> str:
    """host:port, with an IPv6 address in brackets as clients and URLs write it."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


class Broker:
    """A kaflet broker. `async with Broker(config) as broker:` serves on `broker.bootstrap`.

    Without a config it listens on an ephemeral port of 127.0.0.1 with a temporary data
    dir that is removed at stop (handy for tests and embedding).
    """

    def __init__(self, config: Config | None = None, **overrides: Any) -> None:
        self._temp_dir: str | None = None
        if config is None:
            # metrics_port stays None: the endpoint binds a free port (see metrics_address)
            self._temp_dir = tempfile.mkdtemp(prefix="kaflet-")
            config = Config(port=0, data_dir=self._temp_dir)
        if overrides:
            config = dataclasses.replace(config, **overrides)
        config.validate()
        self.config = config
        self.connections: set[KafkaConnection] = set()
        self.accepting = False
        self.faults = FaultInjector()
        from broker.cluster.chaos import Chaos

        self.chaos = Chaos(self)  # chaos operations on this broker (broker/cluster/chaos.py)
        # Set when this broker is part of a Cluster (broker/cluster/cluster.py): leadership lives there.
        self.cluster: Cluster | None = None
        self.headless = False  # a Cluster's state broker: no listener of its own
        self.limits = ConnectionLimits(config.max_connections, config.max_connections_per_ip, config.queued_max_request_bytes)
        # Listeners, TLS, SASL and ACLs (broker/security/); a cluster's nodes share the state broker's.
        from broker.security.listeners import parse_listeners
        from broker.security.service import Security

        self.listeners = parse_listeners(config)
        self.security = Security(config, self.listeners)
        self.authorizer = self.security.authorizer
        self.dynamic_configs = DynamicBrokerConfigs(config, self.limits)
        self._wire_dynamic_security()
        self.debug_requests = config.log_level == "debug"
        self.started_at = 0.0
        self.bound_port = 0
        self.bound_hosts: list[str] = []
        self._servers: list[asyncio.base_events.Server] = []
        self._idle_task: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self.datadir: DataDir | None = None
        self.topics: TopicManager
        self.logs: LogManager
        self.producer_ids: ProducerIdManager
        self.clock = Clock()
        self.coordinator: GroupCoordinator | None = None
        self.txn: TransactionCoordinator | None = None
        # KIP-932: the share coordinator (over __share_group_state) and this node's share partitions.
        self.share_coordinator: ShareCoordinator | None = None
        self.share_partitions: SharePartitionManager | None = None
        self.metrics: MetricsService | None = None
        # Called by each connection after a response is written (request metrics, debug log),
        # and after a fast-path answer (no request context: api key, version, start time).
        self.observe_response: Observer | None = None
        self.observe_known: KnownObserver | None = None

    def _wire_dynamic_security(self) -> None:
        """Dynamic security configs take effect through broker/security/dynamic.py; a cluster's
        nodes share the state broker's security, which applies them for all."""
        from broker.security import dynamic as security

        def apply(effective: Any) -> None:
            if "security" in self.__dict__ or self.cluster is None:
                security.apply(self, effective)

        self.dynamic_configs.on_security_changed = apply
        self.dynamic_configs.lockout_guard = lambda effective: security.guard(self, effective)

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        import broker.apis  # noqa: F401  (registers every API handler)

        t0 = time.monotonic()
        self.started_at = time.time()
        if self.config.metrics or self.debug_requests:
            from broker.metrics.service import MetricsService

            self.metrics = MetricsService(self)
            await self.metrics.listen()  # before the data dir: a taken port fails without touching it
        try:
            await self._bind()  # likewise the listen port
            await self._start(t0)
        except BaseException:
            for server in self._servers:
                server.close()
            if self.metrics is not None:
                await self.metrics.stop()
            raise

    def _verify_data(self) -> None:
        """--verify-on-start: every segment CRC-checked and repaired before any log opens."""
        from storage.check import check_data_dir

        started = time.monotonic()
        report = check_data_dir(
            self.datadir.path,
            repair=True,
            on_problem=lambda p: log.error(
                "data dir problem repaired", file=str(p.file), kind=p.kind, position=p.position, detail=p.detail
            ),
        )
        log.info(
            "data dir verified",
            partitions=report.partitions,
            segments=report.segments,
            batches=report.batches,
            bytes=report.bytes,
            problems=len(report.problems),
            verify_ms=round((time.monotonic() - started) * 1000, 1),
        )

    async def _start(self, t0: float) -> None:
        self.datadir = DataDir(self.config.data_dir, self.config.node_id, self.config.offsets_partitions)
        self.dynamic_configs.load(self.datadir.path)  # dynamic broker configs win over static ones
        self.security.load(self.datadir.path)  # SCRAM credentials and ACLs, before any listener serves
        self.topics = TopicManager(self.datadir.path, self.config)
        self.producer_ids = ProducerIdManager(self.datadir.path)
        self.logs = LogManager(
            self.datadir.path,
            lambda topic: log_config(topic, self.config),
            fsync=self.config.fsync,
            retention_check_interval_ms=self.config.log_retention_check_interval_ms,
            compaction_interval_ms=self.config.offsets_compaction_interval_ms,
            page_cache_bytes=self.config.log_page_cache_bytes,
        )
        logs, topics = self.logs, self.topics
        if self.cluster is not None:  # placement, replicas and racks are the cluster's
            self.cluster.attach(topics, logs)
        # A changed dynamic log default reaches every partition log whose topic does not set it.
        self.dynamic_configs.on_log_defaults_changed = lambda: [logs.configs_changed(topic) for topic in topics.topics.values()]
        if self.config.verify_on_start:
            self._verify_data()
        self.logs.before_rename = self.faults.check_rename
        self.logs.load(self.topics.topics.values(), self.topics.deleting)
        self.topics.deletions_finished()
        self.logs.subscribe(self.topics)
        self.faults.bind_storage(self.logs.set_write_check)
        await self.logs.start()
        self._start_coordinators()
        if self.metrics is not None:
            self.metrics.install()
        for server in self._servers:
            await server.start_serving()
        self.accepting = True
        if self.headless:
            return  # the Cluster logs its ready line
        self._idle_task = asyncio.get_running_loop().create_task(self._close_idle_connections())
        log.info(
            "broker ready",
            bootstrap=self.bootstrap,
            listen=[host_port(h, self.bound_port) for h in self.bound_hosts],
            **({"listeners": [lst.describe() for lst in self.listeners]} if self.config.listeners else {}),
            node_id=self.config.node_id,
            cluster_id=self.cluster_id,
            data_dir=str(self.datadir.path),
            metrics=self.metrics_address,
            startup_ms=round((time.monotonic() - t0) * 1000, 1),
            code_path=compiled.PATH,  # "compiled" (protocol/_speedups.c) or "pure-python"
            **({"kafka_defaults": self.config.kafka_defaults_applied()} if self.config.kafka_defaults else {}),
        )

    def _start_coordinators(self) -> None:
        """The group and transaction coordinators, each on its own coordinator runtime over its
        internal topic, given the services they use (never this object)."""
        from broker.config.group_configs import GroupConfigs
        from broker.config.topic_configs import effective_configs
        from broker.coordinator.service import GroupCoordinator
        from broker.runtime.runtime import RuntimeServices
        from broker.topics.catalog import OFFSETS_TOPIC
        from broker.txn.coordinator import TransactionCoordinator

        config, faults = self.config, self.faults

        def batch_limit(topic: Any) -> int:  # an internal topic's max.message.bytes
            return int(effective_configs(topic, config)["max.message.bytes"])

        def before_timer(group_id: str | None, key: str) -> None:  # armed timer faults (broker/network/faults.py)
            if faults.timer_rules:
                faults.check_timer(group_id, key)

        services = RuntimeServices(self.topics, self.logs, self.clock, batch_limit, before_timer)
        self.coordinator = GroupCoordinator(config, services, GroupConfigs(self.datadir.path, config))
        self.coordinator.start()
        # Timer faults name a group (fail_timers): its timers never took them. Its markers take the disk faults.
        self.txn = TransactionCoordinator(
            config,
            RuntimeServices(self.topics, self.logs, self.clock, batch_limit),
            producer_ids=self.producer_ids,
            participants={OFFSETS_TOPIC: self.coordinator.runtime},
            faults=faults,
        )
        self.txn.start()
        if config.share_groups_enabled:
            self._start_share_groups(services)

    def _start_share_groups(self, services: Any) -> None:
        """The share coordinator, the runtime's third user (over __share_group_state), and the
        share partitions that read from it (broker/share/)."""
        from broker.share.coordinator.service import ShareCoordinator

        assert self.coordinator is not None
        self.share_coordinator = ShareCoordinator(self.config, services)
        self.share_coordinator.start()
        self.coordinator.share_state = self.share_coordinator

        self.share_partitions = self.new_share_partitions()

    def new_share_partitions(self) -> Any:
        """A SharePartitionManager reading from this broker's logs through the share coordinator
        (each node of a cluster has its own: its share sessions and the share partitions it leads)."""
        from broker.share.manager import SharePartitionManager
        from broker.share.settings import ShareGroupSettingsProvider

        assert self.coordinator is not None and self.share_coordinator is not None

        def leader_epoch(topic: str, partition: int) -> int:
            return self.cluster.leader_epoch(topic, partition) if self.cluster is not None else 0

        manager = SharePartitionManager(
            self.logs,
            self.share_coordinator,
            ShareGroupSettingsProvider(self.config, self.coordinator.group_configs),
            self.clock.now_ms,
            self.config.group_share_max_share_sessions,
            leader_epoch,
        )
        self.coordinator.share_state_changed.append(manager.forget_group)
        # A deleted topic's share partitions go (Kafka's SharePartitionListener.onDeleted).
        self.topics.on_deleted.append(lambda topic: manager.remove_topic_partition(topic.topic_id))
        return manager

    async def stop(self) -> None:
        """Stop accepting, finish responses in flight, close connections and files."""
        if self._stopped.is_set():
            return
        self.accepting = False
        for server in self._servers:
            server.close()
        if self.metrics is not None:
            await self.metrics.stop()
        if self._idle_task is not None:
            self._idle_task.cancel()
        for conn in list(self.connections):
            conn.stop_reading()
        if self.txn is not None:
            await self.txn.stop()
        if self.share_partitions is not None:
            self.share_partitions.wake_all()  # parked ShareFetches answer now
        if self.share_coordinator is not None:
            await self.share_coordinator.stop()
        if self.coordinator is not None:
            await self.coordinator.stop()  # parked JoinGroup/SyncGroup get NOT_COORDINATOR (CT-6)
        from broker.apis.fetch import wake_parked_fetches

        wake_parked_fetches(self)  # long polls answer now instead of at max_wait
        in_flight = [c.in_flight for c in self.connections if c.in_flight is not None]
        if in_flight:
            await asyncio.wait(in_flight, timeout=5)
        for conn in list(self.connections):
            conn.close()
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), timeout=1)
            except TimeoutError:
                pass
        logs: LogManager | None = self.__dict__.get("logs")
        if logs is not None:
            await logs.close()
        if self.datadir is not None:
            self.datadir.close()
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
        self._stopped.set()
        log.info("broker stopped")

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        """Run until SIGTERM or SIGINT, then stop gracefully."""
        await serve_until_signalled(self.start, self.stop)

    # -- listening ----------------------------------------------------------------------

    def stop_listening(self) -> None:
        """Close the listen sockets (chaos: the broker is down); connections stay as they are."""
        for server in self._servers:
            server.close()
        self._servers = []
        self.bound_hosts = []

    async def listen_again(self) -> None:
        """Listen again on the port bound at start (chaos: the broker comes back up)."""
        await self._bind(self.bound_port)
        for server in self._servers:
            await server.start_serving()

    async def _bind(self, port: int | None = None) -> None:
        """Bind the listen sockets (not serving yet): a taken port fails before the data dir is touched."""
        if self.headless:
            return
        from broker.security.listeners import bind

        await bind(self, port)  # every listener (--listeners), with its TLS context; a taken port named by its role

    def partition_check(self, topic: str, partition: int, current_epoch: int = -1, replica_ok: bool = False) -> tuple[ErrorCode, int]:
        """(error, leader epoch) for a request on a partition sent here, in Kafka's order: a node
        that is not one of its replicas answers NOT_LEADER_OR_FOLLOWER; a replica checks
        `current_epoch` first (FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH when stale or
        future), then whether it leads (NOT_LEADER_OR_FOLLOWER), unless `replica_ok` (a
        consumer's Fetch v11+, which a follower serves)."""
        cluster = self.cluster
        if cluster is None:
            epoch = 0
            if current_epoch != -1 and current_epoch != epoch:
                return (ErrorCode.FENCED_LEADER_EPOCH if current_epoch < epoch else ErrorCode.UNKNOWN_LEADER_EPOCH), epoch
            return ErrorCode.NONE, epoch
        state = cluster.partition(topic, partition)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0
        node = self.config.node_id
        epoch = state.leader_epoch
        if node not in state.replicas:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, epoch
        if current_epoch != -1 and current_epoch != epoch:
            return (ErrorCode.FENCED_LEADER_EPOCH if current_epoch < epoch else ErrorCode.UNKNOWN_LEADER_EPOCH), epoch
        if state.leader != node and not replica_ok:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, epoch
        return ErrorCode.NONE, epoch

    @property
    def advertised_host(self) -> str:
        """The first listener's advertised host (--advertised-host without --listeners)."""
        return self.listeners[0].advertised[0]

    @property
    def advertised_port(self) -> int:
        return self.listeners[0].advertised[1]

    @property
    def bootstrap(self) -> str:
        """host:port for clients' bootstrap.servers (an IPv6 host in brackets: [::1]:9092)."""
        return host_port(self.advertised_host, self.advertised_port)

    @property
    def metrics_address(self) -> str | None:
        """host:port of the metrics endpoint once started (None with metrics off). Without a
        configured metrics_port an embedded broker binds a free port, so it never collides."""
        return self.metrics.address if self.metrics is not None else None

    # -- embedding from synchronous code --------------------------------------------------

    @classmethod
    def in_thread(cls, config: Config | None = None, **overrides: Any) -> BrokerThread:
        """A broker on its own event loop in a background thread: `with Broker.in_thread() as b:`
        serves on `b.bootstrap` while synchronous code (or another event loop) runs clients."""
        from broker.embed.thread import BrokerThread

        return BrokerThread(config, **overrides)

    @classmethod
    def in_subprocess(cls, *args: str, data_dir: str | None = None, env: dict[str, str] | None = None) -> BrokerProcess:
        """A `kaflet serve` child process: `with Broker.in_subprocess("--default-partitions", "3") as b:`."""
        from broker.embed.process import BrokerProcess

        return BrokerProcess(data_dir, *args, env=env)

    @property
    def cluster_id(self) -> str:
        assert self.datadir is not None
        return self.datadir.cluster_id

    async def _close_idle_connections(self) -> None:
        """Close idle connections (connections.max.idle.ms) and those trickling a request
        frame slower than request.read.timeout.ms allows (broker/network/limits.py)."""
        idle_s = self.config.connections_max_idle_ms / 1000
        read_ms = self.config.request_read_timeout_ms
        read_s = read_ms / 1000 if read_ms else float("inf")
        interval = max(0.05, min(idle_s / 4, read_s / 4, 30.0))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for conn in list(self.connections):
                if conn.frame_started and not conn.reading_paused and now - conn.frame_started > read_s:
                    conn.close_with_warning(f"request frame not completed within {read_ms} ms")
                elif not conn.busy and now - conn.last_active > idle_s:
                    conn.close_with_warning(f"idle for more than {self.config.connections_max_idle_ms} ms")


async def serve_until_signalled(start: Callable[[], Awaitable[object]], stop: Callable[[], Awaitable[object]]) -> None:
    """`kaflet serve`'s life, for one broker or a cluster: start, wait for SIGTERM or SIGINT, stop gracefully."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await start()
    if not gc.isenabled():  # off for start-up (broker/__main__.py): what start-up built is kept for good
        gc.freeze()
        gc.enable()
    await stopping.wait()
    log.info("shutting down")
    await stop()
