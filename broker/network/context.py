"""What a handler knows about the request it serves, and the services it may use.

`ctx.broker` is the node the request came to (a Broker, or one node of a Cluster), seen through
`BrokerServices`: the services handlers use and nothing else. Handlers never import the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

if TYPE_CHECKING:
    from broker.config import Config
    from broker.config.dynamic_configs import DynamicBrokerConfigs
    from broker.coordinator.service import GroupCoordinator
    from broker.network.connection import KafkaConnection
    from broker.share.coordinator.service import ShareCoordinator
    from broker.share.manager import SharePartitionManager
    from broker.topics.catalog import TopicManager
    from broker.txn.coordinator import TransactionCoordinator
    from broker.txn.producer_ids import ProducerIdManager
    from protocol.errors import ErrorCode
    from storage.manager import LogManager


class NodeAddress(Protocol):
    """A node as Metadata and FindCoordinator name it."""

    @property
    def config(self) -> Config: ...

    @property
    def advertised_host(self) -> str: ...

    @property
    def advertised_port(self) -> int: ...


class ClusterView(Protocol):
    """The cluster a node belongs to (`--brokers N`): its nodes and who leads each partition."""

    @property
    def nodes(self) -> Sequence[NodeAddress]: ...

    @property
    def node_ids(self) -> list[int]: ...

    def node(self, node_id: int) -> NodeAddress: ...

    def leader(self, topic: str, partition: int) -> int: ...

    def leader_epoch(self, topic: str, partition: int) -> int: ...

    def epoch_history(self, topic: str, partition: int) -> list[tuple[int, int]]: ...


class BrokerServices(NodeAddress, Protocol):
    """What a handler may use of the node it serves for: the services the Broker composes."""

    topics: TopicManager
    logs: LogManager
    coordinator: GroupCoordinator
    txn: TransactionCoordinator
    # KIP-932 (None when share groups are not served): the share coordinator and the share partitions.
    share_coordinator: ShareCoordinator | None
    share_partitions: SharePartitionManager | None
    producer_ids: ProducerIdManager
    dynamic_configs: DynamicBrokerConfigs
    cluster: ClusterView | None
    accepting: bool
    # Security (broker/security/): the node's listeners, SASL and TLS state, and its authorizer
    # (None where no ACLs are enforced).
    listeners: list[Any]
    security: Any
    authorizer: Any

    @property
    def cluster_id(self) -> str: ...

    def partition_check(self, topic: str, partition: int, current_epoch: int = -1) -> tuple[ErrorCode, int]: ...


@dataclass(slots=True)
class RequestContext:
    broker: BrokerServices
    conn: KafkaConnection
    api_key: int
    api_name: str
    api_version: int
    correlation_id: int
    client_id: str | None
    frame: bytes = b""  # the whole request frame (after the size)
    body_offset: int = 0  # where the request body starts in `frame`
    # Error codes (other than NONE) of an answer the handler encoded itself, for the request
    # metrics; response objects are read directly (broker/metrics/errors.py).
    errors: list[int] | None = None

    @property
    def raw_body(self) -> memoryview:
        return memoryview(self.frame)[self.body_offset :]

    @property
    def peer(self) -> str:
        return self.conn.peer_text

    @property
    def client_host(self) -> str:
        """The peer address as Java's `InetAddress.toString()` renders it ("/127.0.0.1")."""
        return "/" + self.conn.peer_host

    @property
    def principal(self) -> Any:
        """Who sent the request (broker/security/): User:ANONYMOUS on a PLAINTEXT listener."""
        return self.conn.principal

    @property
    def authorizer(self) -> Any:
        """The broker's authorizer, or None (broker/security/authorize.py asks it)."""
        return self.broker.authorizer

    @property
    def log(self) -> Any:
        """A logger bound to this request (built lazily: most requests never log)."""
        return structlog.get_logger("kaflet.request").bind(
            peer=self.peer,
            client_id=self.client_id,
            api=self.api_name,
            api_version=self.api_version,
            correlation_id=self.correlation_id,
        )
