"""The share coordinator's shard: one partition of `__share_group_state` and the share-partition
states on it (Kafka's ShareCoordinatorShard), on the coordinator runtime (broker/runtime/).

A share partition's state is keyed by (group id, topic id, partition). Its whole state is a
ShareSnapshot record; a write appends a ShareUpdate (a delta merged into the state: the new start
offset, and state batches combined by broker/share/coordinator/combiner.py), and after
`share.coordinator.snapshot.update.records.per.snapshot` updates the next write is a snapshot
again. State changes only through `replay()`, at load and after every write alike.

Operations return CoordinatorResults (records, response); their errors are per partition, as the
share coordinator's responses carry them. Two timers per shard: pruning (records below the
oldest live snapshot are deleted) and cold snapshots (a partition not written for
`share.coordinator.cold.partition.snapshot.interval.ms` gets a fresh snapshot so that pruning
can pass it).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from broker.runtime.result import CoordinatorResult
from broker.share.coordinator.combiner import combine_state_batches
from protocol.errors import ErrorCode
from storage import share_state_records as srec
from storage.share_state_records import StateBatch

if TYPE_CHECKING:
    from broker.runtime.context import CoordinatorContext
    from broker.share.coordinator.service import ShareCoordinator

log = structlog.get_logger("kaflet.share")

PRUNE_TIMER = "share-state-prune"
COLD_SNAPSHOT_TIMER = "share-state-cold-snapshot"

NULL_TOPIC_ID = "The topic id cannot be null."
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
FENCED_LEADER_EPOCH_MESSAGE = "The leader epoch in the request is older than the epoch on the broker."  # FencedLeaderEpochException
NEGATIVE_LEADER_EPOCH = "The leader epoch cannot be a negative number."
NEGATIVE_STATE_EPOCH = "The state epoch cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."

Key = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
Record = tuple[bytes, bytes | None]


@dataclass(slots=True)
class ShareGroupOffset:
    """One share partition's persisted state (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: list[StateBatch] = field(default_factory=list)
    create_timestamp: int = 0
    write_timestamp: int = 0


@dataclass(slots=True)
class PartitionResult:
    """One partition's answer: its error, and what a read returns."""

    partition: int
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = 0
    delivery_complete_count: int = -1
    batches: list[StateBatch] = field(default_factory=list)


def _refused(partition: int, code: ErrorCode, message: str | None = None) -> CoordinatorResult[PartitionResult]:
    """A partition's error answer, no records written (Kafka's message for the code by default)."""
    return CoordinatorResult([], PartitionResult(partition, code, code.message if message is None else message))


class ShareShard:
    def __init__(self, service: ShareCoordinator, context: CoordinatorContext[ShareShard]) -> None:
        self.service = service
        self.context = context
        self.partition = context.partition
        self.topics = service.topics
        self.states: dict[Key, ShareGroupOffset] = {}
        self.leader_epochs: dict[Key, int] = {}
        self.state_epochs: dict[Key, int] = {}
        self.update_counts: dict[Key, int] = {}
        # Offsets manager (Kafka's ShareCoordinatorOffsetsManager): each key's last snapshot offset,
        # and the offset below which no live state needs the log (what pruning may delete).
        self.snapshot_offsets: dict[Key, int] = {}
        self.last_redundant = 1 << 63

    def now_ms(self) -> int:
        return self.context.now_ms()

    # -- replay ---------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None, offset: int = -1, producer_id: int = -1) -> None:
        kind, group, topic_id, partition = srec.parse_share_key(key)
        k = (group, topic_id, partition)
        if kind == srec.SHARE_SNAPSHOT_KEY:
            if value is None:
                self.states.pop(k, None)
                self.leader_epochs.pop(k, None)
                self.state_epochs.pop(k, None)
                self.update_counts.pop(k, None)
            else:
                v = srec.parse_share_snapshot_value(value)
                self._raise_epoch(self.leader_epochs, k, v.leader_epoch)
                self._raise_epoch(self.state_epochs, k, v.state_epoch)
                self.states[k] = ShareGroupOffset(
                    v.snapshot_epoch,
                    v.state_epoch,
                    v.leader_epoch,
                    v.start_offset,
                    v.delivery_complete_count,
                    list(v.batches),
                    v.create_timestamp,
                    v.write_timestamp,
                )
                if self.update_counts.get(k, 0) >= self.service.updates_per_snapshot:
                    self.update_counts[k] = 0
            self._track_snapshot(k, offset, value is None)
        else:
            u = srec.parse_share_update_value(value) if value is not None else None
            if u is None:
                return
            self._raise_epoch(self.leader_epochs, k, u.leader_epoch)
            current = self.states.get(k)
            if current is None:
                self.states[k] = ShareGroupOffset(
                    u.snapshot_epoch, 0, u.leader_epoch, u.start_offset, u.delivery_complete_count, list(u.batches)
                )
            else:
                start = current.start_offset if u.start_offset == -1 else u.start_offset
                current.leader_epoch = current.leader_epoch if u.leader_epoch == -1 else u.leader_epoch
                current.batches = combine_state_batches(current.batches, list(u.batches), start)
                current.start_offset = start
                current.delivery_complete_count = u.delivery_complete_count
            self.update_counts[k] = self.update_counts.get(k, 0) + 1

    @staticmethod
    def _raise_epoch(epochs: dict[Key, int], k: Key, epoch: int) -> None:
        if epochs.get(k, epoch) <= epoch:
            epochs[k] = epoch

    def _track_snapshot(self, k: Key, offset: int, deleted: bool) -> None:
        """ShareCoordinatorOffsetsManager.updateState: the oldest live snapshot bounds pruning."""
        if offset < 0:
            return
        self.last_redundant = min(self.last_redundant, offset)
        self.snapshot_offsets[k] = offset
        if self.snapshot_offsets:
            self.last_redundant = min(self.snapshot_offsets.values())
        if deleted:
            self.snapshot_offsets.pop(k, None)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """`__share_group_state` has no transactions."""

    def on_loaded(self) -> None:
        self._schedule_prune()
        self._schedule_cold_snapshots()

    def on_unloaded(self) -> None:
        pass

    # -- checks shared by the operations ----------------------------------------------------

    def _unknown_partition(self, topic_id: uuid.UUID, partition: int) -> bool:
        topic = self.topics.get_by_id(topic_id)
        return topic is None or topic.partitions <= partition

    # -- operations (each returns a CoordinatorResult) ---------------------------------------

    def initialize_state(
        self, group: str, topic_id: uuid.UUID | None, partition: int, state_epoch: int, start_offset: int
    ) -> CoordinatorResult[PartitionResult]:
        """InitializeShareGroupState for one partition: a new snapshot with no batches."""
        if topic_id is None:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NULL_TOPIC_ID)
        if partition < 0:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if state_epoch < 0:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NEGATIVE_STATE_EPOCH)
        k = (group, topic_id, partition)
        if self.state_epochs.get(k, state_epoch) > state_epoch:
            return _refused(partition, ErrorCode.FENCED_STATE_EPOCH)
        if self._unknown_partition(topic_id, partition):
            return _refused(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        current = self.states.get(k)
        now = self.now_ms()
        snapshot = srec.ShareSnapshot(
            snapshot_epoch=current.snapshot_epoch + 1 if current is not None else 0,
            state_epoch=state_epoch,
            leader_epoch=0,
            start_offset=start_offset,
            delivery_complete_count=-1 if start_offset == -1 else 0,
            create_timestamp=now,
            write_timestamp=now,
            batches=[],
        )
        record = (srec.share_key(srec.SHARE_SNAPSHOT_KEY, group, topic_id, partition), srec.share_snapshot_value(snapshot))
        return CoordinatorResult([record], PartitionResult(partition))

    def write_state(
        self,
        group: str,
        topic_id: uuid.UUID | None,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: list[StateBatch],
    ) -> CoordinatorResult[PartitionResult]:
        """WriteShareGroupState for one partition: a ShareUpdate, or a ShareSnapshot when due."""
        if topic_id is None:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NULL_TOPIC_ID)
        if partition < 0:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if leader_epoch < 0:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NEGATIVE_LEADER_EPOCH)
        if state_epoch < 0:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NEGATIVE_STATE_EPOCH)
        k = (group, topic_id, partition)
        current = self.states.get(k)
        if current is None:
            return _refused(partition, ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED)
        if self.leader_epochs.get(k, leader_epoch) > leader_epoch:
            return _refused(partition, ErrorCode.FENCED_LEADER_EPOCH, FENCED_LEADER_EPOCH_MESSAGE)
        if self.state_epochs.get(k, state_epoch) > state_epoch:
            return _refused(partition, ErrorCode.FENCED_STATE_EPOCH)
        if self._unknown_partition(topic_id, partition):
            return _refused(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return CoordinatorResult(
            [self._state_record(k, current, leader_epoch, start_offset, delivery_complete_count, batches, False)],
            PartitionResult(partition),
        )

    def _state_record(
        self,
        k: Key,
        current: ShareGroupOffset,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: list[StateBatch],
        update_leader_epoch: bool,
    ) -> Record:
        """generateShareStateRecord: a snapshot of the merged state every N updates, else an update."""
        group, topic_id, partition = k
        new_leader_epoch = leader_epoch if update_leader_epoch else current.leader_epoch
        new_start = max(start_offset, current.start_offset)
        count = delivery_complete_count
        if start_offset == current.start_offset:
            count = max(delivery_complete_count, current.delivery_complete_count)
        elif start_offset < current.start_offset:
            count = current.delivery_complete_count
        if self.update_counts.get(k, 0) >= self.service.updates_per_snapshot:
            now = self.now_ms()
            snapshot = srec.ShareSnapshot(
                current.snapshot_epoch + 1,
                current.state_epoch,
                new_leader_epoch,
                new_start,
                count,
                now,
                now,
                combine_state_batches(current.batches, batches, new_start),
            )
            return srec.share_key(srec.SHARE_SNAPSHOT_KEY, group, topic_id, partition), srec.share_snapshot_value(snapshot)
        update = srec.ShareUpdate(current.snapshot_epoch, new_leader_epoch, new_start, count, combine_state_batches([], batches, new_start))
        return srec.share_key(srec.SHARE_UPDATE_KEY, group, topic_id, partition), srec.share_update_value(update)

    def read_state(self, group: str, topic_id: uuid.UUID | None, partition: int, leader_epoch: int) -> CoordinatorResult[PartitionResult]:
        """ReadShareGroupState for one partition; a newer leader epoch is recorded (an update)."""
        if topic_id is None:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NULL_TOPIC_ID)
        if partition < 0:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if leader_epoch < 0:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NEGATIVE_LEADER_EPOCH)
        k = (group, topic_id, partition)
        current = self.states.get(k)
        if current is None:
            return _refused(partition, ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED)
        if self.leader_epochs.get(k, leader_epoch) > leader_epoch:
            return _refused(partition, ErrorCode.FENCED_LEADER_EPOCH, FENCED_LEADER_EPOCH_MESSAGE)
        if self._unknown_partition(topic_id, partition):
            return _refused(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        result = PartitionResult(
            partition,
            state_epoch=current.state_epoch,
            leader_epoch=current.leader_epoch,
            start_offset=current.start_offset,
            delivery_complete_count=current.delivery_complete_count,
            batches=list(current.batches),
        )
        if self.leader_epochs.get(k) == leader_epoch:
            return CoordinatorResult([], result)
        record = self._state_record(k, current, leader_epoch, current.start_offset, current.delivery_complete_count, [], True)
        return CoordinatorResult([record], result)

    def read_summary(self, group: str, topic_id: uuid.UUID | None, partition: int) -> CoordinatorResult[PartitionResult]:
        """ReadShareGroupStateSummary for one partition: -1s for a partition never initialized."""
        if topic_id is None:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NULL_TOPIC_ID)
        if partition < 0:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if self._unknown_partition(topic_id, partition):
            return _refused(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        current = self.states.get((group, topic_id, partition))
        if current is None:
            return CoordinatorResult(
                [], PartitionResult(partition, state_epoch=0, leader_epoch=0, start_offset=-1, delivery_complete_count=-1)
            )
        return CoordinatorResult(
            [],
            PartitionResult(
                partition,
                state_epoch=current.state_epoch,
                leader_epoch=current.leader_epoch,
                start_offset=current.start_offset,
                delivery_complete_count=current.delivery_complete_count,
            ),
        )

    def delete_state(self, group: str, topic_id: uuid.UUID | None, partition: int) -> CoordinatorResult[PartitionResult]:
        """DeleteShareGroupState for one partition: a tombstone, if there is a state."""
        if topic_id is None:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NULL_TOPIC_ID)
        if partition < 0:
            return _refused(partition, ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if self._unknown_partition(topic_id, partition):
            return _refused(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if (group, topic_id, partition) not in self.states:
            return CoordinatorResult([], PartitionResult(partition))
        return CoordinatorResult([(srec.share_key(srec.SHARE_SNAPSHOT_KEY, group, topic_id, partition), None)], PartitionResult(partition))

    def cleanup_deleted_topic(self, topic_id: uuid.UUID) -> CoordinatorResult[None]:
        """maybeCleanupShareState: the states of a deleted topic's partitions are tombstoned."""
        records: list[Record] = [(srec.share_key(srec.SHARE_SNAPSHOT_KEY, g, t, p), None) for (g, t, p) in self.states if t == topic_id]
        return CoordinatorResult(records, None, atomic=False)

    # -- timers ---------------------------------------------------------------------------

    def _schedule_prune(self) -> None:
        self.context.timer.schedule(PRUNE_TIMER, self.service.prune_interval_ms, self.prune)

    def prune(self) -> None:
        """Delete the records no live state needs: those below the oldest live snapshot."""
        self._schedule_prune()
        offset = self.last_redundant
        if offset <= 0 or offset == 1 << 63:
            return
        plog = self.context.log
        if offset > plog.log_start_offset:
            try:
                plog.delete_records(offset)
            except Exception:
                log.warning("pruning __share_group_state failed", partition=self.partition, offset=offset, exc_info=True)

    def _schedule_cold_snapshots(self) -> None:
        self.context.timer.schedule(COLD_SNAPSHOT_TIMER, self.service.cold_snapshot_interval_ms, self.snapshot_cold_partitions)

    def snapshot_cold_partitions(self) -> CoordinatorResult[None]:
        """A fresh snapshot of every partition not written for the cold snapshot interval."""
        self._schedule_cold_snapshots()
        now = self.now_ms()
        if all(s.create_timestamp - s.write_timestamp != 0 for s in self.states.values()):
            return CoordinatorResult([], None)
        records: list[Record] = []
        for (group, topic_id, partition), s in self.states.items():
            if now - s.write_timestamp >= self.service.cold_snapshot_interval_ms:
                snapshot = srec.ShareSnapshot(
                    s.snapshot_epoch + 1,
                    s.state_epoch,
                    s.leader_epoch,
                    s.start_offset,
                    s.delivery_complete_count,
                    s.create_timestamp,
                    now,
                    list(s.batches),
                )
                records.append((srec.share_key(srec.SHARE_SNAPSHOT_KEY, group, topic_id, partition), srec.share_snapshot_value(snapshot)))
        return CoordinatorResult(records, None, atomic=False)

    def describe(self) -> dict[str, Any]:
        return {"states": len(self.states)}
