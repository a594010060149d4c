"""The group coordinator service: owns `__consumer_offsets` and routes each group to its shard.

p(group) = Utils.abs(group.hashCode()) % N (CO-1..CO-3). Shards load in the background after
the broker starts listening; until a shard is loaded its groups answer
COORDINATOR_LOAD_IN_PROGRESS (GE-1, GE-2).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from broker.coordinator.classic import ClassicGroup
from broker.coordinator.shard import CoordinatorShard, ShardState
from broker.runtime.errors import CoordinatorError
from broker.runtime.internal_topic import ensure_internal_topic, load_in_turn
from broker.runtime.turn import CommitTurn
from broker.topics.catalog import OFFSETS_TOPIC, Topic
from protocol.errors import ErrorCode
from protocol.javahash import partition_for

if TYPE_CHECKING:
    from broker.server import Broker

log = structlog.get_logger("kaflet.coordinator")


class CoordinatorStats:
    """Counters the metrics endpoint reads; callbacks let it observe rebalance durations."""

    def __init__(self) -> None:
        self.offset_commits = 0
        self.offset_expirations = 0
        self.offset_deletions = 0
        self.rebalances_completed = 0
        # KIP-848 consumer groups
        self.consumer_heartbeats = 0
        self.consumer_epoch_bumps = 0
        self.consumer_members_fenced = 0
        self.consumer_reconciliations = 0
        self.on_rebalance: list[Callable[[ClassicGroup, float], Any]] = []

    def rebalance_completed(self, group: ClassicGroup, duration_s: float) -> None:
        self.rebalances_completed += 1
        for callback in self.on_rebalance:
            callback(group, duration_s)


class GroupCoordinator:
    topic_name = OFFSETS_TOPIC

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.num_partitions = broker.config.offsets_partitions
        self.shards: list[CoordinatorShard] = []
        self.active = False
        self.stats = CoordinatorStats()
        self.loaded = asyncio.Event()
        self.load_ms = 0.0
        self._load_task: asyncio.Task[None] | None = None
        self._partitions: dict[str, int] = {}
        self._dirty: dict[CoordinatorShard, None] = {}  # shards with enqueued records, in order
        # Shards whose flush of enqueued records failed since the last commit turn (turn.py).
        self._failed: dict[CoordinatorShard, CoordinatorError] = {}
        self.commit_turn = CommitTurn(self)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Create `__consumer_offsets` if needed (RC-1) and begin loading every shard."""
        self.broker.topics.on_deleted.append(self._on_topic_deleted)
        self.broker.topics.on_created.append(lambda topic: self._on_topic_changed(topic, True))
        self.broker.topics.on_partitions_added.append(lambda topic, _old: self._on_topic_changed(topic, False))
        self.active = True
        self._create_shards()

    def _create_shards(self) -> None:
        from broker.config.topic_configs import effective_configs

        topic = ensure_internal_topic(
            self.broker.topics,
            OFFSETS_TOPIC,
            self.num_partitions,
            {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(self.config.offsets_topic_segment_bytes),
                "delete.retention.ms": str(self.config.offsets_delete_retention_ms),
            },
            "--offsets-partitions",
        )
        self.max_batch_bytes = int(effective_configs(topic, self.config)["max.message.bytes"])
        self.shards = [CoordinatorShard(self, p) for p in range(self.num_partitions)]
        self.loaded.clear()
        self._load_task = asyncio.get_running_loop().create_task(self._load_all())

    @property
    def topic_missing(self) -> bool:
        return self.broker.topics.get(OFFSETS_TOPIC) is None

    def recreate_topic(self) -> None:
        """CO-7: a FindCoordinator that finds `__consumer_offsets` deleted creates it again (empty)."""
        if self.active and self.topic_missing:
            log.warning("re-creating deleted __consumer_offsets; every group starts empty")
            self._create_shards()

    async def _load_all(self) -> None:
        self.load_ms = await load_in_turn(self.shards)  # yields to the listener and requests between shards
        self.loaded.set()
        log.info(
            "coordinator loaded",
            shards=len(self.shards),
            failed=[s.partition for s in self.shards if s.state is ShardState.FAILED],
            groups=sum(len(s.groups) for s in self.shards),
            offsets=sum(s.offsets.count for s in self.shards),
            records=sum(s.loaded_records for s in self.shards),
            load_ms=round(self.load_ms, 1),
        )

    async def stop(self) -> None:
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
            try:
                await self._load_task
            except (asyncio.CancelledError, Exception):
                pass
        self.active = False
        for shard in self.shards:
            shard.unload()

    @property
    def all_loaded(self) -> bool:
        return bool(self.shards) and all(s.state is ShardState.ACTIVE for s in self.shards)

    # -- routing --------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def shard_for(self, group_id: str) -> CoordinatorShard:
        """GE-1: the active shard of `group_id`, or CoordinatorError with why not."""
        if not self.active:
            raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        partition = self._partitions.get(group_id)
        if partition is None:
            partition = partition_for(group_id, self.num_partitions)
            if len(self._partitions) >= 100_000:
                self._partitions.clear()
            self._partitions[group_id] = partition
        shard = self.shards[partition]
        if shard.state is ShardState.ACTIVE:
            return shard
        if shard.state is ShardState.LOADING:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        raise CoordinatorError(ErrorCode.NOT_COORDINATOR)

    def mark_dirty(self, shard: CoordinatorShard) -> None:
        self._dirty[shard] = None

    def take_dirty(self) -> dict[CoordinatorShard, None]:
        dirty, self._dirty = self._dirty, {}
        return dirty

    def note_failed(self, shard: CoordinatorShard, exc: CoordinatorError) -> None:
        self._failed[shard] = exc

    def take_failed(self) -> dict[CoordinatorShard, CoordinatorError]:
        failed, self._failed = self._failed, {}
        return failed

    def flush_appends(self) -> None:
        """Append the records enqueued by batched operations (see CoordinatorShard.enqueue) now,
        ending the commit turn early (turn.py); raises AppendsFailed for the shards that failed."""
        self.commit_turn()

    @property
    def batches_commits(self) -> bool:
        """Commits are batched unless every answer must wait for an fsync (--fsync always)."""
        return self.config.fsync != "always"

    def active_shards(self) -> list[CoordinatorShard]:
        return [s for s in self.shards if s.state is ShardState.ACTIVE]

    def any_loading(self) -> bool:
        return any(s.state is ShardState.LOADING for s in self.shards)

    # -- issue 13 ------------------------------------------------------------------------

    def request_rebalance(self, group_id: str, reason: str = "rebalance requested") -> Any:
        """Bump a consumer group's epoch so its target assignment is recomputed (`kaflet groups rebalance`,
        the `kaflet.rebalance` group config); CoordinatorError when the group is not a consumer group here."""
        return self.shard_for(group_id).consumer.request_rebalance(group_id, reason)

    # -- topic events ---------------------------------------------------------------------

    def _on_topic_deleted(self, topic: Topic) -> None:
        if topic.name == OFFSETS_TOPIC:
            # As when Kafka's coordinator resigns its partitions: parked requests get NOT_COORDINATOR.
            if self._load_task is not None:
                self._load_task.cancel()
            for shard in self.shards:
                shard.unload()
            return
        for shard in self.shards:
            if shard.state is ShardState.ACTIVE:
                shard.on_partitions_deleted(topic.name, range(topic.partitions))
        self._on_topic_changed(topic, True)

    def _on_topic_changed(self, topic: Topic, created_or_deleted: bool) -> None:
        """KH-8: consumer groups subscribed to the topic (by name or regex) refresh their
        subscription metadata, and so bump their epoch, at their next heartbeat."""
        if topic.internal:
            return
        for shard in self.shards:
            if shard.state is ShardState.ACTIVE and shard.consumer_groups:
                shard.consumer.on_topic_event(topic.name, created_or_deleted)
