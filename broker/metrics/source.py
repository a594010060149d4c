"""What the metrics service observes of the broker it serves: a narrow view, never the Broker.

Request metrics hook into the connections' response path (`observe_response`, `observe_known`,
broker/metrics/requests.py); the collectors read the rest when scraped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from broker.config import Config
    from broker.coordinator.service import GroupCoordinator
    from broker.network.faults import FaultInjector
    from broker.network.limits import ConnectionLimits
    from broker.topics.catalog import TopicManager
    from broker.txn.coordinator import TransactionCoordinator
    from storage.manager import LogManager


class ClusterView(Protocol):
    """A cluster's brokers and partitions as the exporter reads them (broker/cluster/cluster.py)."""

    def alive_nodes(self) -> list[Any]: ...  # each with .config.node_id and .bootstrap

    def partition(self, topic: str, partition: int) -> Any: ...  # .replicas, .isr, .leader (-1: none)


class MetricsSource(Protocol):
    config: Config
    cluster: ClusterView | None  # `--brokers N`: leaders and replicas are the cluster's
    connections: set[Any]
    limits: ConnectionLimits
    faults: FaultInjector
    topics: TopicManager
    logs: LogManager
    coordinator: GroupCoordinator | None
    txn: TransactionCoordinator | None
    accepting: bool
    debug_requests: bool
    chaos: Any  # the control API's entry (broker/cluster/chaos.py), with --control
    observe_response: Callable[..., None] | None
    observe_known: Callable[[int, int, float], None] | None

    @property
    def bootstrap(self) -> str: ...

    @property
    def cluster_id(self) -> str: ...
