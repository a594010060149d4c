"""Several brokers in one process and one event loop (`kaflet serve --brokers N`, `Cluster`).

Replication is not simulated; leadership is. One headless state broker holds what belongs to the
cluster (data dir, topics, partition logs, the group and transaction coordinators); N
`ClusterNode`s each have their own node id, listener, advertised address, connections, faults
and chaos, and reach the shared state through their state broker. A partition's leader is a
pointer: by default partition p of topic t is led by node (crc32(t) + p) mod N (so are the
`__consumer_offsets` partitions, whose leader is their groups' coordinator); `move_leader` moves
it and bumps its leader epoch, `move_coordinator` moves an `__consumer_offsets` partition: its
shard unloads (parked requests get NOT_COORDINATOR) and a new one loads from the log.

Where Kafka is silent or kaflet decides:
- every node is listed as a replica and in the ISR of every partition (leader first), so a
  request with a stale leader epoch gets FENCED_LEADER_EPOCH from any node, as from a follower,
  and one with the current epoch sent to a non-leader gets NOT_LEADER_OR_FOLLOWER;
- leader epochs and their start offsets live in memory: a restarted cluster starts at epoch 0
  with the default placement;
- the transaction coordinator of a transactional id is the leader of its `__transaction_state`
  partition; InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn sent elsewhere get
  NOT_COORDINATOR; those partitions do not move (no transaction coordinator moves yet);
- request metrics count every node's requests together (one metrics listener, the state broker's);
- share groups (KIP-932): each node has its own share sessions and the share partitions of the
  partitions it leads (a leader move drops the old leader's, the new one loads from the share
  coordinator); the share coordinator of a share partition is the leader of its
  `__share_group_state` partition (FindCoordinator, the share-state APIs), which
  `move_share_coordinator` moves like `move_coordinator`; the share partitions reach it in
  process, wherever it is.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import zlib
from typing import TYPE_CHECKING, Any

import structlog

from broker.runtime.errors import CoordinatorError
from broker.security.listeners import for_node as listeners_for_node
from broker.server import Broker, host_port, serve_until_signalled
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.config import Config

log = structlog.get_logger("kaflet.cluster")

OFFSETS_TOPIC = "__consumer_offsets"


class CoordinatorView:
    """A node's view of the group coordinator: groups whose `__consumer_offsets` partition another
    node leads get NOT_COORDINATOR (after COORDINATOR_NOT_AVAILABLE, before LOAD_IN_PROGRESS)."""

    def __init__(self, cluster: Cluster, node_id: int) -> None:
        self._cluster = cluster
        self._node_id = node_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster.state.coordinator, name)

    def shard_for(self, group_id: str) -> Any:
        real = self._cluster.state.coordinator
        if real is not None and real.active and self._cluster.leader(OFFSETS_TOPIC, real.partition_for(group_id)) != self._node_id:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        return real.shard_for(group_id)  # type: ignore[union-attr]


class TxnView:
    """A node's view of the transaction coordinator: the coordinator operations of a transactional
    id whose `__transaction_state` partition another node leads get NOT_COORDINATOR (Produce's
    verification, which runs on the partition's leader, is not a coordinator operation)."""

    def __init__(self, cluster: Cluster, node_id: int) -> None:
        self._cluster = cluster
        self._node_id = node_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster.state.txn, name)

    def _elsewhere(self, transactional_id: str | None) -> bool:
        real = self._cluster.state.txn
        if transactional_id is None or real is None or not real.active:
            return False
        return self._cluster.leader(real.topic_name, real.partition_for(transactional_id)) != self._node_id

    def init_producer_id(self, transactional_id: str | None, *args: Any, **kw: Any) -> Any:
        if self._elsewhere(transactional_id):
            return ErrorCode.NOT_COORDINATOR, -1, -1, []
        return self._cluster.state.txn.init_producer_id(transactional_id, *args, **kw)  # type: ignore[union-attr]

    def add_partitions(self, transactional_id: str, *args: Any, **kw: Any) -> Any:
        if self._elsewhere(transactional_id):
            return ErrorCode.NOT_COORDINATOR, []
        return self._cluster.state.txn.add_partitions(transactional_id, *args, **kw)  # type: ignore[union-attr]

    def add_offsets(self, transactional_id: str, *args: Any, **kw: Any) -> Any:
        if self._elsewhere(transactional_id):
            return ErrorCode.NOT_COORDINATOR, []
        return self._cluster.state.txn.add_offsets(transactional_id, *args, **kw)  # type: ignore[union-attr]

    def end_txn(self, transactional_id: str, *args: Any, **kw: Any) -> Any:
        if self._elsewhere(transactional_id):
            return ErrorCode.NOT_COORDINATOR, []
        return self._cluster.state.txn.end_txn(transactional_id, *args, **kw)  # type: ignore[union-attr]


class ClusterNode(Broker):
    """One broker of a Cluster: its own listener, connections, faults and chaos; the rest is the cluster's."""

    _SHARED = ("datadir", "clock", "metrics", "security", "authorizer", "share_coordinator")

    def __init__(self, cluster: Cluster, config: Config) -> None:
        super().__init__(config)
        self.cluster = cluster
        for name in self._SHARED:
            self.__dict__.pop(name, None)
        self.coordinator = CoordinatorView(cluster, config.node_id)  # type: ignore[assignment]
        self.txn = TxnView(cluster, config.node_id)  # type: ignore[assignment]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["cluster"].state, name)

    async def start(self) -> None:
        import broker.apis  # noqa: F401

        self.started_at = time.time()
        state = self.cluster.state
        self.observe_response, self.observe_known = state.observe_response, state.observe_known
        if state.share_partitions is not None:
            self.share_partitions = state.new_share_partitions()  # this node's share sessions and partitions
        await self._bind()
        for server in self._servers:
            await server.start_serving()
        self.accepting = True
        self._idle_task = asyncio.get_running_loop().create_task(self._close_idle_connections())

    def stop_accepting(self) -> None:
        self.accepting = False
        self.stop_listening()
        if self._idle_task is not None:
            self._idle_task.cancel()
        for conn in list(self.connections):
            conn.stop_reading()

    async def close_connections(self) -> None:
        from broker.apis.fetch import wake_parked_fetches

        wake_parked_fetches(self)
        if self.__dict__.get("share_partitions") is not None:
            self.share_partitions.wake_all()  # parked ShareFetches answer now
        in_flight = [c.in_flight for c in self.connections if c.in_flight is not None]
        if in_flight:
            await asyncio.wait(in_flight, timeout=5)
        for conn in list(self.connections):
            conn.close()

    async def stop(self) -> None:
        self.stop_accepting()
        await self.close_connections()


class Cluster:
    """`async with Cluster(config, brokers=3) as c:` serves on `c.bootstrap` (every node's address).

    Node i (0-based) has node id config.node_id + i and listens on config.port + i (0: a free port each).
    """

    def __init__(self, config: Config | None = None, brokers: int = 3, **overrides: Any) -> None:
        if brokers < 1:
            raise ValueError("a cluster has at least one broker")
        self.state = Broker(config, **overrides)
        self.state.headless = True
        self.state.cluster = self
        self.config = self.state.config
        base = self.config
        self.nodes: list[ClusterNode] = []
        for i in range(brokers):
            port = base.port + i if base.port else 0
            advertised_port = base.advertised_port + i if base.advertised_port else None
            node_config = dataclasses.replace(
                base, node_id=base.node_id + i, port=port, advertised_port=advertised_port, **listeners_for_node(base, i)
            )
            self.nodes.append(ClusterNode(self, node_config))
        self._by_id = {n.config.node_id: n for n in self.nodes}
        self._ids = [n.config.node_id for n in self.nodes]
        self.leaders: dict[tuple[str, int], int] = {}  # moved partitions only
        self.epochs: dict[tuple[str, int], list[tuple[int, int]]] = {}  # (epoch, start offset) history of moved ones
        self.generation = 0  # bumped at each move (metadata caches)

    # -- placement ----------------------------------------------------------------------------

    def default_leader(self, topic: str, partition: int) -> int:
        return self._ids[(zlib.crc32(topic.encode()) + partition) % len(self._ids)]

    def leader(self, topic: str, partition: int) -> int:
        moved = self.leaders.get((topic, partition))
        return moved if moved is not None else self.default_leader(topic, partition)

    def leader_epoch(self, topic: str, partition: int) -> int:
        history = self.epochs.get((topic, partition))
        return history[-1][0] if history else 0

    def epoch_history(self, topic: str, partition: int) -> list[tuple[int, int]]:
        return self.epochs.get((topic, partition)) or [(0, 0)]

    def node(self, node_id: int) -> ClusterNode:
        try:
            return self._by_id[int(node_id)]
        except (KeyError, TypeError, ValueError):
            raise KeyError(f"no broker with node id {node_id!r} (nodes: {self._ids})") from None

    @property
    def node_ids(self) -> list[int]:
        return list(self._ids)

    # -- moves ----------------------------------------------------------------------------------

    def move_leader(self, topic: str, partition: int, node_id: int | None = None) -> dict[str, Any]:
        """Move a partition's leadership (to `node_id`, or the next node); its leader epoch bumps."""
        log_ = self.state.logs.get(topic, partition)
        if log_ is None:
            raise KeyError(f"no partition {topic}-{partition}")
        old = self.leader(topic, partition)
        new = self._next(old) if node_id is None else self.node(node_id).config.node_id
        history = self.epochs.setdefault((topic, partition), [(0, 0)])
        epoch = history[-1][0] + 1
        history.append((epoch, log_.log_end_offset))
        log_.leader_epoch = epoch  # batches appended from now on carry it
        self.leaders[(topic, partition)] = new
        self._moved()
        t = self.state.topics.get(topic)
        for node in self.nodes:  # the old leader's share partitions go (SharePartitionListener.onBecomingFollower)
            manager = node.__dict__.get("share_partitions")
            if manager is not None and t is not None:
                manager.remove_topic_partition(t.topic_id, partition)
        log.info("leader moved", topic=topic, partition=partition, old=old, new=new, leader_epoch=epoch)
        return {"topic": topic, "partition": partition, "old_leader": old, "leader": new, "leader_epoch": epoch}

    async def move_coordinator(self, partition: int, node_id: int | None = None) -> dict[str, Any]:
        """Move an `__consumer_offsets` partition: its groups' coordinator changes. The old shard
        unloads (parked JoinGroup/SyncGroup get NOT_COORDINATOR), a new one loads from the log."""
        coordinator = self.state.coordinator
        assert coordinator is not None
        if not 0 <= partition < len(coordinator.shards):
            raise KeyError(f"no partition {OFFSETS_TOPIC}-{partition}")
        coordinator.flush_appends()  # under the old leader epoch
        moved = self.move_leader(OFFSETS_TOPIC, partition, node_id)
        shard = await coordinator.runtime.move(partition)
        log.info(
            "coordinator moved",
            partition=partition,
            old=moved["old_leader"],
            new=moved["leader"],
            groups=len(shard.groups) + len(shard.consumer_groups),
        )
        return moved

    async def move_share_coordinator(self, partition: int, node_id: int | None = None) -> dict[str, Any]:
        """Move a `__share_group_state` partition: the share coordinator of its share partitions
        changes; its shard unloads and a new one loads from the log."""
        share = self.state.share_coordinator
        if share is None:
            raise KeyError("share groups are not enabled (--group-coordinator-rebalance-protocols)")
        if not 0 <= partition < len(share.shards):
            raise KeyError(f"no partition {share.topic_name}-{partition}")
        share.runtime.flush_appends()  # under the old leader epoch
        moved = self.move_leader(share.topic_name, partition, node_id)
        shard = await share.runtime.move(partition)
        log.info("share coordinator moved", partition=partition, old=moved["old_leader"], new=moved["leader"], states=len(shard.states))
        return moved

    def share_coordinator_of(self, group: str, topic_id: Any, partition: int) -> tuple[int, int]:
        """(partition of `__share_group_state`, node id) of a share partition's share coordinator."""
        share = self.state.share_coordinator
        assert share is not None
        state_partition = share.partition_of(group, topic_id, partition)
        return state_partition, self.leader(share.topic_name, state_partition)

    async def fail_over(self, node_id: int) -> dict[str, Any]:
        """What Kafka's controller does when a broker dies: every partition it leads (and every
        `__consumer_offsets` partition, so its groups' coordinators) moves to the next node."""
        self.node(node_id)
        if len(self._ids) < 2:
            return {"moved": 0}
        moved = 0
        for topic in list(self.state.topics.topics.values()):
            for p in range(topic.partitions):
                if self.leader(topic.name, p) != node_id:
                    continue
                if topic.name == OFFSETS_TOPIC:
                    await self.move_coordinator(p)
                elif self.state.share_coordinator is not None and topic.name == self.state.share_coordinator.topic_name:
                    await self.move_share_coordinator(p)
                else:
                    self.move_leader(topic.name, p)
                moved += 1
        return {"moved": moved}

    def coordinator_of(self, group_id: str) -> tuple[int, int]:
        """(partition of `__consumer_offsets`, node id) of a group's coordinator."""
        assert self.state.coordinator is not None
        partition = self.state.coordinator.partition_for(group_id)
        return partition, self.leader(OFFSETS_TOPIC, partition)

    def _next(self, node_id: int) -> int:
        return self._ids[(self._ids.index(node_id) + 1) % len(self._ids)]

    def _moved(self) -> None:
        self.generation += 1
        for node in self.nodes:
            node.__dict__.pop("_metadata_cache", None)

    # -- the control API's entry (broker/cluster/chaos.py, control.py) --------------------------

    async def apply(self, op: str, params: dict[str, Any]) -> Any:
        """Moves, or a node's chaos operation (`node`: its id; the first node by default);
        `state` and `clear` cover every node."""
        from broker.cluster.chaos import ChaosError

        def int_param(name: str, required: bool = True) -> int | None:
            value = params.pop(name, None)
            if value is None:
                if required:
                    raise ChaosError(f"{op} needs {name}")
                return None
            if isinstance(value, bool) or not isinstance(value, int):
                raise ChaosError(f"{name} must be an integer")
            return value

        try:
            if op == "move_leader":
                topic = params.pop("topic", None)
                if not isinstance(topic, str):
                    raise ChaosError("move_leader needs topic")
                partition, node = int_param("partition"), int_param("node", False)
                self._no_more(op, params)
                result = self.move_leader(topic, partition or 0, node)
            elif op == "move_coordinator":
                group = params.pop("group", None)
                partition = int_param("partition", group is None)
                node = int_param("node", False)
                self._no_more(op, params)
                if group is not None:
                    partition = self.coordinator_of(str(group))[0]
                result = await self.move_coordinator(partition or 0, node)
            elif op == "move_share_coordinator":
                key = params.pop("key", None)
                partition = int_param("partition", key is None)
                node = int_param("node", False)
                self._no_more(op, params)
                if key is not None:
                    from broker.share.coordinator.service import parse_coordinator_key

                    try:
                        partition = self.share_coordinator_of(*parse_coordinator_key(str(key)))[0]
                    except ValueError as exc:
                        raise ChaosError(f"key: {exc}") from None
                result = await self.move_share_coordinator(partition or 0, node)
            elif op == "state" and "node" not in params:
                self._no_more(op, params)
                return {
                    "nodes": {str(n.config.node_id): n.chaos.state() for n in self.nodes},
                    "moved_leaders": [
                        {"topic": t, "partition": p, "leader": n, "leader_epoch": self.leader_epoch(t, p)}
                        for (t, p), n in self.leaders.items()
                    ],
                }
            elif op == "down" and params.pop("failover", False):
                node = int_param("node")
                result = {"down": (await self.node(node or 0).chaos.apply("down", params))["down"], **(await self.fail_over(node or 0))}
                return result
            elif op == "clear" and "node" not in params:
                self._no_more(op, params)
                for n in self.nodes:
                    await n.chaos.clear()
                return {"cleared": self.node_ids}
            else:
                node = int_param("node", False)
                target = self.nodes[0] if node is None else self.node(node)
                return await target.chaos.apply(op, params)
        except KeyError as exc:
            raise ChaosError(str(exc.args[0]) if exc.args else str(exc)) from None
        self.state.faults.operations[op] += 1
        log.info("chaos", op=op, **result)
        return result

    @staticmethod
    def _no_more(op: str, params: dict[str, Any]) -> None:
        from broker.cluster.chaos import ChaosError

        if params:
            raise ChaosError(f"unknown parameter(s) for {op}: {', '.join(sorted(params))}")

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def chaos(self) -> Any:
        """The control entry of the whole cluster: `await cluster.chaos.apply(op, params)`."""
        return self.state.chaos

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    @property
    def metrics_address(self) -> str | None:
        return self.state.metrics_address

    async def start(self) -> None:
        t0 = time.monotonic()
        await self.state.start()
        try:
            for node in self.nodes:
                await node.start()
        except BaseException:
            await self.stop()
            raise
        log.info(
            "broker ready",
            bootstrap=self.bootstrap,
            nodes={n.config.node_id: host_port(n.advertised_host, n.advertised_port) for n in self.nodes},
            cluster_id=self.state.cluster_id,
            data_dir=str(self.state.datadir.path) if self.state.datadir else None,
            metrics=self.metrics_address,
            startup_ms=round((time.monotonic() - t0) * 1000, 1),
        )

    async def stop(self) -> None:
        for node in self.nodes:
            node.stop_accepting()
        await self.state.stop()  # coordinators first: parked JoinGroup/SyncGroup get NOT_COORDINATOR
        for node in self.nodes:
            await node.close_connections()

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        await serve_until_signalled(self.start, self.stop)
