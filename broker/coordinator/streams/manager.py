"""KIP-1071 streams groups on one coordinator shard: StreamsGroupHeartbeat (KS-5..KS-24), the
topology and its internal topics (KS-10..KS-14), target assignment with the sticky task assignor
(KS-15..KS-17), task reconciliation (KS-18, KS-19), timers (KS-20, KS-21), leaving and static
members (KS-22..KS-24), replay of records 17 and 19-23 (KS-30), the describe view (KS-26) and
offsets in streams groups (KS-27), after Kafka 4.4's GroupMetadataManager.

Every state change is a record: an operation computes its records from the current state and
`shard.write` appends them and replays them through `replay()`, the function that rebuilds the
groups at load. The configured topology, the metadata-refresh flag, the task offsets members
report, the endpoint-information epoch and a shutdown request are soft state, as in Kafka; an
operation that creates a group works on a group object of its own, which its records then
replace, so a new group's soft state starts afresh on its next heartbeat, as Kafka's does.
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from broker.coordinator.sessions import MemberSessions
from broker.coordinator.streams import assignor as sticky
from broker.coordinator.streams.group import MemberTaskOffsets, StreamsGroup, StreamsGroupState
from broker.coordinator.streams.javaorder import hashmap_order
from broker.coordinator.streams.member import LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, MemberState, StreamsMember
from broker.coordinator.streams.reconcile import CurrentAssignmentBuilder
from broker.coordinator.streams.tasks import EMPTY_TASKS, TasksTuple, TasksWithEpochs, tasks_from
from broker.coordinator.streams.topics import (
    ConfiguredTopology,
    InternalStateError,
    InternalTopic,
    Status,
    StreamsInvalidTopology,
    configure_topics,
)
from broker.coordinator.streams.topology import DuplicateSubtopologyError, StreamsTopology, from_request
from broker.runtime.errors import CoordinatorError
from protocol.errors import ErrorCode
from storage import offsets_records as orec
from storage import streams_records as srec

if TYPE_CHECKING:
    from broker.coordinator.shard import GroupShard

log = structlog.get_logger("kaflet.coordinator")

Record = tuple[bytes, bytes | None]
INITIAL_REBALANCE_KEY = "initial-rebalance-timeout-{}"  # StreamsGroup.initialRebalanceTimeoutKey
NUM_STANDBY_REPLICAS = "num.standby.replicas"
RACK_AWARE_ASSIGNMENT_TAGS = "rack.aware.assignment.tags"
_NONE, _RECOMPUTE, _REFINED = 0, 1, 2  # Kafka's AssignmentUpdate


@dataclass
class StreamsHeartbeat:
    """A StreamsGroupHeartbeat request as the manager reads it (`topology`, the task lists and the
    offsets are the decoded request's structs, or None)."""

    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Any = None
    active_tasks: list[Any] | None = None
    standby_tasks: list[Any] | None = None
    warmup_tasks: list[Any] | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: list[tuple[str, str]] | None = None
    task_offsets: list[Any] | None = None
    task_end_offsets: list[Any] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    api_version: int = 0


@dataclass
class StreamsHeartbeatResult:
    """What the heartbeat answers (the response's fields) and the internal topics to create."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    task_offset_interval_ms: int = 0
    acceptable_recovery_lag: int = -1
    status: list[tuple[int, str]] = field(default_factory=list)
    active_tasks: dict[str, list[int]] | None = None
    standby_tasks: dict[str, list[int]] | None = None
    warmup_tasks: dict[str, list[int]] | None = None
    endpoint_information_epoch: int = 0
    partitions_by_user_endpoint: list[tuple[tuple[str, int], list[tuple[str, list[int]]], list[tuple[str, list[int]]]]] | None = None
    topics_to_create: dict[str, InternalTopic] = field(default_factory=dict)


def _rebalance_key(group_id: str, member_id: str) -> str:
    return f"streams-rebalance-{group_id}-{member_id}"


def key_of(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    return srec.streams_group_key(kind, group_id, member_id)


class StreamsGroupManager:
    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard
        self.timers = shard.timers
        self.config = shard.config
        self.stats = shard.service.stats
        self.sessions = MemberSessions(self.timers, "streams-session", lambda g: self.session_timeout_ms(g), self._session_expired)

    @property
    def groups(self) -> dict[str, StreamsGroup]:
        return self.shard.streams_groups

    @property
    def topics(self) -> Any:
        return self.shard.service.topics

    # -- configuration (group configs over the broker's group.streams.*) -----------------------

    def _group_config(self, group_id: str, name: str) -> Any:
        configs = getattr(self.shard.service, "group_configs", None)
        return configs.get(group_id, name) if configs is not None else None

    def _int(self, group_id: str, name: str, default: int, low: int | None = None, high: int | None = None) -> int:
        """A group's own value, clamped into the broker's bounds as Kafka's GroupConfig.evaluate does."""
        value = self._group_config(group_id, name)
        if value is None:
            return default
        value = int(value)
        if low is not None and value < low:
            return low
        if high is not None and value > high:
            return high
        return value

    def session_timeout_ms(self, group_id: str) -> int:
        c = self.config
        return self._int(
            group_id,
            "streams.session.timeout.ms",
            c.group_streams_session_timeout_ms,
            c.group_streams_min_session_timeout_ms,
            c.group_streams_max_session_timeout_ms,
        )

    def heartbeat_interval_ms(self, group_id: str) -> int:
        c = self.config
        return self._int(
            group_id,
            "streams.heartbeat.interval.ms",
            c.group_streams_heartbeat_interval_ms,
            c.group_streams_min_heartbeat_interval_ms,
            c.group_streams_max_heartbeat_interval_ms,
        )

    def num_standby_replicas(self, group_id: str) -> int:
        c = self.config
        return self._int(
            group_id, "streams.num.standby.replicas", c.group_streams_num_standby_replicas, None, c.group_streams_max_standby_replicas
        )

    def initial_rebalance_delay_ms(self, group_id: str) -> int:
        return self._int(group_id, "streams.initial.rebalance.delay.ms", self.config.group_streams_initial_rebalance_delay_ms)

    def assignment_interval_ms(self, group_id: str) -> int:
        c = self.config
        return self._int(
            group_id,
            "streams.assignment.interval.ms",
            c.group_streams_assignment_interval_ms,
            c.group_streams_min_assignment_interval_ms,
            c.group_streams_max_assignment_interval_ms,
        )

    def task_offset_interval_ms(self, group_id: str) -> int:
        c = self.config
        return self._int(
            group_id,
            "streams.task.offset.interval.ms",
            c.group_streams_task_offset_interval_ms,
            c.group_streams_min_task_offset_interval_ms,
        )

    def acceptable_recovery_lag(self, group_id: str) -> int:
        return self._int(group_id, "streams.acceptable.recovery.lag", self.config.group_streams_acceptable_recovery_lag)

    def num_warmup_replicas(self, group_id: str) -> int:
        c = self.config
        return self._int(
            group_id, "streams.num.warmup.replicas", c.group_streams_num_warmup_replicas, None, c.group_streams_max_warmup_replicas
        )

    def rack_aware_assignment_tags(self, group_id: str) -> list[str]:
        value = self._group_config(group_id, "streams.rack.aware.assignment.tags")
        raw = value if value is not None else self.config.group_streams_rack_aware_assignment_tags
        if isinstance(raw, list):
            return [str(t) for t in raw]
        return [t.strip() for t in str(raw).split(",") if t.strip()]

    def assignor_name(self, group_id: str, warn: bool = False) -> str:
        """streams.assignor.name when it names a registered assignor, else the broker's default."""
        default = self.config.group_streams_assignors.split(",")[0].strip()
        name = self._group_config(group_id, "streams.assignor.name")
        if name is not None:
            registered = [n.strip() for n in self.config.group_streams_assignors.split(",")]
            if name in registered:
                return str(name)
            if warn:
                log.warning(
                    "the configured task assignor is not available; falling back to the default",
                    group=group_id,
                    assignor=name,
                    default=default,
                )
        return default

    def assignment_configs(self, group_id: str) -> dict[str, str]:
        """streamsGroupAssignmentConfigs: what the assignor is given, and what a change of re-assigns."""
        configs = {NUM_STANDBY_REPLICAS: str(self.num_standby_replicas(group_id))}
        tags = self.rack_aware_assignment_tags(group_id)
        if tags:
            configs[RACK_AWARE_ASSIGNMENT_TAGS] = ",".join(tags)
        return dict(sorted(configs.items()))

    # -- replay (KS-30) -------------------------------------------------------------------------

    def _group_for_replay(self, group_id: str, create: bool) -> StreamsGroup | None:
        """getOrMaybeCreatePersistedStreamsGroup: a simple (offsets-only) classic group is replaced."""
        group = self.groups.get(group_id)
        if group is None and create:
            classic = self.shard.groups.get(group_id)
            group = self.groups[group_id] = StreamsGroup(group_id)
            if classic is not None and classic.protocol_type is None and not classic.members:
                del self.shard.groups[group_id]  # after the put: the streams group takes its place (LI-4)
        return group

    def replay(self, kind: int, key: bytes, value: bytes | None) -> None:
        _, group_id, member_id = srec.parse_streams_group_key(key)
        group = self._group_for_replay(group_id, value is not None)
        if group is None:
            return  # a tombstone for a group that is not here
        if kind == srec.STREAMS_GROUP_METADATA_KEY:
            if value is None:
                if not group.members:
                    del self.groups[group_id]
                    self.timers.cancel(INITIAL_REBALANCE_KEY.format(group_id))
                return
            v = srec.parse_group_metadata_value(value)
            group.group_epoch = v.epoch
            group.metadata_hash = v.metadata_hash
            group.validated_topology_epoch = v.validated_topology_epoch
            group.stored_description_topology_epoch = v.stored_description_topology_epoch
            group.failed_description_topology_epoch = v.failed_description_topology_epoch
            group.last_assignment_configs = dict(v.last_assignment_configs or [])
        elif kind == srec.STREAMS_GROUP_TOPOLOGY_KEY:
            group.topology = StreamsTopology.from_record(srec.parse_topology_value(value)) if value is not None else None
            group.metadata_refresh = True
        elif kind == srec.STREAMS_GROUP_MEMBER_METADATA_KEY:
            assert member_id is not None
            if value is None:
                group.remove_member(member_id)
                return
            member = group.members.get(member_id)
            updated = member.copy() if member is not None else StreamsMember(member_id)
            updated.apply_metadata(srec.parse_member_metadata_value(value))
            group.put_member(updated)
        elif kind == srec.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY:
            if value is None:
                group.assignment_epoch, group.assignment_timestamp = -1, 0
            else:
                group.assignment_epoch, group.assignment_timestamp = srec.parse_target_assignment_metadata_value(value)
        elif kind == srec.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY:
            assert member_id is not None
            if value is None:
                group.target.pop(member_id, None)
            else:
                group.target[member_id] = TasksTuple.from_record(srec.parse_target_assignment_value(value))
        elif kind == srec.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY:
            assert member_id is not None
            member = group.members.get(member_id)
            if value is None:
                if member is None:
                    return
                updated = member.copy(
                    member_epoch=-1, previous_member_epoch=-1, assigned=TasksWithEpochs(), pending_revocation=TasksWithEpochs()
                )
            else:
                updated = member.copy() if member is not None else StreamsMember(member_id)
                updated.apply_assignment(srec.parse_current_assignment_value(value))
            group.put_member(updated)

    def on_loaded(self) -> None:
        """Session timers for every member, rebalance timers for those revoking (Kafka's onLoaded)."""
        self.sessions.clear()
        for group in self.groups.values():
            group.metadata_refresh = True
            for member in group.members.values():
                self.sessions.schedule(group.group_id, member.member_id)
                if member.state is MemberState.UNREVOKED_TASKS:
                    self._schedule_rebalance(group.group_id, member.member_id, member.member_epoch, member.rebalance_timeout_ms)
            log.info("loaded streams group", group=group.group_id, members=len(group.members), group_epoch=group.group_epoch)

    # -- records ----------------------------------------------------------------------------------

    @staticmethod
    def _member_record(group_id: str, member: StreamsMember) -> Record:
        return key_of(srec.STREAMS_GROUP_MEMBER_METADATA_KEY, group_id, member.member_id), srec.member_metadata_value(
            member.metadata_value()
        )

    @staticmethod
    def _current_record(group_id: str, member: StreamsMember) -> Record:
        return key_of(srec.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, member.member_id), srec.current_assignment_value(
            member.assignment_value()
        )

    @staticmethod
    def _target_record(group_id: str, member_id: str, tasks: TasksTuple) -> Record:
        return key_of(srec.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id), srec.target_assignment_value(tasks.record())

    @staticmethod
    def _target_metadata_record(group_id: str, epoch: int, timestamp: int) -> Record:
        return key_of(srec.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, group_id), srec.target_assignment_metadata_value(epoch, timestamp)

    @staticmethod
    def _metadata_record(group: StreamsGroup, epoch: int, metadata_hash: int, validated_epoch: int, configs: dict[str, str]) -> Record:
        value = srec.GroupMetadataValue(
            epoch,
            metadata_hash,
            validated_epoch,
            list(configs.items()),
            group.stored_description_topology_epoch,
            group.failed_description_topology_epoch,
        )
        return key_of(srec.STREAMS_GROUP_METADATA_KEY, group.group_id), srec.group_metadata_value(value)

    @staticmethod
    def _remove_member_records(group_id: str, member_id: str) -> list[Record]:
        return [
            (key_of(srec.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, member_id), None),
            (key_of(srec.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id), None),
            (key_of(srec.STREAMS_GROUP_MEMBER_METADATA_KEY, group_id, member_id), None),
        ]

    def group_tombstones(self, group: StreamsGroup) -> list[Record]:
        """StreamsGroup.createGroupTombstoneRecords, in Kafka's order."""
        gid = group.group_id
        out: list[Record] = []
        out += [(key_of(srec.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, gid, m), None) for m in group.members]
        out += [(key_of(srec.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, gid, m), None) for m in group.members]
        out.append((key_of(srec.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, gid), None))
        out += [(key_of(srec.STREAMS_GROUP_MEMBER_METADATA_KEY, gid, m), None) for m in group.members]
        out.append((key_of(srec.STREAMS_GROUP_METADATA_KEY, gid), None))
        out.append((key_of(srec.STREAMS_GROUP_TOPOLOGY_KEY, gid), None))
        return out

    # -- topics ----------------------------------------------------------------------------------

    def _partitions_of(self, name: str) -> int | None:
        topic = self.topics.get(name)
        return topic.partitions if topic is not None else None

    def metadata_hash(self, topology: StreamsTopology) -> int:
        """A 64-bit digest of the required topics that exist (id, name, partition count): it changes
        when one of them is created, deleted, re-created or grows (Kafka hashes the same with XXH3)."""
        present = []
        for name in sorted(topology.required_topics()):
            topic = self.topics.get(name)
            if topic is not None:
                present.append(f"{topic.topic_id}:{name}:{topic.partitions}")
        if not present:
            return 0
        digest = hashlib.blake2b("\n".join(present).encode(), digest_size=8).digest()
        return struct.unpack(">q", digest)[0]

    def on_topic_event(self, name: str) -> None:
        """A topic was created, deleted or grew: groups that need it recompute their metadata hash
        (and so may reconfigure their topology) at their next heartbeat."""
        for group in self.groups.values():
            if group.topology is not None and name in group.topology.required_topics():
                group.metadata_refresh = True

    # -- StreamsGroupHeartbeat ------------------------------------------------------------------------

    def heartbeat(self, req: StreamsHeartbeat) -> tuple[StreamsHeartbeatResult, Awaitable[Any] | None]:
        """Raises CoordinatorError with the error (and message) to answer."""
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req)
        try:
            return self._heartbeat(req)
        except StreamsInvalidTopology as exc:
            raise CoordinatorError(ErrorCode.STREAMS_INVALID_TOPOLOGY, str(exc)) from exc
        except (InternalStateError, DuplicateSubtopologyError) as exc:
            # What Kafka's coordinator fails on (IllegalStateException, IndexOutOfBoundsException, a
            # duplicate key) comes from what the member sent: UNKNOWN_SERVER_ERROR, as Kafka answers.
            log.warning("streams group heartbeat failed on its input", group=req.group_id, member=req.member_id, error=str(exc))
            raise CoordinatorError(ErrorCode.UNKNOWN_SERVER_ERROR, None) from exc

    def _heartbeat(self, req: StreamsHeartbeat) -> tuple[StreamsHeartbeatResult, Awaitable[Any] | None]:
        now = self.shard.now_ms()
        records: list[Record] = []
        statuses: list[tuple[int, str]] = []
        joining = req.member_epoch == 0
        if joining:
            group = self._get_or_create_group(req.group_id, records)
            self._throw_if_full(group, req.instance_id, req.member_id)
        else:
            group = self._group_or_throw(req.group_id)
        replaced: StreamsMember | None = None
        if req.instance_id is None:
            member = self._dynamic_member(group, req, joining)
        else:
            existing = group.static_member(req.instance_id)
            if existing is not None and existing.member_id != req.member_id:
                replaced = existing
            member = self._static_member(group, req, joining, records)

        updated = member.copy()
        if req.instance_id is not None:
            updated.instance_id = req.instance_id
        if req.rack_id is not None:
            updated.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.topology is not None:
            updated.topology_epoch = req.topology.epoch
        updated.client_id = req.client_id
        updated.client_host = req.client_host
        if req.process_id is not None:
            updated.process_id = req.process_id
        if req.client_tags is not None:
            updated.client_tags = dict(req.client_tags)
        if joining or req.user_endpoint is not None:
            updated.user_endpoint = req.user_endpoint

        update = _NONE
        if not updated.same_metadata(member) or updated.instance_id != member.instance_id:
            records.append(self._member_record(req.group_id, updated))
            log.info("streams member metadata updated", group=req.group_id, member=req.member_id, process=updated.process_id)
            if req.instance_id is None or _epoch_relevant_change(member, updated):
                update = _RECOMPUTE
        topology = self._maybe_update_topology(req, group, records)
        if group.topology is not None and updated.topology_epoch < group.topology.epoch:
            statuses.append(
                (
                    Status.STALE_TOPOLOGY,
                    f"The member's topology epoch {updated.topology_epoch} is behind the group's topology epoch {group.topology.epoch}.",
                )
            )

        reconfigure = group.topology is None
        metadata_hash = group.metadata_hash
        configured = group.configured_topology
        if reconfigure or configured is None or group.metadata_refresh:
            metadata_hash = self.metadata_hash(topology)
            if metadata_hash != group.metadata_hash:
                log.info("computed new metadata hash", group=req.group_id, member=req.member_id, metadata_hash=metadata_hash)
                update = _RECOMPUTE
                reconfigure = True
            if reconfigure or configured is None:
                log.info("configuring the topology", group=req.group_id, member=req.member_id, topology_epoch=topology.epoch)
                configured = configure_topics(req.group_id, req.member_id, metadata_hash, topology, self._partitions_of)
                group.configured_topology = configured
        assert configured is not None

        validated_epoch = -1
        if configured.is_ready:
            validated_epoch = topology.epoch
            assert configured.subtopologies is not None
            for owned in (req.active_tasks, req.standby_tasks, req.warmup_tasks):
                _check_owned_tasks(configured, owned)
        if req.task_offsets is not None or req.task_end_offsets is not None:
            current = group.task_offsets.get(req.member_id, MemberTaskOffsets())
            group.task_offsets[req.member_id] = MemberTaskOffsets(
                _offsets_map(req.task_offsets) if req.task_offsets is not None else current.offsets,
                _offsets_map(req.task_end_offsets) if req.task_end_offsets is not None else current.end_offsets,
            )
        if validated_epoch != group.validated_topology_epoch:
            update = _RECOMPUTE
        configs = self.assignment_configs(req.group_id)
        if update == _NONE and configs != group.last_assignment_configs:
            log.info("assignment configurations changed, re-assigning", group=req.group_id, member=req.member_id, configs=configs)
            update = _RECOMPUTE
        if update == _NONE and group.state == StreamsGroupState.STABLE and not group.target_of(req.member_id).same_tasks(updated.assigned):
            update = _REFINED  # Kafka 4.4's assignment refiner keeps the target as it is (no warm-ups yet)

        group_epoch = group.group_epoch
        if update != _NONE:
            group_epoch += 1
            records.append(self._metadata_record(group, group_epoch, metadata_hash, validated_epoch, configs))
            log.info(
                "streams group epoch bumped",
                group=req.group_id,
                member=req.member_id,
                group_epoch=group_epoch,
                metadata_hash=metadata_hash,
                validated_topology_epoch=validated_epoch,
            )
            self.stats.streams_epoch_bumps += 1
            group.metadata_refresh = False
        if group.is_empty:
            delay = self.initial_rebalance_delay_ms(req.group_id)
            key = INITIAL_REBALANCE_KEY.format(req.group_id)
            if delay > 0 and not self.timers.is_scheduled(key):
                gid = req.group_id
                self.timers.schedule(key, delay, lambda: self._delayed_target_assignment(gid), group=gid)

        target_epoch, targets = self._maybe_update_target(
            group, group_epoch, updated, replaced, configured, records, statuses, configs, update == _REFINED, now
        )
        target = targets.get(req.member_id, EMPTY_TASKS)
        reconciled = self._maybe_reconcile(group, updated, target_epoch, target, req, records)

        if req.shutdown_application and group.shutdown_request_member_id is None:
            log.info("shutdown requested for the streams application", group=req.group_id, member=req.member_id)
            group.shutdown_request_member_id = req.member_id

        result = StreamsHeartbeatResult(
            reconciled.member_id,
            reconciled.member_epoch,
            self.heartbeat_interval_ms(req.group_id),
            self.task_offset_interval_ms(req.group_id),
            self.acceptable_recovery_lag(req.group_id),
        )
        tasks_changed = member.assigned != reconciled.assigned
        endpoint_changed = member.user_endpoint != reconciled.user_endpoint
        if joining or tasks_changed:
            # each kind in the order Kafka's HashMap of sub-topologies iterates
            result.active_tasks = _java_ordered(reconciled.assigned.active)
            result.standby_tasks = _java_ordered(reconciled.assigned.standby)
            result.warmup_tasks = _java_ordered(reconciled.assigned.warmup)
        if endpoint_changed or (tasks_changed and reconciled.user_endpoint is not None):
            group.endpoint_information_epoch += 1
        if group.endpoint_information_epoch != req.endpoint_information_epoch:
            result.partitions_by_user_endpoint = self._endpoint_to_partitions(group, reconciled, replaced)
        if req.group_id in self.groups:
            result.endpoint_information_epoch = group.endpoint_information_epoch
        if configured.error is not None:
            result.topics_to_create = dict(configured.to_create)
            statuses.append((configured.error.status, configured.error.message))
        if group.shutdown_request_member_id is not None:
            statuses.append(
                (
                    Status.SHUTDOWN_APPLICATION,
                    f"Streams group member {group.shutdown_request_member_id} encountered a fatal error and requested a shutdown for the entire application.",
                )
            )
        tags = configs.get(RACK_AWARE_ASSIGNMENT_TAGS, "").strip()
        if req.api_version >= 1 and tags:
            required = [t.strip() for t in tags.split(",")]
            missing = [t for t in required if t not in reconciled.client_tags]
            if missing:
                statuses.append(
                    (
                        Status.MISSING_CLIENT_TAGS,
                        f"Missing required client tags for rack-aware standby assignment: [{', '.join(missing)}]. "
                        "Configure them via 'client.tag.<tagKey>' in your Streams config.",
                    )
                )
        result.status = statuses

        was_stable = group.state == StreamsGroupState.STABLE if req.group_id in self.groups else False
        waiter = self._write(req.group_id, records) if records else None
        group = self.groups.get(req.group_id, group)  # a new group exists once its records are replayed
        self._after_write(group, member, reconciled, was_stable)
        self.sessions.schedule(req.group_id, req.member_id)
        return result, waiter

    def _write(self, group_id: str, records: list[Record]) -> Awaitable[Any] | None:
        """Append the records; the group as of this write is what StreamsGroupDescribe shows of its
        configured topology (Kafka describes a group at the last committed offset, and a configured
        topology computed by a heartbeat that wrote nothing is not there yet)."""
        waiter = self.shard.write(records)
        group = self.groups.get(group_id)
        if group is not None:
            group.described_topology = group.configured_topology
        return waiter

    def _after_write(self, group: StreamsGroup, before: StreamsMember, after: StreamsMember, was_stable: bool) -> None:
        gid = group.group_id
        if after.state is MemberState.UNREVOKED_TASKS:
            if (
                before.state is not MemberState.UNREVOKED_TASKS
                or before.member_epoch != after.member_epoch
                or not before.same_assignment(after)
            ):
                self._schedule_rebalance(gid, after.member_id, after.member_epoch, after.rebalance_timeout_ms)
        elif not before.same_assignment(after):
            self.timers.cancel(_rebalance_key(gid, after.member_id))
        if group.state == StreamsGroupState.STABLE and not was_stable:
            duration = None if group.last_stable_ms is None else round(time.monotonic() * 1000 - group.last_stable_ms, 1)
            log.info(
                "streams group stable",
                group=gid,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                members=len(group.members),
                duration_ms=duration,
            )
            self.stats.streams_reconciliations += 1
        elif was_stable and group.state != StreamsGroupState.STABLE:
            group.last_stable_ms = time.monotonic() * 1000

    # -- the group and the member -----------------------------------------------------------------

    def _get_or_create_group(self, group_id: str, records: list[Record]) -> StreamsGroup:
        """getOrCreateStreamsGroup: an empty classic group is converted (its record tombstoned)."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.shard.consumer_groups:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
        classic = self.shard.groups.get(group_id)
        if classic is None:
            return StreamsGroup(group_id)
        if classic.is_empty:
            records.append((orec.group_metadata_key(group_id), None))
            log.info("converted the empty classic group to a streams group", group=group_id)
            return StreamsGroup(group_id)
        raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")

    def _group_or_throw(self, group_id: str) -> StreamsGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.shard.consumer_groups or group_id in self.shard.groups:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
        raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")

    def describe_or_throw(self, group_id: str) -> StreamsGroup:
        """streamsGroup(groupId): Kafka's messages for a group that is missing or of another type."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.shard.consumer_groups or group_id in self.shard.groups:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
        raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")

    def _throw_if_full(self, group: StreamsGroup, instance_id: str | None, member_id: str) -> None:
        if instance_id is not None and instance_id in group.static_members:
            return
        limit = self.config.group_streams_max_size
        if len(group.members) >= limit and (not member_id or member_id not in group.members):
            raise CoordinatorError(
                ErrorCode.GROUP_MAX_SIZE_REACHED, f"The streams group has reached its maximum capacity of {limit} members."
            )

    @staticmethod
    def _check_epoch(member: StreamsMember, req: StreamsHeartbeat) -> None:
        """throwIfStreamsGroupMemberEpochIsInvalid (KS-8)."""
        epoch = req.member_epoch
        if epoch == 0:
            return
        if epoch > member.member_epoch:
            raise CoordinatorError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The streams group member has a greater member epoch ({epoch}) than the one known by the group coordinator "
                f"({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch:
            ok = (
                epoch == member.previous_member_epoch
                and _owned_within(req.active_tasks, {s: set(ps) for s, ps in member.assigned.active.items()})
                and _owned_within(req.standby_tasks, member.assigned.standby)
                and _owned_within(req.warmup_tasks, member.assigned.warmup)
            )
            if not ok:
                raise CoordinatorError(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The streams group member has a smaller member epoch ({epoch}) than the one known by the group coordinator "
                    f"({member.member_epoch}). The member must abandon all its partitions and rejoin.",
                )

    def _dynamic_member(self, group: StreamsGroup, req: StreamsHeartbeat, joining: bool) -> StreamsMember:
        member = group.members.get(req.member_id)
        if member is None:
            if not joining:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}.")
            member = StreamsMember(req.member_id)
        self._check_epoch(member, req)
        if joining:
            log.info("member joins the streams group", group=group.group_id, member=req.member_id)
        return member

    def _static_member(self, group: StreamsGroup, req: StreamsHeartbeat, joining: bool, records: list[Record]) -> StreamsMember:
        existing = group.static_member(req.instance_id)
        if joining:
            if existing is None:
                member = group.members.get(req.member_id) or StreamsMember(req.member_id)
                log.info("static member joins the streams group", group=group.group_id, member=req.member_id, instance_id=req.instance_id)
                return member
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                log.info(
                    "static member cannot join: its instance id is owned by another member",
                    group=group.group_id,
                    member=req.member_id,
                    instance_id=req.instance_id,
                    owner=existing.member_id,
                )
                raise CoordinatorError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} cannot join the group because the instance id "
                    f"is owned by {existing.member_id} member.",
                )
            replacement = existing.copy(member_id=req.member_id, member_epoch=0, previous_member_epoch=0)
            records += self._remove_member_records(group.group_id, existing.member_id)
            records.append(self._member_record(group.group_id, replacement))
            records.append(self._target_record(group.group_id, replacement.member_id, group.target_of(existing.member_id)))
            records.append(self._current_record(group.group_id, replacement))
            log.info(
                "static member re-joins the streams group",
                group=group.group_id,
                instance_id=req.instance_id,
                new_member=req.member_id,
                old_member=existing.member_id,
            )
            return replacement
        if existing is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != req.member_id:
            raise CoordinatorError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member {existing.member_id}.",
            )
        self._check_epoch(existing, req)
        return existing

    def _maybe_update_topology(self, req: StreamsHeartbeat, group: StreamsGroup, records: list[Record]) -> StreamsTopology:
        if req.topology is not None:
            topology, value = from_request(req.topology)
            if group.topology is None:
                log.info("member initialized the topology", group=req.group_id, member=req.member_id, topology_epoch=topology.epoch)
                records.append((key_of(srec.STREAMS_GROUP_TOPOLOGY_KEY, req.group_id), srec.topology_value(value)))
                return topology
            if group.topology.epoch > topology.epoch:
                log.info(
                    "member joined with a stale topology epoch", group=req.group_id, member=req.member_id, topology_epoch=topology.epoch
                )
                return group.topology
            if group.topology != topology:
                raise CoordinatorError(ErrorCode.INVALID_REQUEST, "Topology updates are not supported yet.")
            return group.topology
        if group.topology is not None:
            return group.topology
        raise InternalStateError("The topology is null and the group topology is also null.")

    # -- target assignment (KS-15..KS-17) -------------------------------------------------------------

    def _members_view(
        self, group: StreamsGroup, updated: StreamsMember | None, replaced: StreamsMember | None
    ) -> tuple[dict[str, StreamsMember], dict[str, TasksTuple]]:
        """UpdatedMembersAndTargetAssignmentView: the members and targets once this operation's
        records are applied (a static member's replacement takes its predecessor's target)."""
        members = dict(group.members)
        targets = dict(group.target)
        if updated is not None:
            members[updated.member_id] = updated
            if replaced is not None and replaced.member_id != updated.member_id:
                if replaced.member_id in targets:
                    targets[updated.member_id] = targets[replaced.member_id]
                members.pop(replaced.member_id, None)
                targets.pop(replaced.member_id, None)
        return members, targets

    def _maybe_update_target(
        self,
        group: StreamsGroup,
        group_epoch: int,
        updated: StreamsMember | None,
        replaced: StreamsMember | None,
        configured: ConfiguredTopology,
        records: list[Record],
        statuses: list[tuple[int, str]] | None,
        configs: dict[str, str],
        refine_only: bool,
        now: int,
    ) -> tuple[int, dict[str, TasksTuple]]:
        if self.timers.is_scheduled(INITIAL_REBALANCE_KEY.format(group.group_id)):
            if statuses is not None:
                statuses.append((Status.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay."))
            return group.assignment_epoch, {}
        members, targets = self._members_view(group, updated, replaced)
        if group.assignment_epoch >= group_epoch:
            return group.assignment_epoch, targets
        if refine_only and group.assignment_epoch >= group.group_epoch:
            records.append(self._target_metadata_record(group.group_id, group_epoch, group.assignment_timestamp))
            return group_epoch, targets
        interval = self.assignment_interval_ms(group.group_id)
        if group.assignment_timestamp != 0 and interval != 0 and now < group.assignment_timestamp + interval:
            if statuses is not None:
                statuses.append((Status.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment interval."))
            return group.assignment_epoch, targets
        name = self.assignor_name(group.group_id, warn=True)
        started = time.monotonic()
        new_targets = self._assign(group, members, targets, configured, configs)
        for mid, tasks in new_targets.items():
            if targets.get(mid) != tasks:
                records.append(self._target_record(group.group_id, mid, tasks))
        records.append(self._target_metadata_record(group.group_id, group_epoch, now))
        log.info(
            "computed a new target assignment",
            group=group.group_id,
            group_epoch=group_epoch,
            assignor=name,
            members=len(members),
            ms=round((time.monotonic() - started) * 1000, 2),
        )
        return group_epoch, new_targets

    def _assign(
        self,
        group: StreamsGroup,
        members: dict[str, StreamsMember],
        targets: dict[str, TasksTuple],
        configured: ConfiguredTopology,
        configs: dict[str, str],
    ) -> dict[str, TasksTuple]:
        """TargetAssignmentBuilder.build: with a ready topology the assignor's result, else nothing."""
        if not configured.is_ready:
            return {mid: EMPTY_TASKS for mid in members}
        assert configured.subtopologies is not None
        specs = {}
        for mid, m in members.items():
            offsets = group.task_offsets.get(mid, MemberTaskOffsets())
            specs[mid] = sticky.MemberSpec(m.process_id, m.assigned.active_tasks(), m.assigned.standby, offsets.offsets)
        topology = sticky.TopologySpec(
            {sid: s.number_of_tasks for sid, s in configured.subtopologies.items()},
            frozenset(sid for sid, s in configured.subtopologies.items() if s.state_changelog_topics),
        )
        standby = int(configs.get(NUM_STANDBY_REPLICAS, "0"))
        try:
            result = sticky.assign(specs, topology, standby)
        except sticky.TaskAssignorError as exc:
            raise CoordinatorError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment for epoch {group.group_epoch}: {exc}"
            ) from exc
        out = {}
        for mid in members:
            a = result.get(mid)
            out[mid] = TasksTuple(tasks_from(a.active.items()), tasks_from(a.standby.items()), {}) if a is not None else EMPTY_TASKS
        return out

    def _delayed_target_assignment(self, group_id: str) -> None:
        """computeDelayedTargetAssignment: the initial rebalance delay is over."""
        group = self.groups.get(group_id)
        if group is None:
            log.warning("group not found after its initial rebalance delay", group=group_id)
            return
        if group.is_empty:
            log.info("skipping the delayed target assignment: the group is empty", group=group_id)
            return
        if group.configured_topology is None:
            log.warning("cannot compute the delayed target assignment: the topology is not configured", group=group_id)
            return
        records: list[Record] = []
        self._maybe_update_target(
            group,
            group.group_epoch,
            None,
            None,
            group.configured_topology,
            records,
            None,
            group.last_assignment_configs,
            False,
            self.shard.now_ms(),
        )
        if records:
            self._write(group_id, records)

    # -- reconciliation (KS-18, KS-19) --------------------------------------------------------------

    def _maybe_reconcile(
        self,
        group: StreamsGroup,
        member: StreamsMember,
        target_epoch: int,
        target: TasksTuple,
        req: StreamsHeartbeat,
        records: list[Record],
    ) -> StreamsMember:
        if member.is_reconciled_to(target_epoch):
            return member
        owned = None
        if req.active_tasks is not None and req.standby_tasks is not None and req.warmup_tasks is not None:
            owned = TasksTuple(_owned_map(req.active_tasks), _owned_map(req.standby_tasks), _owned_map(req.warmup_tasks))
        builder = CurrentAssignmentBuilder(
            member, target_epoch, target, group.active_process_of, group.standby_processes_of, group.warmup_processes_of, owned
        )
        updated = builder.build()
        if updated is not member and not updated.same_assignment(member):
            records.append(self._current_record(group.group_id, updated))
            log.info(
                "streams member's new assignment state",
                group=group.group_id,
                member=updated.member_id,
                epoch=updated.member_epoch,
                previous_epoch=updated.previous_member_epoch,
                state=updated.state.name,
                assigned=str(updated.assigned),
                pending_revocation=str(updated.pending_revocation),
            )
        return updated

    # -- leaving and fencing (KS-22..KS-24) ------------------------------------------------------------

    def _leave(self, req: StreamsHeartbeat) -> tuple[StreamsHeartbeatResult, Awaitable[Any] | None]:
        group = self.describe_or_throw(req.group_id)
        if req.shutdown_application and group.shutdown_request_member_id is None:
            group.shutdown_request_member_id = req.member_id
        result = StreamsHeartbeatResult(req.member_id, req.member_epoch)
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}.")
            log.info("member left the streams group", group=req.group_id, member=req.member_id)
            return result, self.fence(group, member, "left the group")
        member = group.static_member(req.instance_id)
        if member is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise CoordinatorError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member {member.member_id}.",
            )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            log.info(
                "static member temporarily left the streams group", group=req.group_id, member=req.member_id, instance_id=req.instance_id
            )
            leaving = member.copy(
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                pending_revocation=TasksWithEpochs(),
                assigned=member.assigned.with_zero_epochs(),
            )
            waiter = self._write(req.group_id, [self._current_record(req.group_id, leaving)])
            return StreamsHeartbeatResult(member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH), waiter
        log.info("static member left the streams group", group=req.group_id, member=req.member_id, instance_id=req.instance_id)
        return result, self.fence(group, member, "left the group")

    def fence(self, group: StreamsGroup, member: StreamsMember, reason: str) -> Awaitable[Any] | None:
        """streamsGroupFenceMember: the member's records tombstoned and the group epoch bumped; when
        it was the last member, the target assignment moves to the new epoch too."""
        records = self._remove_member_records(group.group_id, member.member_id)
        epoch = group.group_epoch + 1
        records.append(
            self._metadata_record(group, epoch, group.metadata_hash, group.validated_topology_epoch, group.last_assignment_configs)
        )
        if len(group.members) == 1:
            records.append(self._target_metadata_record(group.group_id, epoch, 0))
        self._cancel_timers(group.group_id, member.member_id)
        waiter = self._write(group.group_id, records)
        if reason != "left the group":
            self.stats.streams_members_fenced += 1
        self.stats.streams_epoch_bumps += 1
        log.info("streams group epoch bumped", group=group.group_id, group_epoch=epoch, reason=f"member {member.member_id} {reason}")
        return waiter

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self.sessions.cancel(group_id, member_id)
        self.timers.cancel(_rebalance_key(group_id, member_id))

    # -- timers (KS-20, KS-21) --------------------------------------------------------------------

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        log.info("streams member fenced", group=group_id, member=member_id, reason="the member session expired")
        self.fence(group, member, "session expired")

    def _schedule_rebalance(self, group_id: str, member_id: str, epoch: int, timeout_ms: int) -> None:
        self.timers.schedule(
            _rebalance_key(group_id, member_id),
            max(timeout_ms, 0),
            lambda: self._rebalance_expired(group_id, member_id, epoch, timeout_ms),
            group=group_id,
        )

    def _rebalance_expired(self, group_id: str, member_id: str, epoch: int, timeout_ms: int) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.member_epoch != epoch:
            return
        log.info(
            "streams member fenced",
            group=group_id,
            member=member_id,
            reason=f"it failed to transition from epoch {epoch} within {timeout_ms}ms",
        )
        self.fence(group, member, "did not revoke its tasks within the rebalance timeout")

    # -- IQ endpoints ----------------------------------------------------------------------------------

    def _endpoint_to_partitions(self, group: StreamsGroup, updated: StreamsMember, replaced: StreamsMember | None) -> list[Any]:
        """StreamsGroup.buildEndpointToPartitions: every member with an endpoint, the updated one last."""
        out = []
        skip = {updated.member_id} | ({replaced.member_id} if replaced is not None else set())
        for mid, m in group.members.items():
            if mid in skip:
                continue
            entry = self._endpoint_entry(group, m)
            if entry is not None:
                out.append(entry)
        entry = self._endpoint_entry(group, updated)
        if entry is not None:
            out.append(entry)
        return out

    def _endpoint_entry(self, group: StreamsGroup, member: StreamsMember) -> Any:
        if member.user_endpoint is None:
            return None
        configured = group.configured_topology
        subtopologies = configured.subtopologies if configured is not None else None
        if subtopologies is None:
            raise InternalStateError("No value present")
        return (
            member.user_endpoint,
            self._topic_partitions(member.assigned.active_tasks(), subtopologies),
            self._topic_partitions(member.assigned.standby_and_warmup(), subtopologies),
        )

    def _topic_partitions(self, tasks: dict[str, frozenset[int]], subtopologies: dict[str, Any]) -> list[tuple[str, list[int]]]:
        out = []
        for sid, ps in tasks.items():
            s = subtopologies.get(sid)
            if s is None:
                continue
            # a HashSet of the source topics, then the repartition source topics, as Kafka iterates it
            sources = list(s.source_topics)
            capacity = max(int(len(sources) / 0.75) + 1, 16)
            for topic in hashmap_order([*sources, *s.repartition_source_topics], initial_capacity=capacity):
                n = self._partitions_of(topic)
                if n is None:
                    raise InternalStateError(f"Topic {topic} not found in metadata image")
                partitions = sorted(p for p in ps if p < n)
                if partitions:
                    out.append((topic, partitions))
        return out

    # -- offsets (KS-27) -------------------------------------------------------------------------------

    def validate_offset_commit(
        self, group: StreamsGroup, member_id: str, instance_id: str | None, member_epoch: int, api_version: int, transactional: bool
    ) -> Any:
        """StreamsGroup.validateOffsetCommit: None, or a check of each committed partition (KIP-1251:
        a member a step behind may still commit the tasks it was given at or before its epoch)."""
        if member_epoch < 0 and not group.members:
            return None
        if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            return None
        member = group.members.get(member_id)
        if member is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
        if not transactional and api_version < 9:
            raise CoordinatorError(
                ErrorCode.UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be used by members using the streams group protocol"
            )
        if member_epoch == member.member_epoch:
            return None
        if member_epoch > member.member_epoch:
            raise CoordinatorError(
                ErrorCode.STALE_MEMBER_EPOCH,
                f"Received member epoch {member_epoch} is newer than current member epoch {member.member_epoch}.",
            )
        topology = group.topology
        if topology is None:
            raise CoordinatorError(ErrorCode.STALE_MEMBER_EPOCH, "Topology is not available for offset commit validation.")

        def check(topic: str, partition: int) -> None:
            s = topology.source_topic_map.get(topic)
            if s is None:
                raise CoordinatorError(ErrorCode.STALE_MEMBER_EPOCH, f"Topic {topic} is not in the topology.")
            sid = s.subtopology_id
            epoch = member.assigned.active.get(sid, {}).get(partition)
            if epoch is None:
                epoch = member.pending_revocation.active.get(sid, {}).get(partition)
            if epoch is None:
                raise CoordinatorError(
                    ErrorCode.STALE_MEMBER_EPOCH, f"Task {sid}-{partition} is not assigned or pending revocation for member."
                )
            if member_epoch < epoch:
                raise CoordinatorError(
                    ErrorCode.STALE_MEMBER_EPOCH,
                    f"Received member epoch {member_epoch} is older than assignment epoch {epoch} for task {sid}-{partition}.",
                )

        return check

    @staticmethod
    def validate_offset_fetch(group: StreamsGroup, member_id: str | None, member_epoch: int) -> None:
        if member_id is None and member_epoch < 0:
            return
        member = group.members.get(member_id) if member_id is not None else None
        if member is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
        if member_epoch != member.member_epoch:
            raise CoordinatorError(
                ErrorCode.STALE_MEMBER_EPOCH,
                f"The received member epoch {member_epoch} does not match the expected member epoch {member.member_epoch}.",
            )

    # -- classic JoinGroup on an empty streams group (KS-29) ------------------------------------------

    def maybe_delete_empty(self, group_id: str) -> list[Record] | None:
        """maybeDeleteEmptyStreamsGroup: the tombstones of an empty streams group a classic member
        joins (it becomes a classic group); None if the id is not an empty streams group."""
        group = self.groups.get(group_id)
        if group is None or not group.is_empty:
            return None
        self.timers.cancel(INITIAL_REBALANCE_KEY.format(group_id))
        return self.group_tombstones(group)


def _java_ordered(tasks: Any) -> dict[str, list[int]]:
    return {s: sorted(tasks[s]) for s in hashmap_order(tasks)}


def _epoch_relevant_change(old: StreamsMember, new: StreamsMember) -> bool:
    """hasEpochRelevantMemberConfigChanged: what re-assigns a static member's group."""
    return (
        old.topology_epoch != new.topology_epoch
        or old.rack_id != new.rack_id
        or old.client_tags != new.client_tags
        or old.process_id != new.process_id
    )


def _owned_within(owned: list[Any] | None, assigned: Any) -> bool:
    """areOwnedTasksContainedInAssignedTasks: every owned task is assigned (a null list is not)."""
    if owned is None:
        return False
    for t in owned:
        partitions = assigned.get(t.subtopology_id)
        if partitions is None:
            return False
        if any(p not in partitions for p in t.partitions):
            return False
    return True


def _owned_map(owned: list[Any]) -> dict[str, frozenset[int]]:
    """TasksTuple.fromHeartbeatRequest (Collectors.toMap: a sub-topology twice is an internal error)."""
    out: dict[str, frozenset[int]] = {}
    for t in owned:
        if t.subtopology_id in out:
            raise InternalStateError(f"Duplicate key {t.subtopology_id}")
        out[t.subtopology_id] = frozenset(t.partitions)
    return out


def _check_owned_tasks(configured: ConfiguredTopology, owned: list[Any] | None) -> None:
    """throwIfRequestContainsInvalidTasks (KS-9)."""
    if not owned:
        return
    assert configured.subtopologies is not None
    for t in owned:
        s = configured.subtopologies.get(t.subtopology_id)
        if s is None:
            raise CoordinatorError(ErrorCode.INVALID_REQUEST, f"Subtopology {t.subtopology_id} does not exist in the topology.")
        for p in t.partitions:
            if not 0 <= p < s.number_of_tasks:
                raise CoordinatorError(
                    ErrorCode.INVALID_REQUEST,
                    f"Task {p} for subtopology {t.subtopology_id} is invalid. Number of tasks for this subtopology: {s.number_of_tasks}",
                )


def _offsets_map(offsets: list[Any]) -> dict[str, dict[int, int]]:
    """MemberTaskOffsets.toNestedMap: a task reported twice is INVALID_REQUEST."""
    out: dict[str, dict[int, int]] = {}
    for o in offsets:
        by_partition = out.setdefault(o.subtopology_id, {})
        if o.partition in by_partition:
            raise CoordinatorError(
                ErrorCode.INVALID_REQUEST,
                f"Task offsets contain a duplicate entry for subtopology {o.subtopology_id} and partition {o.partition}.",
            )
        by_partition[o.partition] = o.offset
    return out
