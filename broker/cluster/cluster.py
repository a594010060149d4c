"""Several brokers in one process and one event loop (`kaflet serve --brokers N`, `Cluster`).

One headless state broker holds what belongs to the cluster (data dir, topics, partition logs,
the group and transaction coordinators); N `ClusterNode`s each have their own node id, rack,
listener, advertised address, connections, faults and chaos, and reach the shared state through
their state broker. The data of a partition is stored once: replication is a view.

What the cluster holds is what Kafka's controller holds, decided as it decides
(broker/cluster/replicas.py): each partition's replicas (placed at creation by Kafka's striped,
rack-aware placer, stored with the topic), its ISR, ELR and leader, and its leader epochs. A node
taken down by chaos is fenced: it leaves every ISR and its partitions elect another leader among
the in-sync replicas; a partition with none left is offline until one returns. A node brought
back up rejoins the ISR of its partitions at once (it shares their log) and, as Kafka's periodic
leader balancing does, leads its preferred partitions again after leader.imbalance.check.interval.
The leader of an `__consumer_offsets` partition is its groups' coordinator: when it changes, the
shard unloads (parked requests get NOT_COORDINATOR) and a new one loads from the log.

Where Kafka is silent or kaflet decides (docs/decisions.md):
- a node is fenced as soon as it is taken down, in either mode (Kafka: at once after a controlled
  shutdown, after broker.session.timeout.ms for a crash or a hang);
- leader epochs, ISRs and fenced nodes live in memory: a restarted cluster starts with every node
  up, every replica in sync and the preferred replicas leading at epoch 0;
- the internal topics have min(3, N) replicas (Kafka refuses to create them with fewer than
  offsets.topic.replication.factor brokers);
- the transaction coordinator of a transactional id is the leader of its `__transaction_state`
  partition; InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn sent elsewhere get
  NOT_COORDINATOR; its state stays loaded when that leader changes;
- request metrics count every node's requests together (one metrics listener, the state broker's);
- share groups (KIP-932): each node has its own share sessions and the share partitions of the
  partitions it leads (a leader change drops them, the new leader loads them from the share
  coordinator); the share coordinator of a share partition is the leader of its
  `__share_group_state` partition (FindCoordinator, the share-state APIs), which moves with that
  leadership (`move_share_coordinator`, a node taken down) as the group coordinator does; the
  share partitions reach it in process, wherever it is.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import zlib
from typing import TYPE_CHECKING, Any

import structlog

from broker.cluster.replicas import NO_LEADER, LeaderChange, PartitionState, ReplicaStates
from broker.runtime.errors import CoordinatorError
from broker.security.listeners import advertised_for
from broker.security.listeners import for_node as listeners_for_node
from broker.server import Broker, host_port, serve_until_signalled
from broker.topics.placement import Placement, UsableBroker
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.config import Config
    from broker.topics.catalog import Topic, TopicManager
    from storage.manager import LogManager

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

    Node i (0-based) has node id config.node_id + i, listens on config.port + i (0: a free port
    each) and is in rack i of --broker-rack (one rack for all, or one per node).
    """

    def __init__(self, config: Config | None = None, brokers: int = 3, **overrides: Any) -> None:
        if brokers < 1:
            raise ValueError("a cluster has at least one broker")
        self.state = Broker(config, brokers=brokers, **overrides)
        self.state.headless = True
        self.state.cluster = self
        self.config = self.state.config
        base = self.config
        racks = dataclasses.replace(base, brokers=brokers).broker_racks()
        self.nodes: list[ClusterNode] = []
        for i in range(brokers):
            port = base.port + i if base.port else 0
            advertised_port = base.advertised_port + i if base.advertised_port else None
            node_config = dataclasses.replace(
                base,
                node_id=base.node_id + i,
                port=port,
                advertised_port=advertised_port,
                broker_rack=racks[i],
                **listeners_for_node(base, i),
            )
            self.nodes.append(ClusterNode(self, node_config))
        self._by_id = {n.config.node_id: n for n in self.nodes}
        self._ids = [n.config.node_id for n in self.nodes]
        self.racks: dict[int, str | None] = {n.config.node_id: n.config.broker_rack for n in self.nodes}
        self.fenced: set[int] = set()  # nodes taken down: out of every ISR, leading nothing
        self.replicas: ReplicaStates  # made when the state broker opens its topics (attach)
        self.generation = 0  # bumped at each change of leaders or ISRs (metadata caches)
        self._moves: set[asyncio.Task[Any]] = set()  # coordinator shards moving after a change
        self._fence_changes: dict[int, int] = {}  # node -> leaderships it lost when fenced
        self._balancer: asyncio.Task[None] | None = None

    # -- the metadata the cluster owns -----------------------------------------------------------

    def attach(self, topics: TopicManager, logs: LogManager) -> None:
        """Called by the state broker once its topic catalog and logs exist, before anything is
        created: placement, replicas and racks become the cluster's."""
        from broker.config.topic_configs import effective_configs

        config = self.config
        topics.placement = Placement(self.usable_brokers, config.default_replication_factor)
        topics.replicas_of = self._stored_replicas
        topics.rack_of = self.racks.get
        topics.on_deleted.append(lambda topic: self.replicas.forget(topic.name))

        def log_end(topic: str, partition: int) -> int:
            log_ = logs.get(topic, partition)
            return log_.log_end_offset if log_ is not None else 0

        def on_epoch(topic: str, partition: int, epoch: int) -> None:
            log_ = logs.get(topic, partition)
            if log_ is not None:
                log_.leader_epoch = epoch  # batches appended from now on carry it
                log_.wake_waiters()  # parked fetches answer now, from the new leader's point of view

        self.replicas = ReplicaStates(
            topics.replicas_of,
            self.alive,
            lambda topic: int(effective_configs(topic, config)["min.insync.replicas"]),
            lambda topic: bool(effective_configs(topic, config)["unclean.leader.election.enable"]),
            log_end,
            on_epoch,
        )

    def _stored_replicas(self, topic: Topic, partition: int) -> list[int]:
        if topic.replicas is not None and partition < len(topic.replicas):
            return topic.replicas[partition]
        # A topic stored without an assignment (an older data dir): one replica, spread by name.
        return [self._ids[(zlib.crc32(topic.name.encode()) + partition) % len(self._ids)]]

    def usable_brokers(self) -> list[UsableBroker]:
        return [UsableBroker(n, self.racks[n], n in self.fenced) for n in self._ids]

    def alive(self, node_id: int) -> bool:
        """Registered and not fenced."""
        return node_id in self._by_id and node_id not in self.fenced

    def alive_nodes(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.config.node_id not in self.fenced]

    def controller_id(self) -> int:
        """What Metadata and DescribeCluster name as the controller: Kafka's brokers name a random
        live broker; kaflet the first live one (the same in every answer), -1 with none."""
        return next((n for n in self._ids if n not in self.fenced), -1)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        """A partition's replicas, ISR, ELR, leader and leader epoch (None: no such partition)."""
        found = self.state.topics.get(topic)
        if found is None or not 0 <= partition < found.partitions:
            return None
        return self.replicas.get(found, partition)

    def leader(self, topic: str, partition: int) -> int:
        state = self.partition(topic, partition)
        return state.leader if state is not None else NO_LEADER

    def leader_epoch(self, topic: str, partition: int) -> int:
        state = self.partition(topic, partition)
        return state.leader_epoch if state is not None else 0

    def epoch_history(self, topic: str, partition: int) -> list[tuple[int, int]]:
        state = self.partition(topic, partition)
        return state.epochs if state is not None else [(0, 0)]

    def current_leader(self, topic: str, partition: int, listener: str | None) -> tuple[int, int, tuple[int, str, int, str | None] | None]:
        """KIP-951 (KafkaApis.getCurrentLeader): a partition's leader id and epoch, and the leader's
        endpoint on `listener` while it is up (None otherwise)."""
        state = self.partition(topic, partition)
        if state is None:
            return NO_LEADER, -1, None
        if not self.alive(state.leader):
            return state.leader, state.leader_epoch, None
        node = self._by_id[state.leader]
        host, port = advertised_for(node, listener)
        return state.leader, state.leader_epoch, (state.leader, host, port, node.config.broker_rack)

    def racks_of(self, topic: str, partition: int) -> frozenset[str]:
        """The racks of a partition's replicas (the topic catalog's racks_of)."""
        return self.state.topics.racks_of(topic, partition)

    def node(self, node_id: int) -> ClusterNode:
        try:
            return self._by_id[int(node_id)]
        except (KeyError, TypeError, ValueError):
            raise KeyError(f"no broker with node id {node_id!r} (nodes: {self._ids})") from None

    @property
    def node_ids(self) -> list[int]:
        return list(self._ids)

    # -- changes ------------------------------------------------------------------------------

    def move_leader(self, topic: str, partition: int, node_id: int | None = None) -> dict[str, Any]:
        """Move a partition's leadership to `node_id` (default: the next in-sync replica, or the
        next live node when it has no other); its leader epoch bumps. A node that is not a
        replica takes the leader's place among them (a reassignment, kept with the topic)."""
        found = self.state.topics.get(topic)
        if found is None or not 0 <= partition < found.partitions or self.state.logs.get(topic, partition) is None:
            raise KeyError(f"no partition {topic}-{partition}")
        state = self.replicas.get(found, partition)
        old = state.leader
        if node_id is None:
            new = self._next_replica(state)
        else:
            new = self.node(node_id).config.node_id
            if not self.alive(new):
                raise KeyError(f"broker {new} is down: it cannot lead")
        if found.name == OFFSETS_TOPIC and self.state.coordinator is not None:
            self.state.coordinator.flush_appends()  # under the old leader epoch
        share = self.state.share_coordinator
        if share is not None and found.name == share.topic_name:
            share.runtime.flush_appends()
        replicas_before = list(state.replicas)
        change = self.replicas.move(found, partition, new)
        if state.replicas != replicas_before:
            self._store_replicas(found, partition, state.replicas)
        self._changed([change], "leader moved")
        return {"topic": topic, "partition": partition, "old_leader": old, "leader": new, "leader_epoch": change.leader_epoch}

    def _next_replica(self, state: PartitionState) -> int:
        """The live in-sync replica after the leader in replica order, else the next live node."""
        if state.leader in state.replicas:
            i = state.replicas.index(state.leader)
            order = state.replicas[i + 1 :] + state.replicas[:i]
        else:
            order = list(state.replicas)
        for r in order:
            if r in state.isr and self.alive(r) and r != state.leader:
                return r
        start = state.leader if state.leader in self._by_id else state.replicas[0]
        for r in self._after(start):
            if self.alive(r):
                return r
        raise KeyError("no live broker can lead it")

    def _after(self, node_id: int) -> list[int]:
        """Every other node id, in order after `node_id` (cyclic)."""
        i = self._ids.index(node_id) if node_id in self._ids else -1
        return self._ids[i + 1 :] + self._ids[: max(i, 0)]

    def _store_replicas(self, topic: Topic, partition: int, replicas: list[int]) -> None:
        current = [list(self._stored_replicas(topic, p)) for p in range(topic.partitions)]
        current[partition] = list(replicas)
        self.state.topics.set_replicas(topic.name, current)

    async def move_coordinator(self, partition: int, node_id: int | None = None) -> dict[str, Any]:
        """Move an `__consumer_offsets` partition: its groups' coordinator changes. The old shard
        unloads (parked JoinGroup/SyncGroup get NOT_COORDINATOR), a new one loads from the log."""
        coordinator = self.state.coordinator
        assert coordinator is not None
        if not 0 <= partition < len(coordinator.shards):
            raise KeyError(f"no partition {OFFSETS_TOPIC}-{partition}")
        moved = self.move_leader(OFFSETS_TOPIC, partition, node_id)
        await self.settled()
        return moved

    async def move_share_coordinator(self, partition: int, node_id: int | None = None) -> dict[str, Any]:
        """Move a `__share_group_state` partition: the share coordinator of its share partitions
        changes; its shard unloads and a new one loads from the log."""
        share = self.state.share_coordinator
        if share is None:
            raise KeyError("share groups are not enabled (--group-coordinator-rebalance-protocols)")
        if not 0 <= partition < len(share.shards):
            raise KeyError(f"no partition {share.topic_name}-{partition}")
        moved = self.move_leader(share.topic_name, partition, node_id)
        await self.settled()
        return moved

    def share_coordinator_of(self, group: str, topic_id: Any, partition: int) -> tuple[int, int]:
        """(partition of `__share_group_state`, node id) of a share partition's share coordinator."""
        share = self.state.share_coordinator
        assert share is not None
        state_partition = share.partition_of(group, topic_id, partition)
        return state_partition, self.leader(share.topic_name, state_partition)

    def node_down(self, node_id: int) -> list[LeaderChange]:
        """A node was taken down: Kafka's controller fences it (handleBrokerFenced). It leaves
        every ISR; the partitions it led elect another leader, or go offline."""
        if node_id in self.fenced or node_id not in self._by_id:
            return []
        if self.state.coordinator is not None and self.state.coordinator.active:
            self.state.coordinator.flush_appends()  # under the old leader epochs
        if self.state.share_coordinator is not None:
            self.state.share_coordinator.runtime.flush_appends()
        topics = self.state.topics.topics.values()
        for _ in self.replicas.all(topics):  # every partition's state as it was while the node was up
            pass
        self.fenced.add(node_id)
        changes = self.replicas.fence(node_id, topics)
        self._fence_changes[node_id] = sum(1 for c in changes if c.old_leader == node_id and c.leader != NO_LEADER)
        self._changed(changes, "broker fenced", node=node_id)
        return changes

    async def node_up(self, node_id: int) -> list[LeaderChange]:
        """A node came back: unfenced, it rejoins the ISRs and may lead leaderless partitions."""
        if node_id not in self.fenced:
            return []
        self.fenced.discard(node_id)
        self._fence_changes.pop(node_id, None)
        changes = self.replicas.unfence(node_id, self.state.topics.topics.values())
        self._changed(changes, "broker unfenced", node=node_id)
        await self.settled()
        return changes

    async def fail_over(self, node_id: int) -> dict[str, Any]:
        """kaflet's failover of a node taken down: every partition it was the last in-sync replica
        of gets another live node in its place among the replicas (a reassignment that completes at
        once, the data being shared), so no partition stays offline. Partitions with another
        in-sync replica elected one when the node was fenced."""
        self.node(node_id)
        self.node_down(node_id)
        moved = self._fence_changes.get(node_id, 0)
        reassigned: list[LeaderChange] = []
        for topic, p, state in list(self.replicas.all(self.state.topics.topics.values())):
            if node_id not in state.replicas or state.online:
                continue
            new = next((n for n in self._after(node_id) if self.alive(n) and n not in state.replicas), None)
            if new is None:
                continue
            change = self.replicas.reassign(topic, p, node_id, new)
            self._store_replicas(topic, p, state.replicas)
            if change is not None:
                reassigned.append(change)
        self._changed(reassigned, "partitions reassigned", node=node_id)
        await self.settled()
        return {"moved": moved + len(reassigned)}

    def elect_preferred_leaders(self) -> list[LeaderChange]:
        """Kafka's leader balancing (auto.leader.rebalance.enable): every partition whose preferred
        replica (the first) is in sync and up but does not lead gets it back as leader."""
        changes = []
        for topic, p, state in list(self.replicas.all(self.state.topics.topics.values())):
            if state.leader != state.replicas[0]:
                change = self.replicas.elect_preferred(topic, p)
                if change is not None:
                    changes.append(change)
        self._changed(changes, "preferred leaders elected")
        return changes

    async def _balance_leaders(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            self.elect_preferred_leaders()

    def _changed(self, changes: list[LeaderChange], event: str, **fields: Any) -> None:
        """Leaders or ISRs changed: metadata caches go; coordinator shards whose partition changed
        leader move (in the background: `settled()` waits for them)."""
        self.generation += 1
        for node in self.nodes:
            node.__dict__.pop("_metadata_cache", None)
        coordinator = self.state.coordinator
        share = self.state.share_coordinator
        for change in changes:
            if change.leader != change.old_leader:
                self._drop_share_partitions(change)
            log.info(
                "leader changed",
                topic=change.topic,
                partition=change.partition,
                old=change.old_leader,
                new=change.leader,
                leader_epoch=change.leader_epoch,
                reason=event,
            )
            if change.topic == OFFSETS_TOPIC and coordinator is not None and coordinator.active:
                task = asyncio.get_running_loop().create_task(self._move_shard(change))
                self._moves.add(task)
                task.add_done_callback(self._moves.discard)
            elif share is not None and change.topic == share.topic_name and change.leader != change.old_leader:
                task = asyncio.get_running_loop().create_task(self._move_share_shard(change))
                self._moves.add(task)
                task.add_done_callback(self._moves.discard)
        if fields or changes:
            log.info(event, leaders_changed=len(changes), **fields)

    async def _move_shard(self, change: LeaderChange) -> None:
        coordinator = self.state.coordinator
        assert coordinator is not None
        shard = await coordinator.runtime.move(change.partition)
        log.info(
            "coordinator moved",
            partition=change.partition,
            old=change.old_leader,
            new=change.leader,
            groups=len(shard.groups) + len(shard.consumer_groups),
        )

    def _drop_share_partitions(self, change: LeaderChange) -> None:
        """A partition's leader changed: every node's share partition of it goes (Kafka's
        SharePartitionListener.onBecomingFollower); the new leader loads it from the share
        coordinator at its next ShareFetch."""
        topic = self.state.topics.get(change.topic)
        if topic is None:
            return
        for node in self.nodes:
            manager = node.__dict__.get("share_partitions")
            if manager is not None:
                manager.remove_topic_partition(topic.topic_id, change.partition)

    async def _move_share_shard(self, change: LeaderChange) -> None:
        share = self.state.share_coordinator
        assert share is not None
        shard = await share.runtime.move(change.partition)
        log.info("share coordinator moved", partition=change.partition, old=change.old_leader, new=change.leader, states=len(shard.states))

    async def settled(self) -> None:
        """Wait until every coordinator shard moved by a change has loaded."""
        while self._moves:
            await asyncio.gather(*list(self._moves), return_exceptions=True)

    def coordinator_of(self, group_id: str) -> tuple[int, int]:
        """(partition of `__consumer_offsets`, node id) of a group's coordinator (-1: none)."""
        assert self.state.coordinator is not None
        partition = self.state.coordinator.partition_for(group_id)
        return partition, self.leader(OFFSETS_TOPIC, partition)

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
                states = list(self.replicas.states.items())
                return {
                    "nodes": {str(n.config.node_id): n.chaos.state() for n in self.nodes},
                    "fenced": sorted(self.fenced),
                    "moved_leaders": [
                        {"topic": t, "partition": p, "leader": s.leader, "leader_epoch": s.leader_epoch}
                        for (t, p), s in states
                        if s.leader_epoch > 0
                    ],
                    "offline": [{"topic": t, "partition": p} for (t, p), s in states if not s.online],
                }
            elif op == "down" and params.pop("failover", False):
                node = int_param("node")
                target = self.node(node or 0)
                down = (await target.chaos.apply("down", params))["down"]
                result = {"down": down, **(await self.fail_over(target.config.node_id))}
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
        config = self.config
        if config.auto_leader_rebalance_enable and len(self.nodes) > 1:
            interval = config.leader_imbalance_check_interval_seconds
            self._balancer = asyncio.get_running_loop().create_task(self._balance_leaders(interval))
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
        if self._balancer is not None:
            self._balancer.cancel()
        await self.settled()
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
