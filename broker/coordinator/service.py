"""The group coordinator service: `__consumer_offsets` and the groups on it, on the coordinator
runtime (broker/runtime/), as Kafka's GroupCoordinatorService is on its CoordinatorRuntime.

p(group) = Utils.abs(group.hashCode()) % N (CO-1..CO-3). Shards load in the background after
the broker starts listening; until a shard is loaded its groups answer
COORDINATOR_LOAD_IN_PROGRESS (GE-1, GE-2). What is the group coordinator's own is here: the
shard it builds (GroupShard: classic and KIP-848 consumer groups, offsets), its counters, and
what it does when other topics change (OR-5, KH-8).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from broker.coordinator.classic import ClassicGroup
from broker.coordinator.shard import GroupShard
from broker.runtime.metadata import TopicCatalog
from broker.runtime.runtime import InternalTopic, RuntimeServices
from broker.runtime.service import CoordinatorService
from broker.topics.catalog import OFFSETS_TOPIC, Topic

if TYPE_CHECKING:
    from broker.config import Config
    from broker.config.group_configs import GroupConfigs
    from broker.runtime.context import CoordinatorContext


class TopicEvents(TopicCatalog, Protocol):
    """The catalog, and the topic events a group coordinator reacts to (KH-8: subscriptions by name
    or regex see topics come and grow; OR-5: offsets of deleted partitions are tombstoned)."""

    @property
    def on_created(self) -> list[Callable[[Topic], Any]]: ...

    @property
    def on_partitions_added(self) -> list[Callable[[Topic, int], Any]]: ...


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
        # KIP-1071 streams groups
        self.streams_heartbeats = 0
        self.streams_epoch_bumps = 0
        self.streams_members_fenced = 0
        self.streams_reconciliations = 0
        self.on_rebalance: list[Callable[[ClassicGroup, float], Any]] = []

    def rebalance_completed(self, group: ClassicGroup, duration_s: float) -> None:
        self.rebalances_completed += 1
        for callback in self.on_rebalance:
            callback(group, duration_s)


def offsets_topic(config: Config) -> InternalTopic:
    """`__consumer_offsets` as Kafka makes it: compacted, offsets.topic.segment.bytes, its own delete retention."""
    configs = {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(config.offsets_topic_segment_bytes),
        "delete.retention.ms": str(config.offsets_delete_retention_ms),
    }
    return InternalTopic(OFFSETS_TOPIC, config.offsets_partitions, configs, "--offsets-partitions", "every group starts empty")


class GroupCoordinator(CoordinatorService[GroupShard]):
    label = "coordinator"

    def __init__(self, config: Config, services: RuntimeServices, group_configs: GroupConfigs | None = None) -> None:
        super().__init__(offsets_topic(config), services)
        self.config = config
        self.topics: TopicEvents = services.catalog  # type: ignore[assignment]  # the image subscriptions read
        self.logs = services.writer  # lag-aware assignment reads partition logs through it too
        self.group_configs = group_configs
        self.stats = CoordinatorStats()
        # The topic metadata's version (Kafka: the metadata image's offset), a millisecond clock bumped by
        # every topic event, and the version of the last creation: regex resolutions record the first, and
        # one older than the second is stale (broker/coordinator/consumer/manager.py).
        self.metadata_version = int(time.time() * 1000)
        self.new_topics_version = self.metadata_version
        # Commits are batched unless every answer must wait for an fsync (--fsync always).
        self.batches_commits = config.fsync != "always"
        # The share coordinator (broker/share/coordinator/), which share groups' state lives in; set by the server.
        self.share_state: Any = None
        # Told of a share group whose share state was deleted or altered (the share partitions load it again).
        self.share_state_changed: list[Callable[[str], Any]] = []

    def build_shard(self, context: CoordinatorContext[GroupShard]) -> GroupShard:
        return GroupShard(self, context)

    def describe_load(self, shards: list[GroupShard]) -> dict[str, Any]:
        return {
            "groups": sum(len(s.groups) for s in shards),
            "offsets": sum(s.offsets.count for s in shards),
            "records": sum(s.context.loaded_records for s in shards),
        }

    def start(self) -> None:
        """Create `__consumer_offsets` if needed (RC-1), begin loading every shard, and hear of
        other topics' changes."""
        super().start()  # first: its own topic's deletion unloads every shard before the events below
        topics = self.topics
        topics.on_deleted.append(self._on_topic_deleted)
        topics.on_created.append(lambda topic: self._on_topic_changed(topic, True))
        topics.on_partitions_added.append(lambda topic, _old: self._on_topic_changed(topic, False))
        # Kafka's onMetadataUpdate hears of a reassignment too: the replicas' racks are in the topic's hash.
        topics.on_replicas_changed.append(lambda topic: self._on_topic_changed(topic, False))

    # -- issue 13 ------------------------------------------------------------------------

    def request_rebalance(self, group_id: str, reason: str = "rebalance requested") -> Any:
        """Bump a consumer group's epoch so its target assignment is recomputed (`kaflet groups rebalance`,
        the `kaflet.rebalance` group config); CoordinatorError when the group is not a consumer group here."""
        return self.shard_for(group_id).consumer.request_rebalance(group_id, reason)

    # -- topic events ---------------------------------------------------------------------

    def _on_topic_deleted(self, topic: Topic) -> None:
        if topic.name == OFFSETS_TOPIC:
            return  # the runtime unloaded every shard
        for shard in self.active_shards():
            shard.on_partitions_deleted(topic.name, range(topic.partitions))
            if shard.share_groups:
                shard.share.on_topic_deleted(topic.topic_id)
        self._on_topic_changed(topic, True)

    def _on_topic_changed(self, topic: Topic, created_or_deleted: bool) -> None:
        """KH-8: consumer groups subscribed to the topic (by name or regex) refresh their
        subscription metadata, and so bump their epoch, at their next heartbeat; streams groups
        that need it recompute their metadata hash (KS-14)."""
        self.metadata_version = max(self.metadata_version + 1, int(time.time() * 1000))
        if created_or_deleted and self.topics.get(topic.name) is topic:
            self.new_topics_version = self.metadata_version  # a creation (a deleted topic is no longer listed)
        for shard in self.active_shards():
            if shard.consumer_groups:
                shard.consumer.on_topic_event(topic.name, created_or_deleted)
            if topic.internal:
                continue
            if shard.streams_groups:
                shard.streams.on_topic_event(topic.name)
            if shard.share_groups:
                shard.share.on_topic_event(topic.name)
