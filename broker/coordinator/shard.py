"""The group coordinator's shard: a partition of `__consumer_offsets`, its groups and offsets
(Kafka's GroupCoordinatorShard), on the coordinator runtime (broker/runtime/).

Every operation of a shard runs on the event loop without awaiting in the middle, so
operations (requests and timer expirations) are serialized (GE-6). A write goes through the
runtime (`self.write`: the partition's CoordinatorContext), which appends its records as one
batch and applies offset records and tombstones with the same `replay()` that rebuilds the
shard at load; classic-group state is richer than its GroupMetadata record, so (as in Kafka,
whose classic operations do not replay their records) the live group is updated directly and
the record is written from it. Responses to writes wait for the records' durability per the
broker's fsync policy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from broker.coordinator.classic import ClassicGroup, ClassicMember, GroupState
from broker.coordinator.consumer.group import ConsumerGroup
from broker.coordinator.consumer.manager import ConsumerGroupManager
from broker.coordinator.list_order import GroupDict, GroupTable
from broker.coordinator.offsets import OffsetStore
from broker.coordinator.share.group import ShareGroup
from broker.coordinator.share.manager import ShareGroupManager
from broker.coordinator.streams.group import StreamsGroup
from broker.coordinator.streams.manager import StreamsGroupManager
from broker.runtime.errors import CoordinatorError
from broker.runtime.loader import records_of
from broker.runtime.result import CoordinatorResult
from broker.runtime.shard import ShardState
from protocol import records as rec
from protocol.commit_codec import CommitPartition
from protocol.compiled import speedups
from protocol.errors import ErrorCode
from storage import offsets_records as orec
from storage import streams_records as srec
from storage.share_group_records import SHARE_GROUP_RECORD_TYPES

if TYPE_CHECKING:
    from broker.coordinator.service import GroupCoordinator
    from broker.runtime.context import CoordinatorContext

log = structlog.get_logger("kaflet.coordinator")

GROUP_EXPIRATION_KEY = "expire-group-metadata"
_commit_records = speedups.commit_records if speedups is not None else None
_batch_size = speedups.batch_size if speedups is not None else rec.batch_size_py
Record = tuple[bytes, bytes | None]


@dataclass
class DescribedGroup:
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: list[tuple[str, str | None, str, str, bytes, bytes]] = field(default_factory=list)


def utf16_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units (OC-6)."""
    return len(text.encode("utf-16-le")) // 2


class GroupShard:
    def __init__(self, service: GroupCoordinator, context: CoordinatorContext[GroupShard]) -> None:
        self.service = service
        self.context = context
        self.partition = context.partition
        self.config = service.config
        self.timers = context.timer
        self.write = context.write  # append (and replay) as one batch; the durability wait
        self._clock = context.runtime.clock  # made once per broker (skew_ms moves it)
        self._load_prefixes: dict[bytes, dict[int, bytes]] = {}
        self.max_batch_bytes = context.runtime.max_batch_bytes
        # Every group id of the shard in the order Kafka's one map of groups iterates them
        # (ListGroups); the four dicts below keep it up to date (list_order.GroupDict).
        self.group_table = GroupTable()
        self.groups: GroupDict[ClassicGroup] = self.group_table.new_dict()
        # KIP-848 consumer groups and KIP-1071 streams groups; a group id is in at most one of the dicts.
        self.consumer_groups: GroupDict[ConsumerGroup] = self.group_table.new_dict()
        self.streams_groups: GroupDict[StreamsGroup] = self.group_table.new_dict()
        # KIP-932 share groups (broker/coordinator/share/); their ids are in no other dict either.
        self.share_groups: GroupDict[ShareGroup] = self.group_table.new_dict()
        self.offsets = OffsetStore()
        # Transactional offsets read from the log: producer id -> {(group, topic, partition): (value, record offset)}.
        self.pending_txn: dict[int, dict[tuple[str, str, int], tuple[bytes, int]]] = {}
        # Record offsets of plain commits made while a transaction of the group was open (TX-4 precedence).
        self.plain_commit_offsets: dict[tuple[str, str, int], int] = {}
        from broker.coordinator.rebalance import ClassicRebalancer

        self.classic = ClassicRebalancer(self)
        self.consumer = ConsumerGroupManager(self)
        self.streams = StreamsGroupManager(self)
        self.share = ShareGroupManager(self)

    @property
    def state(self) -> Any:
        """The runtime's state of this shard's partition (broker/runtime/shard.py: ShardState)."""
        return self.context.state

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups or group_id in self.consumer_groups or group_id in self.streams_groups

    # -- time ---------------------------------------------------------------------------

    def now_ms(self) -> int:
        return self._clock.now_ms()

    # -- replaying ------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None, offset: int = -1, producer_id: int = rec.NO_PRODUCER_ID) -> None:
        """Apply one record to the shard's state, at load and for runtime writes (RL-1..RL-4)."""
        kind = (key[0] << 8) | key[1]
        if kind <= orec.OFFSET_COMMIT_KEY:
            group_id, topic, partition = orec.parse_offset_commit_key(key)
            if value is None:
                self.offsets.remove(group_id, topic, partition)
                for pending in self.pending_txn.values():  # a tombstone also drops pending offsets (RL-3)
                    pending.pop((group_id, topic, partition), None)
                return
            orec.check_offset_commit_value(value)
            if producer_id != rec.NO_PRODUCER_ID:
                if not self.has_group(group_id):
                    self.groups[group_id] = ClassicGroup(group_id, self.now_ms())
                self.pending_txn.setdefault(producer_id, {})[(group_id, topic, partition)] = (value, offset)  # RL-2
                return
            if self.pending_txn:
                self.plain_commit_offsets[(group_id, topic, partition)] = offset
            self.apply_offset_commit(group_id, topic, partition, value)
        elif kind == orec.GROUP_METADATA_KEY:
            group_id = orec.parse_group_metadata_key(key)
            if value is None:
                self.groups.pop(group_id, None)
            else:
                self.groups[group_id] = self._group_from_record(group_id, orec.parse_group_metadata_value(value))
        elif kind in orec.CONSUMER_GROUP_RECORD_TYPES or kind == orec.CONSUMER_GROUP_REGULAR_EXPRESSION_KEY:
            self.consumer.replay(kind, key, value)
        elif kind in srec.STREAMS_GROUP_RECORD_TYPES:
            self.streams.replay(kind, key, value)
        elif kind in SHARE_GROUP_RECORD_TYPES:
            self.share.replay(kind, key, value)
        else:
            log.warning("skipping a record of unknown type", record_type=kind, partition=self.partition)

    def apply_offset_commit(self, group_id: str, topic: str, partition: int, value: bytes) -> None:
        """A committed offset record's effect, at load and at runtime (RL-3)."""
        if not self.has_group(group_id):
            # Offsets without a group make a simple group (classic, no protocol type).
            self.groups[group_id] = ClassicGroup(group_id, self.now_ms())
        self.offsets.put(group_id, topic, partition, value)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """RL-2/TX-4: a COMMIT marker applies the producer's pending offsets unless a later plain
        commit of the same partition exists; ABORT drops them."""
        pending = self.pending_txn.pop(producer_id, None)
        if not pending:
            return
        if commit:
            for (group_id, topic, partition), (value, offset) in pending.items():
                plain = self.plain_commit_offsets.get((group_id, topic, partition), -1)
                if offset > plain:
                    self.offsets.put(group_id, topic, partition, value)
        if not self.pending_txn:
            self.plain_commit_offsets.clear()

    def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation: int,
        member_id: str,
        instance_id: str | None,
        commits: list[tuple[str, int, int, int, str | None]],
    ) -> tuple[list[ErrorCode], Awaitable[Any] | None]:
        """TX-2 and TX-4: (topic, partition, offset, leader epoch, metadata) written as pending
        offsets of `producer_id` in one transactional batch; one error per commit, in order."""
        group = self.groups.get(group_id)
        consumer_group = self.consumer_groups.get(group_id) if group is None else None
        streams_group = self.streams_groups.get(group_id) if group is None else None
        check_partition = None
        if consumer_group is not None:
            # KO-1 for a KIP-848 group (a transactional commit needs no OffsetCommit v9).
            error = self.consumer.validate_offset_commit(
                consumer_group, member_id, generation, 9, transactional=True, instance_id=instance_id
            )
        elif streams_group is not None:
            # KS-27: below TxnOffsetCommit v6 a stale epoch is ILLEGAL_GENERATION, as Kafka answers.
            error = ErrorCode.NONE
            try:
                check_partition = self.streams.validate_offset_commit(
                    streams_group, member_id, instance_id, generation, 9, transactional=True
                )
            except CoordinatorError as exc:
                raise CoordinatorError(ErrorCode.ILLEGAL_GENERATION if exc.code is ErrorCode.STALE_MEMBER_EPOCH else exc.code) from exc
        else:
            if group is None:
                if group_id in self.share_groups:
                    raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
                if generation >= 0:
                    raise CoordinatorError(ErrorCode.ILLEGAL_GENERATION)
                group = self.groups[group_id] = ClassicGroup(group_id, self.now_ms())
            error = self.validate_offset_commit(group, member_id, instance_id, generation, transactional=True)
        if error is not ErrorCode.NONE:
            raise CoordinatorError(error)
        now = self.now_ms()
        max_meta = self.config.offset_metadata_max_bytes
        records: list[Record] = []
        results: list[ErrorCode] = []
        for topic, partition, offset, leader_epoch, metadata in commits:
            if metadata is not None and utf16_length(metadata) > max_meta:
                results.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)  # OC-6
                continue
            if check_partition is not None:
                try:
                    check_partition(topic, partition)
                except CoordinatorError as exc:
                    raise CoordinatorError(ErrorCode.ILLEGAL_GENERATION) from exc
            results.append(ErrorCode.NONE)
            value = orec.offset_commit_value(offset, leader_epoch, metadata or "", now, -1)
            records.append((orec.offset_commit_key(group_id, topic, partition), value))
        if not records:
            return results, None
        # One transactional batch after the plain commits enqueued before it (they keep their place).
        waiter = self.context.write_transactional(records, producer_id, producer_epoch)
        self.service.stats.offset_commits += len(records)
        return results, waiter

    def has_pending_offset(self, group_id: str, topic: str, partition: int) -> bool:
        key = (group_id, topic, partition)
        return any(key in pending for pending in self.pending_txn.values())

    def _group_from_record(self, group_id: str, value: orec.GroupMetadataValue) -> ClassicGroup:
        """RL-4: Empty if no members else Stable, at the persisted generation."""
        group = ClassicGroup(
            group_id,
            self.now_ms(),
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
            current_state_timestamp=None if value.current_state_timestamp == -1 else value.current_state_timestamp,
        )
        for m in value.members:
            rebalance_timeout = m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout
            member = ClassicMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                rebalance_timeout,
                m.session_timeout,
                value.protocol_type,
                [(value.protocol or "", m.subscription)],
                m.assignment,
            )
            group.add(member)
        group.leader_id = value.leader
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def group_metadata_record(self, group: ClassicGroup, assignments: dict[str, bytes] | None = None) -> Record:
        """RF-4 / CT-7: the group as Kafka persists it (metadata for the selected protocol)."""
        members = []
        for m in group.members.values():
            members.append(
                orec.MemberMetadata(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(group.protocol_name),
                    (assignments or {}).get(m.member_id, m.assignment),
                )
            )
        value = orec.GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.current_state_timestamp if group.current_state_timestamp is not None else -1,
            members=members,
        )
        return orec.group_metadata_key(group.group_id), orec.group_metadata_value(value)

    # -- load and unload (the runtime's CoordinatorLoader replays the log) -----------------

    def replay_batch(self, buf: Any, pos: int, header: rec.BatchHeader, producer_id: int) -> int:
        """RL-1's fast path: replay() every record of a batch. Committed offsets outside transactions, nearly every
        record of a real log, take an inlined path: a (group, topic) key prefix seen before maps
        straight to its partitions' dict, so the key's strings are decoded once per prefix."""
        prefixes = self._load_prefixes
        replay = self.replay
        count = 0
        for record in records_of(buf, pos, header):
            count += 1
            key = record.key
            value = record.value
            if key is None:
                raise orec.RecordFormatError(f"record at offset {record.offset} has no key")
            if value is None or key[1] != 1 or key[0] != 0 or producer_id != rec.NO_PRODUCER_ID or self.pending_txn:
                prefixes.clear()  # tombstones and group records may drop the dicts cached here
                replay(key, value, record.offset, producer_id)
                continue
            # check_offset_commit_value's v3 length test, inlined (RL-2: bad values fail the load)
            if not (value[1] == 3 and value[0] == 0 and len(value) == 24 + ((value[14] << 8) | value[15]) and value[14] < 0x80):
                orec.check_offset_commit_value(value)
            prefix = key[:-4]
            partitions = prefixes.get(prefix)
            if partitions is None:
                group_id, topic, _ = orec.parse_offset_commit_key(key)
                if not self.has_group(group_id):
                    self.groups[group_id] = ClassicGroup(group_id, 0)
                partitions = prefixes[prefix] = self.offsets.partitions_of(group_id, topic)
            partitions[int.from_bytes(key[-4:], "big", signed=True)] = value
        return count

    def on_loaded(self) -> None:
        """RL-6: arm member session timers, rebalance oversized groups, start the expiry cycle."""
        self.offsets.recount()
        self._load_prefixes = {}
        for group in self.groups.values():
            for member in group.members.values():
                self.classic.reschedule_heartbeat(group, member)
            if len(group.members) > self.config.group_max_size:
                self.classic.prepare_rebalance(group, "loaded group is over group.max.size")
        self.consumer.on_loaded()
        self.streams.on_loaded()
        self.share.on_loaded()
        self._schedule_expiration()

    def on_unloaded(self) -> None:
        """CT-6: groups go Dead; parked JoinGroups and SyncGroups get NOT_COORDINATOR."""
        for group in self.groups.values():
            self.classic.on_unloaded(group)
        self.consumer.on_unloaded()

    def on_timer_failed(self, group_id: str, key: str) -> None:
        self.classic.recover_group(group_id, f"timer {key} failed")

    # -- offsets ------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        retention_ms: int,
        api_version: int,
        commits: list[tuple[str, CommitPartition]],
        batched: bool = False,
    ) -> tuple[list[ErrorCode], Awaitable[Any] | None]:
        """OC-3..OC-7; returns one error per commit, in order, and the durability wait.

        `batched`: the caller will call `runtime.flush_appends()` before answering, so the
        records are enqueued to be appended with other commits rather than appended now.
        Commits are (topic, (partition, offset, leader epoch, commit timestamp, metadata)) tuples
        (CommitPartition or the plain tuples of the compiled decoder alike): this is the hot
        path of every consumer group, so fields are read by index and the steady case (a
        simple or stable group, small metadata) takes no detours."""
        group = self.groups.get(group_id)
        if group is None:
            consumer_group = self.consumer_groups.get(group_id)
            streams_group = self.streams_groups.get(group_id) if consumer_group is None else None
            if consumer_group is not None:
                error = self.consumer.validate_offset_commit(consumer_group, member_id, generation, api_version, transactional=False)
                if error is not ErrorCode.NONE:
                    raise CoordinatorError(error)
            elif streams_group is not None:
                check = self.streams.validate_offset_commit(
                    streams_group, member_id, instance_id, generation, api_version, transactional=False
                )
                if check is not None:  # KS-27: each partition whose metadata fits, or the whole commit fails
                    max_meta = self.config.offset_metadata_max_bytes
                    for topic, c in commits:
                        if c[4] is None or utf16_length(c[4]) <= max_meta:
                            check(topic, c[0])
            elif group_id in self.share_groups:  # KIP-932: a share group has no committed offsets
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            elif generation < 0:
                group = self.groups[group_id] = ClassicGroup(group_id, self.now_ms())
            elif api_version >= 9:
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)
            else:
                raise CoordinatorError(ErrorCode.ILLEGAL_GENERATION)
        if group is not None:
            state = group.state
            # validate_offset_commit's first two checks, for the simple group that commits most:
            # an Empty group (never Dead) with no generation passes.
            if not (generation < 0 and state is GroupState.EMPTY):
                error = self.validate_offset_commit(group, member_id, instance_id, generation, transactional=False)
                if error is not ErrorCode.NONE:
                    raise CoordinatorError(error)
                if state is GroupState.STABLE or state is GroupState.PREPARING_REBALANCE:
                    member = group.members.get(member_id)
                    if member is not None:
                        self.classic.reschedule_heartbeat(group, member)  # OC-5
        now = self._clock.now_ms()
        expire = now + retention_ms if retention_ms != -1 else -1
        max_meta = self.config.offset_metadata_max_bytes
        half_meta = max_meta // 2
        # The compiled twin builds every record when all commits are accepted (no metadata
        # near the limit); otherwise, or without it, the loop below decides each one.
        built = _commit_records(group_id, commits, now, expire, half_meta) if _commit_records is not None else None
        if built is not None:
            records, applied = built
            results = [ErrorCode.NONE] * len(commits)
        else:
            records, applied, results = self._commit_records_py(group_id, commits, now, expire, max_meta)
        if not records:
            return results, None
        if self.pending_txn:
            # TX-4 precedence: these records land at or after the log end (enqueued ones are
            # appended before any later transactional write), which orders them against pending offsets.
            at = self.context.log_end_offset
            for topic, partition, _value in applied:
                self.plain_commit_offsets[(group_id, topic, partition)] = at
        if batched:
            size = _batch_size(records)
            if size > self.max_batch_bytes:
                raise CoordinatorError(ErrorCode.MESSAGE_TOO_LARGE)  # GE-3, as write() checks
            waiter = None
            context = self.context
            if not context.pending:
                context.runtime.mark_dirty(context)
            context.pending.append((records, size))  # context.enqueue(), inlined
        else:
            waiter = self.write(records, replay=False)
        # The records are in the log: apply them as replay() would (apply_offset_commit: the
        # group exists by now), without re-parsing our own keys.
        self.offsets.put_many(group_id, applied)
        self.service.stats.offset_commits += len(records)
        return results, waiter

    @staticmethod
    def _commit_records_py(
        group_id: str, commits: list[tuple[str, CommitPartition]], now: int, expire: int, max_meta: int
    ) -> tuple[list[Record], list[tuple[str, int, bytes]], list[ErrorCode]]:
        """OC-6 and the records of the accepted commits; the pure twin of protocol/_speedups.c's commit_records."""
        records: list[Record] = []
        applied: list[tuple[str, int, bytes]] = []
        results: list[ErrorCode] = []
        key_of = orec.offset_commit_key
        value_of = orec.offset_commit_value
        ok = ErrorCode.NONE
        half_meta = max_meta // 2
        for topic, c in commits:
            metadata = c[4]
            if metadata is not None and len(metadata) > half_meta and utf16_length(metadata) > max_meta:
                results.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            results.append(ok)
            partition = c[0]
            value = value_of(c[1], c[2], metadata or "", now if c[3] == -1 else c[3], expire)
            records.append((key_of(group_id, topic, partition), value))
            applied.append((topic, partition, value))
        return records, applied, results

    @staticmethod
    def validate_offset_commit(
        group: ClassicGroup, member_id: str, instance_id: str | None, generation: int, transactional: bool
    ) -> ErrorCode:
        """OC-4 (and TX-2 when transactional), in Kafka's order."""
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_in(GroupState.EMPTY):
            return ErrorCode.NONE
        if generation >= 0 or member_id != "" or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error is not ErrorCode.NONE:
                return error
            if generation != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not transactional and not group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def fetch_offsets(
        self,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> list[tuple[str, list[tuple[int, int, int, str, ErrorCode]]]]:
        """OF-2..OF-5, OF-8: (topic, [(partition, offset, leader epoch, metadata, error)]) in request
        order; raises CoordinatorError for a consumer group's member errors (v9)."""
        group = self.groups.get(group_id)  # a share group's id is answered as an unknown group's (no offsets)
        known = group is not None and not group.is_in(GroupState.DEAD)
        consumer_group = self.consumer_groups.get(group_id) if group is None else None
        if consumer_group is not None:
            known = True
            if member_id is not None or member_epoch >= 0:
                error = self.consumer.validate_offset_fetch(consumer_group, member_id, member_epoch)
                if error is not ErrorCode.NONE:
                    raise CoordinatorError(error)
        streams_group = self.streams_groups.get(group_id) if group is None and consumer_group is None else None
        if streams_group is not None:
            known = True
            self.streams.validate_offset_fetch(streams_group, member_id, member_epoch)  # KS-27
        group_offsets = self.offsets.of_group(group_id) if known else None
        unstable = require_stable and bool(self.pending_txn)

        def row(topic: str, partition: int, raw: bytes | None) -> tuple[int, int, int, str, ErrorCode]:
            if unstable and self.has_pending_offset(group_id, topic, partition):
                return (partition, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)  # OF-5
            if raw is None:
                return (partition, -1, -1, "", ErrorCode.NONE)
            v = orec.parse_offset_commit_value(raw)
            return (partition, v.offset, v.leader_epoch, v.metadata, ErrorCode.NONE)

        if topics is None:
            if not known:
                return []
            return [(topic, [row(topic, p, raw) for p, raw in partitions.items()]) for topic, partitions in (group_offsets or {}).items()]
        out = []
        for topic, partitions in topics:
            by_partition = group_offsets.get(topic) if group_offsets else None
            out.append((topic, [row(topic, p, by_partition.get(p) if by_partition else None) for p in partitions]))
        return out

    def delete_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]]
    ) -> tuple[list[tuple[str, list[tuple[int, ErrorCode]]]], Awaitable[Any] | None]:
        """OD-1/OD-2; raises CoordinatorError for group-level errors."""
        group: ClassicGroup | ConsumerGroup | StreamsGroup | None = self.groups.get(group_id)
        if group is None:
            # OD-1: a consumer (or streams) group is always allowed
            group = self.consumer_groups.get(group_id) or self.streams_groups.get(group_id)
            if group is None:
                if group_id in self.share_groups:
                    raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)
        elif group.is_in(GroupState.DEAD):
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)
        elif (
            group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)
            and not group.uses_consumer_protocol
        ):
            raise CoordinatorError(ErrorCode.NON_EMPTY_GROUP)
        records: list[Record] = []
        out = []
        for topic, partitions in topics:
            if group.is_subscribed_to(topic):
                out.append((topic, [(p, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions]))
                continue
            for p in partitions:
                if self.offsets.has(group_id, topic, p):
                    records.append((orec.offset_commit_key(group_id, topic, p), None))
            out.append((topic, [(p, ErrorCode.NONE) for p in partitions]))
        self.service.stats.offset_deletions += len(records)
        return out, self.write(records)

    def on_partitions_deleted(self, topic: str, partitions: Iterable[int]) -> None:
        """OR-5: offsets of deleted partitions are tombstoned at once."""
        wanted = set(partitions)
        records: list[Record] = []
        for group_id, topics in self.offsets.by_group.items():
            for p in topics.get(topic, {}):
                if p in wanted:
                    records.append((orec.offset_commit_key(group_id, topic, p), None))
        if records and self.state is ShardState.ACTIVE:
            self.service.stats.offset_deletions += len(records)
            self.context.apply(CoordinatorResult(records, atomic=False))

    # -- expiry (OR-1..OR-4) ------------------------------------------------------------

    def _schedule_expiration(self) -> None:
        self.timers.schedule(GROUP_EXPIRATION_KEY, self.config.offsets_retention_check_interval_ms, self.cleanup_group_metadata)

    def cleanup_group_metadata(self) -> CoordinatorResult[int]:
        """OR-1..OR-4, every offsets.retention.check.interval.ms: the tombstones of expired offsets
        and of groups left empty, written by the timer (several batches when there are many)."""
        records: list[Record] = []
        for group_id in list(self.groups):
            if self._cleanup_expired_offsets(group_id, records):
                group = self.groups.get(group_id)
                if group is not None and group.is_empty:
                    records.append((orec.group_metadata_key(group_id), None))
        for group_id, consumer_group in list(self.consumer_groups.items()):
            if self._cleanup_expired_offsets(group_id, records) and consumer_group.is_empty:
                records += self.consumer.group_tombstones(consumer_group)
        for group_id, streams_group in list(self.streams_groups.items()):
            if self._cleanup_expired_offsets(group_id, records) and streams_group.is_empty:
                records += self.streams.group_tombstones(streams_group)
        self._schedule_expiration()
        if records:
            log.info("expired offsets and groups", partition=self.partition, tombstones=len(records))
        return CoordinatorResult(records, len(records), atomic=False)

    def _cleanup_expired_offsets(self, group_id: str, records: list[Record]) -> bool:
        """True if the group has no offsets left after this pass (OR-4)."""
        topics = self.offsets.of_group(group_id)
        if topics is None:
            return True
        group: ClassicGroup | ConsumerGroup | StreamsGroup = (
            self.groups.get(group_id) or self.consumer_groups.get(group_id) or self.streams_groups[group_id]
        )
        base = group.offset_expiration_base()
        if base is None:
            return False
        now = self.now_ms()
        retention = self.config.offsets_retention_minutes * 60_000
        all_expired = True
        expired = 0
        for topic, partitions in topics.items():
            if group.is_subscribed_to(topic):
                all_expired = False
                continue
            for partition, raw in partitions.items():
                v = orec.parse_offset_commit_value(raw)
                if v.expire_timestamp != -1:
                    is_expired = now >= v.expire_timestamp
                else:
                    since = (
                        group.current_state_timestamp
                        if base == "state" and group.current_state_timestamp is not None
                        else v.commit_timestamp
                    )
                    is_expired = now - since >= retention
                if is_expired:
                    records.append((orec.offset_commit_key(group_id, topic, partition), None))
                    expired += 1
                else:
                    all_expired = False
        self.service.stats.offset_expirations += expired
        return all_expired

    # -- group administration -----------------------------------------------------------

    def describe_group(self, group_id: str) -> DescribedGroup:
        """DG-1/DG-2."""
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(group_id)
        described = DescribedGroup(group_id, state=group.state.value, protocol_type=group.protocol_type or "")
        stable = group.is_in(GroupState.STABLE)
        if stable:
            described.protocol_data = group.protocol_name or ""
        for m in group.members.values():
            metadata = m.metadata(group.protocol_name) if stable else b""
            described.members.append((m.member_id, m.group_instance_id, m.client_id, m.client_host, metadata, m.assignment))
        return described

    def delete_groups(self, group_ids: list[str]) -> tuple[list[tuple[str, ErrorCode]], Awaitable[Any] | None]:
        """DL-2/DL-3: offsets tombstoned, then the group."""
        records: list[Record] = []
        results = []
        for group_id in group_ids:
            share_group = self.share_groups.get(group_id)
            if share_group is not None:  # KIP-932: its share state goes first (broker/coordinator/share/manager.py)
                results.append((group_id, self.share.delete_group(share_group, records)))
                continue
            group = self.groups.get(group_id)
            streams_group = self.streams_groups.get(group_id) if group is None else None
            if streams_group is not None:  # KS-28
                if not streams_group.is_empty:
                    results.append((group_id, ErrorCode.NON_EMPTY_GROUP))
                    continue
                for topic, partitions in (self.offsets.of_group(group_id) or {}).items():
                    for p in partitions:
                        records.append((orec.offset_commit_key(group_id, topic, p), None))
                records += self.streams.group_tombstones(streams_group)
                results.append((group_id, ErrorCode.NONE))
                continue
            consumer_group = self.consumer_groups.get(group_id) if group is None else None
            if consumer_group is not None:
                if not consumer_group.is_empty:
                    results.append((group_id, ErrorCode.NON_EMPTY_GROUP))
                    continue
                for topic, partitions in (self.offsets.of_group(group_id) or {}).items():
                    for p in partitions:
                        records.append((orec.offset_commit_key(group_id, topic, p), None))
                records += self.consumer.group_tombstones(consumer_group)
                results.append((group_id, ErrorCode.NONE))
                continue
            if group is None or group.is_in(GroupState.DEAD):
                results.append((group_id, ErrorCode.GROUP_ID_NOT_FOUND))
                continue
            if not group.is_empty:
                results.append((group_id, ErrorCode.NON_EMPTY_GROUP))
                continue
            for topic, partitions in (self.offsets.of_group(group_id) or {}).items():
                for p in partitions:
                    records.append((orec.offset_commit_key(group_id, topic, p), None))
            records.append((orec.group_metadata_key(group_id), None))
            results.append((group_id, ErrorCode.NONE))
        if records:
            log.info("deleted groups", groups=[g for g, e in results if e is ErrorCode.NONE], partition=self.partition)
        return results, self.write(records)
