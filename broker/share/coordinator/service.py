"""The share coordinator (KIP-932): share-partition state over `__share_group_state`, on the
coordinator runtime (broker/runtime/), as Kafka's ShareCoordinatorService is on its
CoordinatorRuntime: the runtime's third user after the group and transaction coordinators.

A share partition's state lives on the partition its key maps to: the key is Kafka's
`"<group>:<topic id>:<partition>"` (the topic id in Kafka's URL-safe base64), routed by
`Utils.abs(key.hashCode()) % N` like every coordinator key (FindCoordinator key type 2 names
the same node). Each operation runs on that partition's shard (broker/share/coordinator/shard.py)
and returns its per-partition result with the durability wait its answer awaits; a routing or
append failure becomes that partition's error, as Kafka's handleOperationException makes it.

Its callers: the share partitions of this broker (broker/share/: the persister reads a share
partition's state when it is first fetched and writes every acknowledgement, release and lock
timeout), the group coordinator (initializing the state of a share group's partitions, deleting
it with the group) and the share-state APIs (broker/apis/share_group_state.py).
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from broker.runtime.errors import CoordinatorError, map_append_error
from broker.runtime.runtime import InternalTopic, RuntimeServices
from broker.runtime.service import CoordinatorService
from broker.share.coordinator.shard import PartitionResult, ShareShard
from storage.share_state_records import StateBatch

if TYPE_CHECKING:
    from broker.config import Config
    from broker.runtime.context import CoordinatorContext
    from broker.topics.catalog import Topic

SHARE_STATE_TOPIC = "__share_group_state"

Answer = tuple[PartitionResult, Awaitable[Any] | None]


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def coordinator_key(group: str, topic_id: uuid.UUID, partition: int) -> str:
    """SharePartitionKey.asCoordinatorKey: "group:topicId:partition"."""
    return f"{group}:{kafka_uuid(topic_id)}:{partition}"


_INT = re.compile(r"[+-]?[0-9]+")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString: URL-safe base64 of 16 bytes (padding optional); ValueError otherwise."""
    if len(text) > 24:
        raise ValueError(f"Input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID")
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"Invalid UUID: {text}") from None
    if len(raw) != 16:
        raise ValueError(f"This byte buffer holds {len(raw)} bytes, not the 16 of a UUID")
    return uuid.UUID(bytes=raw)


def parse_coordinator_key(key: str) -> tuple[str, uuid.UUID, int]:
    """SharePartitionKey.getInstance(String): "groupId:topicId:partition", the group id may hold
    colons (Java's split drops trailing empty parts); ValueError with Kafka's words otherwise."""
    if not key:
        raise ValueError("Share partition key cannot be empty")
    tokens = key.split(":")
    while tokens and tokens[-1] == "":
        tokens.pop()
    if len(tokens) < 3:
        raise ValueError(f"Invalid key format: expected - groupId:topicId:partition, found - {key}")
    group, topic, partition = ":".join(tokens[:-2]), tokens[-2], tokens[-1]
    if not group.strip():
        raise ValueError("GroupId must not be empty")
    try:
        topic_id = parse_kafka_uuid(topic)
    except ValueError:
        raise ValueError(f"Invalid topic ID: {topic}") from None
    if not _INT.fullmatch(partition) or not -(2**31) <= int(partition) < 2**31:
        raise ValueError(f"Invalid partition: {partition}")
    return group, topic_id, int(partition)


def share_state_topic(config: Config) -> InternalTopic:
    """`__share_group_state` as Kafka makes it (shareGroupStateTopicConfigs): delete policy, kept forever."""
    configs = {
        "cleanup.policy": "delete",
        "compression.type": "producer",
        "segment.bytes": str(config.share_coordinator_state_topic_segment_bytes),
        "retention.ms": "-1",
    }
    return InternalTopic(
        SHARE_STATE_TOPIC,
        config.share_coordinator_state_topic_num_partitions,
        configs,
        "--share-coordinator-state-topic-num-partitions",
        "every share group's delivery state starts again",
    )


class ShareCoordinator(CoordinatorService[ShareShard]):
    label = "share coordinator"

    def __init__(self, config: Config, services: RuntimeServices) -> None:
        super().__init__(share_state_topic(config), services)
        self.topics = services.catalog
        self.updates_per_snapshot = config.share_coordinator_snapshot_update_records_per_snapshot
        self.prune_interval_ms = config.share_coordinator_state_topic_prune_interval_ms
        self.cold_snapshot_interval_ms = config.share_coordinator_cold_partition_snapshot_interval_ms
        self.writes = 0  # WriteShareGroupState operations (metrics)

    def build_shard(self, context: CoordinatorContext[ShareShard]) -> ShareShard:
        return ShareShard(self, context)

    def describe_load(self, shards: list[ShareShard]) -> dict[str, Any]:
        return {"states": sum(len(s.states) for s in shards), "records": sum(s.context.loaded_records for s in shards)}

    def start(self) -> None:
        super().start()
        self.topics.on_deleted.append(self._on_topic_deleted)

    def partition_of(self, group: str, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_for(coordinator_key(group, topic_id, partition))

    # -- operations, one share partition each ----------------------------------------------

    def _run(self, group: str, topic_id: uuid.UUID | None, partition: int, op: Any, *args: Any, what: str) -> Answer:
        key = coordinator_key(group, topic_id or uuid.UUID(int=0), partition)
        try:
            result, waiter = self.runtime.write(key, op, group, topic_id, partition, *args)
        except CoordinatorError as exc:
            code = map_append_error(exc.code)
            return PartitionResult(partition, code, f"Unable to {what} share group state: {code.message}"), None
        return result, waiter

    def initialize(self, group: str, topic_id: uuid.UUID | None, partition: int, state_epoch: int, start_offset: int) -> Answer:
        return self._run(group, topic_id, partition, ShareShard.initialize_state, state_epoch, start_offset, what="initialize")

    def write(
        self,
        group: str,
        topic_id: uuid.UUID | None,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: list[StateBatch],
    ) -> Answer:
        self.writes += 1
        return self._run(
            group,
            topic_id,
            partition,
            ShareShard.write_state,
            state_epoch,
            leader_epoch,
            start_offset,
            delivery_complete_count,
            batches,
            what="write",
        )

    def read(self, group: str, topic_id: uuid.UUID | None, partition: int, leader_epoch: int) -> Answer:
        return self._run(group, topic_id, partition, ShareShard.read_state, leader_epoch, what="read")

    def read_summary(self, group: str, topic_id: uuid.UUID | None, partition: int) -> Answer:
        return self._run(group, topic_id, partition, ShareShard.read_summary, what="read summary of")

    def delete(self, group: str, topic_id: uuid.UUID | None, partition: int) -> Answer:
        return self._run(group, topic_id, partition, ShareShard.delete_state, what="delete")

    # -- topic events ---------------------------------------------------------------------

    def _on_topic_deleted(self, topic: Topic) -> None:
        """onTopicsDeleted: the share state of a deleted topic's partitions is tombstoned."""
        if topic.name == SHARE_STATE_TOPIC:
            return  # the runtime unloaded every shard
        for shard in self.active_shards():
            result = shard.cleanup_deleted_topic(topic.topic_id)
            if result.records:
                try:
                    shard.context.apply(result)
                except CoordinatorError:
                    pass  # a failed disk: the states stay, and go at the next deletion or restart
