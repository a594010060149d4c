"""Share groups (KIP-932) on one coordinator shard: ShareGroupHeartbeat, the `simple` assignor's
target assignment, reconciliation, session timeouts, the state partitions the share coordinator
has initialized, replay of records 10-15, and the admin operations (describe, delete, alter and
delete offsets) as Kafka's GroupMetadataManager does them for share groups.

Every state change is a record: an operation computes its records from the current state and
`shard.write` appends and replays them through `replay()`, the same function that rebuilds the
groups at load.

A member's partitions come only from partitions whose share state the share coordinator has
initialized: the heartbeat that first subscribes a group to a topic marks its partitions
"initializing" (a ShareGroupStatePartitionMetadata record), asks the share coordinator to
initialize them right after the heartbeat is answered, and marks them "initialized" once done;
the member's next heartbeat then gets them (so a new member's first assignment comes with its
second heartbeat, as in Kafka).

Where kaflet decides (docs/decisions.md): `group.share.assignment.interval.ms` defaults to 0, so
the target assignment is computed in the heartbeat that changed the group (Kafka's 1000 ms is
honoured when set, per group or broker), and the group's
MetadataHash is kaflet's own hash of the subscribed topics' ids, names and partition counts (Kafka
uses XXH3 over the same facts and the partitions' racks): it only detects changes, so only its
value differs.
"""

from __future__ import annotations

import asyncio
import hashlib
import struct
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.coordinator.consumer.group import MemberState
from broker.coordinator.sessions import MemberSessions
from broker.coordinator.share import assignor
from broker.coordinator.share.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    InitInfo,
    Partitions,
    ShareGroup,
    ShareMember,
    StatePartitions,
    from_partitions,
    to_partitions,
)
from broker.runtime.errors import CoordinatorError
from broker.share.settings import clamp
from protocol.errors import ErrorCode
from storage import share_group_records as srec

if TYPE_CHECKING:
    from broker.coordinator.shard import GroupShard

log = structlog.get_logger("kaflet.coordinator")

Record = tuple[bytes, bytes | None]
INT32_MAX = 2**31 - 1


class ShareStatePersister(Protocol):
    """The share coordinator as the group coordinator calls it (Kafka's Persister)."""

    def initialize(
        self, group: str, topic_id: uuid.UUID | None, partition: int, state_epoch: int, start_offset: int
    ) -> tuple[Any, Awaitable[Any] | None]: ...

    def delete(self, group: str, topic_id: uuid.UUID | None, partition: int) -> tuple[Any, Awaitable[Any] | None]: ...

    def read_summary(self, group: str, topic_id: uuid.UUID | None, partition: int) -> tuple[Any, Awaitable[Any] | None]: ...


@dataclass
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: list[str] | None
    client_id: str = ""
    client_host: str = ""


@dataclass
class ShareHeartbeatResult:
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


def key_of(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    return srec.share_group_key(kind, group_id, member_id)


def _signed64(raw: bytes) -> int:
    return struct.unpack(">q", raw)[0]


class ShareGroupManager:
    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard
        self.timers = shard.timers
        self.config = shard.config
        self.state_partitions: dict[str, StatePartitions] = {}
        self.sessions = MemberSessions(self.timers, "share-session", lambda g: self.session_timeout_ms(g), self._session_expired)
        self.heartbeats = 0
        self.epoch_bumps = 0
        self.members_fenced = 0

    @property
    def groups(self) -> dict[str, ShareGroup]:
        return self.shard.share_groups

    @property
    def topics(self) -> Any:
        return self.shard.service.topics

    @property
    def persister(self) -> ShareStatePersister | None:
        return getattr(self.shard.service, "share_state", None)

    # -- configuration --------------------------------------------------------------------

    def _group_config(self, group_id: str, name: str) -> int | None:
        configs = getattr(self.shard.service, "group_configs", None)
        if configs is None:
            return None
        value = configs.get(group_id, name)
        return int(value) if value is not None else None

    def _setting(self, group_id: str, name: str, bounds: str) -> int:
        """The group's own value within the broker's current bounds (GroupConfig.evaluate), or the broker's."""
        value = self._group_config(group_id, name)
        return clamp(value, self.config, bounds) if value is not None else getattr(self.config, f"group_share_{bounds}")

    def session_timeout_ms(self, group_id: str) -> int:
        return self._setting(group_id, "share.session.timeout.ms", "session_timeout_ms")

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._setting(group_id, "share.heartbeat.interval.ms", "heartbeat_interval_ms")

    def assignment_interval_ms(self, group_id: str) -> int:
        return self._setting(group_id, "share.assignment.interval.ms", "assignment_interval_ms")

    # -- replay ---------------------------------------------------------------------------

    def _persisted_group(self, group_id: str, create: bool) -> ShareGroup | None:
        """getOrMaybeCreatePersistedShareGroup: a record of another group type here is a broken log."""
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                return None
            if group_id in self.shard.groups or group_id in self.shard.consumer_groups:
                raise ValueError(f"Group {group_id} is not a share group.")
            group = self.groups[group_id] = ShareGroup(group_id)
            group.created_ms = self.shard.now_ms()
        return group

    def replay(self, kind: int, key: bytes, value: bytes | None) -> None:
        _, group_id, member_id = srec.parse_share_group_key(key)
        if kind == srec.SHARE_GROUP_MEMBER_METADATA_KEY:
            group = self._persisted_group(group_id, value is not None)
            if group is None:
                return
            assert member_id is not None
            if value is None:
                group.members.pop(member_id, None)
                self._cancel_timers(group_id, member_id)
                return
            v = srec.parse_share_member_metadata_value(value)
            member = group.members.get(member_id) or ShareMember(member_id)
            member.rack_id = v.rack_id
            member.client_id = v.client_id
            member.client_host = v.client_host
            member.subscribed_topic_names = frozenset(v.subscribed_topic_names)
            group.members[member_id] = member
        elif kind == srec.SHARE_GROUP_METADATA_KEY:
            if value is None:
                group = self.groups.get(group_id)
                if group is not None and not group.members:
                    del self.groups[group_id]
                return
            group = self._persisted_group(group_id, True)
            assert group is not None
            group.group_epoch, group.metadata_hash = srec.parse_share_group_metadata_value(value)
        elif kind == srec.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY:
            group = self._persisted_group(group_id, value is not None)
            if group is None:
                return
            if value is None:
                group.assignment_epoch, group.assignment_timestamp = 1, 0
            else:
                group.assignment_epoch, group.assignment_timestamp = srec.parse_share_target_assignment_metadata_value(value)
        elif kind == srec.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY:
            group = self._persisted_group(group_id, value is not None)
            if group is None:
                return
            assert member_id is not None
            if value is None:
                group.target.pop(member_id, None)
            else:
                group.target[member_id] = to_partitions(srec.parse_share_target_assignment_value(value))
        elif kind == srec.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY:
            group = self._persisted_group(group_id, value is not None)
            if group is None:
                return
            assert member_id is not None
            member = group.members.get(member_id)
            if value is None:
                if member is not None:
                    member.member_epoch, member.previous_member_epoch, member.assigned = -1, -1, {}
                return
            if member is None:
                member = group.members[member_id] = ShareMember(member_id)
            v = srec.parse_share_current_assignment_value(value)
            member.member_epoch = v.member_epoch
            member.previous_member_epoch = v.previous_member_epoch
            member.state = MemberState.of(v.state)
            member.assigned = to_partitions(v.assigned)
        elif kind == srec.SHARE_GROUP_STATE_PARTITION_METADATA_KEY:
            if value is None:
                self.state_partitions.pop(group_id, None)
                return
            self._persisted_group(group_id, True)
            v = srec.parse_share_state_partition_metadata_value(value)
            now = self.shard.now_ms()
            self.state_partitions[group_id] = StatePartitions(
                {i.topic_id: InitInfo(i.topic_name, frozenset(i.partitions), now) for i in v.initializing},
                {i.topic_id: InitInfo(i.topic_name, frozenset(i.partitions), now) for i in v.initialized},
                dict(v.deleting),
            )

    def on_loaded(self) -> None:
        """Every member gets a session timer again (onLoaded)."""
        self.sessions.clear()
        for group in self.groups.values():
            group.metadata_refresh = True
            for member_id in group.members:
                self.sessions.schedule(group.group_id, member_id)
            if group.members:
                log.info("loaded share group", group=group.group_id, members=len(group.members), group_epoch=group.group_epoch)

    # -- records ------------------------------------------------------------------------------

    @staticmethod
    def _metadata_record(group_id: str, m: ShareMember) -> Record:
        value = srec.share_member_metadata_value(
            srec.ShareMemberMetadata(m.rack_id, m.client_id, m.client_host, list(m.subscribed_topic_names))
        )
        return key_of(srec.SHARE_GROUP_MEMBER_METADATA_KEY, group_id, m.member_id), value

    @staticmethod
    def _current_record(group_id: str, m: ShareMember) -> Record:
        value = srec.share_current_assignment_value(
            srec.ShareCurrentAssignment(m.member_epoch, m.previous_member_epoch, int(m.state), from_partitions(m.assigned))
        )
        return key_of(srec.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, m.member_id), value

    @staticmethod
    def _epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
        return key_of(srec.SHARE_GROUP_METADATA_KEY, group_id), srec.share_group_metadata_value(epoch, metadata_hash)

    def _state_record(
        self, group_id: str, initializing: dict[uuid.UUID, InitInfo], initialized: dict[uuid.UUID, InitInfo], deleting: dict[uuid.UUID, str]
    ) -> Record:
        def infos(m: dict[uuid.UUID, InitInfo]) -> list[srec.TopicPartitionsInfo]:
            return [srec.TopicPartitionsInfo(t, i.name, sorted(i.partitions)) for t, i in sorted(m.items(), key=lambda kv: kv[0].bytes)]

        value = srec.share_state_partition_metadata_value(
            srec.StatePartitionMetadata(infos(initializing), infos(initialized), sorted(deleting.items(), key=lambda kv: kv[0].bytes))
        )
        return key_of(srec.SHARE_GROUP_STATE_PARTITION_METADATA_KEY, group_id), value

    def group_tombstones(self, group: ShareGroup) -> list[Record]:
        """ShareGroup.createGroupTombstoneRecords."""
        g = group.group_id
        records: list[Record] = [(key_of(srec.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, g, m), None) for m in group.members]
        records += [(key_of(srec.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, g, m), None) for m in group.members]
        records.append((key_of(srec.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, g), None))
        records += [(key_of(srec.SHARE_GROUP_MEMBER_METADATA_KEY, g, m), None) for m in group.members]
        records.append((key_of(srec.SHARE_GROUP_STATE_PARTITION_METADATA_KEY, g), None))
        records.append((key_of(srec.SHARE_GROUP_METADATA_KEY, g), None))
        return records

    # -- the metadata hash ------------------------------------------------------------------

    def _metadata_hash(self, subscribed: dict[str, int]) -> int:
        """A 64-bit hash of the subscribed topics as they exist now (0 when none exists)."""
        parts = []
        for name in sorted(subscribed):
            topic = self.topics.get(name)
            if topic is not None:
                parts.append(topic.topic_id.bytes + name.encode() + b"\x00" + struct.pack(">i", topic.partitions))
        if not parts:
            return 0
        return _signed64(hashlib.blake2b(b"".join(parts), digest_size=8).digest())

    def _topic_ids(self, names: frozenset[str]) -> frozenset[uuid.UUID]:
        out = set()
        for name in names:
            topic = self.topics.get(name)
            if topic is not None:
                out.add(topic.topic_id)
        return frozenset(out)

    # -- ShareGroupHeartbeat ------------------------------------------------------------------------

    def _group_for_heartbeat(self, group_id: str, create: bool) -> ShareGroup:
        """getOrMaybeCreateShareGroup (a new group exists only once its records are written)."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.shard.groups or group_id in self.shard.consumer_groups or self._other_type(group_id):
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not create:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        group = ShareGroup(group_id)
        group.created_ms = self.shard.now_ms()
        return group

    def _other_type(self, group_id: str) -> bool:
        """A group of a type this module does not know (a streams group) holds the id."""
        other = getattr(self.shard, "streams_groups", None)
        return bool(other) and group_id in other

    def heartbeat(self, req: ShareHeartbeat) -> tuple[ShareHeartbeatResult, Awaitable[Any] | None]:
        """shareGroupHeartbeat; CoordinatorError with the error (and message) to answer."""
        self.heartbeats += 1
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return self._leave(req)
        records: list[Record] = []
        joining = req.member_epoch == 0
        group = self._group_for_heartbeat(req.group_id, joining)
        max_size = self.config.group_share_max_size
        if len(group.members) >= max_size and (not req.member_id or req.member_id not in group.members):
            raise CoordinatorError(
                ErrorCode.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum capacity of {max_size} members."
            )
        member = group.members.get(req.member_id)
        if member is None:
            if not joining:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}.")
            member = ShareMember(req.member_id)
        self._check_epoch(member, req.member_epoch)
        member = member.copy()  # replay updates the live member in place
        if joining and req.member_id not in group.members:
            log.info("member joined", group=group.group_id, member=req.member_id, protocol="share", client_id=req.client_id)

        updated = member.copy()
        if req.rack_id is not None:
            updated.rack_id = req.rack_id
        if req.subscribed_topic_names is not None:
            updated.subscribed_topic_names = frozenset(req.subscribed_topic_names)
        updated.client_id = req.client_id
        updated.client_host = req.client_host

        is_new = req.member_id not in group.members
        bump = False
        if is_new or not updated.same_metadata(member):
            records.append(self._metadata_record(group.group_id, updated))
            bump = updated.subscribed_topic_names != member.subscribed_topic_names
        group_epoch = group.group_epoch
        if group.assignment_epoch >= group_epoch:
            bump = bump or self._initialized_assignment_pending(group)
        members = dict(group.members)
        members[updated.member_id] = updated
        subscribed = group.subscribed_topic_names(members)
        homogeneous = self._homogeneous(subscribed, len(members))
        if bump or group.metadata_refresh:
            metadata_hash = self._metadata_hash(subscribed)
            if metadata_hash != group.metadata_hash:
                bump = True
            if bump:
                group_epoch += 1
                records.append(self._epoch_record(group.group_id, group_epoch, metadata_hash))
                self.epoch_bumps += 1
                log.info("group epoch bumped", group=group.group_id, group_epoch=group_epoch, protocol="share")
            group.metadata_refresh = False
        target_epoch, target = self._update_target(group, group_epoch, updated, members, homogeneous, records)
        reconciled = self._reconcile(group.group_id, updated, target_epoch, target, bump, records)
        init = self._maybe_initialize_request(group.group_id, group_epoch, set(subscribed), records)
        waiter = self.shard.write(records)
        self.sessions.schedule(group.group_id, reconciled.member_id)
        result = ShareHeartbeatResult(reconciled.member_id, reconciled.member_epoch, self.heartbeat_interval_ms(group.group_id))
        if joining or req.subscribed_topic_names is not None or reconciled.assigned != member.assigned:
            result.assignment = dict(reconciled.assigned)
        if init:
            asyncio.get_running_loop().call_soon(self._initialize, group.group_id, init)
        return result, waiter

    @staticmethod
    def _homogeneous(subscribed: dict[str, int], members: int) -> bool:
        """ModernGroup.subscriptionType: every subscribed topic is subscribed to by every member."""
        return all(count == members for count in subscribed.values())

    @staticmethod
    def _check_epoch(member: ShareMember, epoch: int) -> None:
        """throwIfShareGroupMemberEpochIsInvalid."""
        if epoch == 0:
            return
        if epoch > member.member_epoch:
            raise CoordinatorError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has a greater member epoch ({epoch}) than the one known by the group coordinator "
                f"({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch and epoch != member.previous_member_epoch:
            raise CoordinatorError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has a smaller member epoch ({epoch}) than the one known by the group coordinator "
                f"({member.member_epoch}), and it does not match the previous member epoch ({member.previous_member_epoch}). "
                "The member must abandon all its partitions and rejoin.",
            )

    def _initialized_assignment_pending(self, group: ShareGroup) -> bool:
        """Partitions initialized since the last target assignment are not assigned yet."""
        if not group.members:
            return False
        info = self.state_partitions.get(group.group_id)
        if info is None or not info.initialized:
            return False
        subscribed = group.subscribed_topic_names()
        if not subscribed:
            return False
        assigned: dict[uuid.UUID, set[int]] = {}
        for parts in group.target.values():
            for topic_id, ps in parts.items():
                assigned.setdefault(topic_id, set()).update(ps)
        for topic_id, init in info.initialized.items():
            if init.name not in subscribed:
                continue
            current = assigned.get(topic_id)
            if current is None or current != set(init.partitions):
                return True
        return False

    def _update_target(
        self,
        group: ShareGroup,
        group_epoch: int,
        member: ShareMember,
        members: dict[str, ShareMember],
        homogeneous: bool,
        records: list[Record],
    ) -> tuple[int, Partitions]:
        """maybeUpdateTargetAssignment: the simple assignor over the initialized partitions."""
        if group.assignment_epoch >= group_epoch:
            return group.assignment_epoch, group.target.get(member.member_id, {})
        # canComputeNextTargetAssignment: at most one new target per interval; a later heartbeat
        # (of any member) computes the one that waited.
        interval, last = self.assignment_interval_ms(group.group_id), group.assignment_timestamp
        if last and interval and self.shard.now_ms() < last + interval:
            return group.assignment_epoch, group.target.get(member.member_id, {})
        info = self.state_partitions.get(group.group_id)
        assignable = {t: i.partitions for t, i in info.initialized.items()} if info is not None else {}
        specs = {m_id: (self._topic_ids(m.subscribed_topic_names), group.target.get(m_id, {})) for m_id, m in members.items()}

        def num_partitions(topic_id: uuid.UUID) -> int:
            topic = self.topics.get_by_id(topic_id)
            return topic.partitions if topic is not None else -1

        try:
            result = assignor.assign(specs, homogeneous, assignable, num_partitions)
        except assignor.AssignorError as exc:
            raise CoordinatorError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment for epoch {group_epoch}: {exc}"
            ) from exc
        for m_id in members:
            new = result.get(m_id, {})
            if new != group.target.get(m_id):
                records.append(
                    (
                        key_of(srec.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, group.group_id, m_id),
                        srec.share_target_assignment_value(from_partitions(new)),
                    )
                )
        records.append(
            (
                key_of(srec.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, group.group_id),
                srec.share_target_assignment_metadata_value(group_epoch, self.shard.now_ms()),
            )
        )
        log.info(
            "target assignment computed", group=group.group_id, assignment_epoch=group_epoch, assignor=assignor.NAME, members=len(members)
        )
        return group_epoch, result.get(member.member_id, {})

    def _reconcile(
        self, group_id: str, member: ShareMember, target_epoch: int, target: Partitions, subscription_changed: bool, records: list[Record]
    ) -> ShareMember:
        """maybeReconcile with ShareGroupAssignmentBuilder: no revocation step, the target at once."""
        if not subscription_changed and member.reconciled_to(target_epoch):
            return member
        updated = member.copy()
        if target_epoch != member.member_epoch:
            updated.state = MemberState.STABLE
            updated.assigned = self._filter(target, member.subscribed_topic_names)
            updated.previous_member_epoch = member.member_epoch
            updated.member_epoch = target_epoch
        elif subscription_changed:
            updated.assigned = self._filter(target, member.subscribed_topic_names)
        if not updated.same(member):
            records.append(self._current_record(group_id, updated))
        return updated

    def _filter(self, parts: Partitions, subscribed: frozenset[str]) -> Partitions:
        ids = self._topic_ids(subscribed)
        return {t: ps for t, ps in parts.items() if t in ids}

    # -- share state initialization ---------------------------------------------------------------

    def _maybe_initialize_request(
        self, group_id: str, group_epoch: int, subscribed: set[str], records: list[Record]
    ) -> list[tuple[uuid.UUID, list[int], int, int]]:
        """maybeCreateInitializeShareGroupStateRequest: the subscribed partitions whose state is
        neither initialized nor being initialized (a stale initialization is retried after
        group.share.initialize.retry.interval.ms), marked initializing; (topic id, partitions,
        state epoch, start offset) to initialize."""
        if not subscribed:
            return []
        info = self.state_partitions.get(group_id)
        now = self.shard.now_ms()
        retry = max(self.config.group_share_initialize_retry_interval_ms, 5000)
        known: dict[uuid.UUID, set[int]] = {}
        if info is not None:
            for t, i in info.initialized.items():
                known.setdefault(t, set()).update(i.partitions)
            for t, i in info.initializing.items():
                if now - i.timestamp < retry:
                    known.setdefault(t, set()).update(i.partitions)
        change: dict[uuid.UUID, InitInfo] = {}
        for name in sorted(subscribed):
            topic = self.topics.get(name)
            if topic is None:
                continue
            have = known.get(topic.topic_id, set())
            if not have or len(have) < topic.partitions:
                wanted = frozenset(p for p in range(topic.partitions) if p not in have)
                if wanted:
                    change[topic.topic_id] = InitInfo(name, wanted, now)
        if not change:
            return []
        already_known: set[uuid.UUID] = set()
        if info is None:
            records.append(self._state_record(group_id, change, {}, {}))
        else:
            already_known = set(info.initialized) | set(info.initializing)
            initializing = _combine(info.initializing, change)
            deleting = {t: n for t, n in info.deleting.items() if t not in initializing}
            records.append(self._state_record(group_id, initializing, info.initialized, deleting))
        return [(t, sorted(i.partitions), group_epoch, 0 if t in already_known else -1) for t, i in change.items()]

    def _initialize(self, group_id: str, requests: list[tuple[uuid.UUID, list[int], int, int]]) -> None:
        """persisterInitialize, then initializeShareGroupState (or uninitializeShareGroupState on an error)."""
        persister = self.persister
        if persister is None:
            return
        done: dict[uuid.UUID, set[int]] = {}
        failed: dict[uuid.UUID, set[int]] = {}
        errors: set[str] = set()
        for topic_id, partitions, state_epoch, start_offset in requests:
            for p in partitions:
                result, _waiter = persister.initialize(group_id, topic_id, p, state_epoch, start_offset)
                (done if result.error is ErrorCode.NONE else failed).setdefault(topic_id, set()).add(p)
                if result.error is not ErrorCode.NONE:
                    errors.add(f"{result.error.name}: {result.message}")
        op = ShareGroupManager._mark_initialized if not failed else ShareGroupManager._mark_uninitialized
        # on any failure the whole request is uninitialized (persisterInitialize): per topic, the
        # partitions that failed and those that did not, so that the next heartbeat asks for all
        target = done if not failed else {t: done.get(t, set()) | failed.get(t, set()) for t in done.keys() | failed.keys()}
        try:
            self.shard.service.runtime.write(group_id, lambda shard, g, m: op(shard.share, g, m), group_id, target)
        except CoordinatorError as exc:
            log.warning("recording share state initialization failed", group=group_id, error=exc.code.name)
        if failed:
            log.warning(
                "share state initialization failed",
                group=group_id,
                partitions={str(t): sorted(ps) for t, ps in failed.items()},
                errors=sorted(errors),
            )
        else:
            log.info("share partitions initialized", group=group_id, partitions={self._name_of(t): sorted(ps) for t, ps in done.items()})

    def _mark_initialized(self, group_id: str, topic_partitions: dict[uuid.UUID, set[int]]) -> Any:
        from broker.runtime.result import CoordinatorResult

        if not topic_partitions or group_id not in self.groups:
            return CoordinatorResult([], None)
        now = self.shard.now_ms()
        enriched = {t: InitInfo(self._name_of(t), frozenset(ps), now) for t, ps in topic_partitions.items()}
        info = self.state_partitions.get(group_id)
        if info is None:
            return CoordinatorResult([self._state_record(group_id, {}, enriched, {})], None)
        initialized = _combine(info.initialized, enriched)
        initializing = {}
        for t, i in info.initializing.items():
            left = i.partitions - topic_partitions.get(t, set())
            if left:
                initializing[t] = InitInfo(i.name, left, i.timestamp)
        return CoordinatorResult([self._state_record(group_id, initializing, initialized, info.deleting)], None)

    def _mark_uninitialized(self, group_id: str, topic_partitions: dict[uuid.UUID, set[int]]) -> Any:
        from broker.runtime.result import CoordinatorResult

        info = self.state_partitions.get(group_id)
        if info is None or not info.initializing or not topic_partitions:
            return CoordinatorResult([], None)
        initializing = {}
        for t, i in info.initializing.items():
            left = i.partitions - topic_partitions.get(t, set())
            if left:
                initializing[t] = InitInfo(i.name, left, i.timestamp)
        return CoordinatorResult([self._state_record(group_id, initializing, info.initialized, info.deleting)], None)

    def _name_of(self, topic_id: uuid.UUID) -> str:
        topic = self.topics.get_by_id(topic_id)
        return topic.name if topic is not None else "<UNKNOWN>"

    def initialized_partitions(self, group_id: str) -> dict[uuid.UUID, frozenset[int]]:
        info = self.state_partitions.get(group_id)
        return {t: i.partitions for t, i in info.initialized.items()} if info is not None else {}

    # -- leaving and fencing ---------------------------------------------------------------------

    def _leave(self, req: ShareHeartbeat) -> tuple[ShareHeartbeatResult, Awaitable[Any] | None]:
        group = self.groups.get(req.group_id)
        if group is None:
            other = req.group_id in self.shard.groups or req.group_id in self.shard.consumer_groups or self._other_type(req.group_id)
            raise CoordinatorError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} {'is not a share group' if other else 'not found'}."
            )
        member = group.members.get(req.member_id)
        if member is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}.")
        log.info("member left", group=group.group_id, member=req.member_id, protocol="share")
        waiter = self.fence(group, member, "left the group")
        return ShareHeartbeatResult(req.member_id, req.member_epoch, 0), waiter

    def fence(self, group: ShareGroup, member: ShareMember, reason: str) -> Awaitable[Any] | None:
        """shareGroupFenceMember: the member's records tombstoned, the group epoch bumped."""
        g = group.group_id
        records: list[Record] = [
            (key_of(srec.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, g, member.member_id), None),
            (key_of(srec.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, g, member.member_id), None),
            (key_of(srec.SHARE_GROUP_MEMBER_METADATA_KEY, g, member.member_id), None),
        ]
        remaining = {m_id: m for m_id, m in group.members.items() if m_id != member.member_id}
        epoch = group.group_epoch + 1
        records.append(self._epoch_record(g, epoch, self._metadata_hash(group.subscribed_topic_names(remaining))))
        if len(group.members) == 1:
            records.append(
                (key_of(srec.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, g), srec.share_target_assignment_metadata_value(epoch, 0))
            )
        waiter = self.shard.write(records)
        self._cancel_timers(g, member.member_id)
        if reason != "left the group":
            self.members_fenced += 1
        self.epoch_bumps += 1
        log.info("group epoch bumped", group=g, group_epoch=epoch, reason=f"member {member.member_id} {reason}", protocol="share")
        return waiter

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self.sessions.cancel(group_id, member_id)

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        log.info("member fenced", group=group_id, member=member_id, reason="session timeout", protocol="share")
        self.fence(group, member, "session timed out")

    # -- topic events -------------------------------------------------------------------------

    def on_topic_event(self, name: str) -> None:
        """A subscribed topic was created, deleted or grew: the metadata hash is computed again."""
        for group in self.groups.values():
            if group.is_subscribed_to(name):
                group.metadata_refresh = True

    def on_topic_deleted(self, topic_id: uuid.UUID) -> None:
        """maybeCleanupShareGroupState: a deleted topic leaves every map of the groups' state partitions."""
        records: list[Record] = []
        for group_id, info in self.state_partitions.items():
            if topic_id not in info.initializing and topic_id not in info.initialized and topic_id not in info.deleting:
                continue
            records.append(
                self._state_record(
                    group_id,
                    {t: i for t, i in info.initializing.items() if t != topic_id},
                    {t: i for t, i in info.initialized.items() if t != topic_id},
                    {t: n for t, n in info.deleting.items() if t != topic_id},
                )
            )
        if records:
            try:
                self.shard.write(records)
            except CoordinatorError:
                pass

    # -- admin --------------------------------------------------------------------------------

    def delete_requests(self, group_id: str) -> tuple[ErrorCode, list[tuple[uuid.UUID, list[int]]], list[Record]]:
        """sharePartitionDeleteRequests for one group: (error, partitions whose state to delete,
        the records marking them deleting)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [], []
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP, [], []
        info = self.state_partitions.get(group_id)
        if info is None:
            return ErrorCode.NONE, [], []
        candidates = _combine(info.initialized, info.initializing)
        for t in info.deleting:
            topic = self.topics.get_by_id(t)
            if topic is not None and t not in candidates:
                candidates[t] = InitInfo(topic.name, frozenset(range(topic.partitions)), -1)
        records = [self._state_record(group_id, {}, {}, {t: i.name for t, i in candidates.items()})]
        return ErrorCode.NONE, [(t, sorted(i.partitions)) for t, i in candidates.items()], records

    def delete_group(self, group: ShareGroup, records: list[Record]) -> ErrorCode:
        """DeleteGroups for a share group: its share state is deleted first (the partitions marked
        deleting), then its records are tombstoned (appended to `records`)."""
        error, partitions, marker = self.delete_requests(group.group_id)
        if error is not ErrorCode.NONE:
            return error
        if partitions:
            persister = self.persister
            if persister is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            try:
                self.shard.write(marker)
            except CoordinatorError as exc:
                return exc.code
            for topic_id, parts in partitions:
                for p in parts:
                    result, _waiter = persister.delete(group.group_id, topic_id, p)
                    if result.error is not ErrorCode.NONE:
                        log.error("deleting a share group's state failed", group=group.group_id, partition=p, error=result.error.name)
                        return result.error
        records += self.group_tombstones(group)
        self.state_changed(group.group_id)
        log.info("group deleted", group=group.group_id, protocol="share")
        return ErrorCode.NONE

    def state_changed(self, group_id: str) -> None:
        for listener in getattr(self.shard.service, "share_state_changed", ()):
            listener(group_id)

    def alter_offsets(
        self, group_id: str, topics: list[tuple[str, list[tuple[int, int]]]]
    ) -> tuple[list[tuple[str, uuid.UUID | None, list[tuple[int, ErrorCode]]]], list[tuple[uuid.UUID, int, int]], list[Record], int]:
        """alterShareGroupOffsets: per topic (name, id, [(partition, error)]), the partitions to
        initialize at their new start offsets, the records, the group epoch (their state epoch)."""
        group = self.groups.get(group_id)
        if group is None:
            group = self._group_for_heartbeat(group_id, True)
        if group.members:
            raise CoordinatorError(ErrorCode.NON_EMPTY_GROUP, ErrorCode.NON_EMPTY_GROUP.message)
        now = self.shard.now_ms()
        out: list[tuple[str, uuid.UUID | None, list[tuple[int, ErrorCode]]]] = []
        initialize: list[tuple[uuid.UUID, int, int]] = []
        initializing: dict[uuid.UUID, InitInfo] = {}
        for name, partitions in topics:
            topic = self.topics.get(name)
            if topic is None:
                out.append((name, None, [(p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for p, _ in partitions]))
                continue
            results = []
            for p, start in partitions:
                if p < topic.partitions:
                    results.append((p, ErrorCode.NONE))
                    initialize.append((topic.topic_id, p, start))
                else:
                    results.append((p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            initializing[topic.topic_id] = InitInfo(name, frozenset(p for p, _ in partitions if p < topic.partitions), now)
            out.append((name, topic.topic_id, results))
        records: list[Record] = []
        if initializing:
            info = self.state_partitions.get(group_id)
            if info is None:
                records.append(self._state_record(group_id, initializing, {}, {}))
            else:
                merged = _combine(info.initializing, initializing)
                deleting = {t: n for t, n in info.deleting.items() if t not in merged}
                records.append(self._state_record(group_id, merged, info.initialized, deleting))
        return out, initialize, records, group.group_epoch

    def delete_offsets(
        self, group_id: str, topics: list[str]
    ) -> tuple[list[tuple[uuid.UUID, list[int]]], list[tuple[str, uuid.UUID | None, ErrorCode, str | None]], list[Record]]:
        """sharePartitionsEligibleForOffsetDeletion: (state to delete, per-topic errors, records)."""
        info = self.state_partitions.get(group_id)
        if info is None:
            return [], [], []
        initialized = dict(info.initialized)
        deleting = dict(info.deleting)
        to_delete: list[tuple[uuid.UUID, list[int]]] = []
        errors: list[tuple[str, uuid.UUID | None, ErrorCode, str | None]] = []
        for name in topics:
            topic = self.topics.get(name)
            if topic is None:
                errors.append((name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message))
                continue
            t = topic.topic_id
            if t in initialized:
                to_delete.append((t, sorted(initialized.pop(t).partitions)))
                deleting[t] = name
            elif t in deleting:
                to_delete.append((t, list(range(topic.partitions))))
            else:
                errors.append((name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."))
        records = [self._state_record(group_id, info.initializing, initialized, deleting)]
        return to_delete, errors, records

    def complete_delete_offsets(self, group_id: str, topics: dict[uuid.UUID, str]) -> Any:
        """completeDeleteShareGroupOffsets: the deleted topics leave the deleting map."""
        from broker.runtime.result import CoordinatorResult

        info = self.state_partitions.get(group_id)
        if info is None:
            return CoordinatorResult([], [])
        deleting = {t: n for t, n in info.deleting.items() if t not in topics}
        return CoordinatorResult([self._state_record(group_id, info.initializing, info.initialized, deleting)], list(topics.items()))


def _combine(initialized: dict[uuid.UUID, InitInfo], initializing: dict[uuid.UUID, InitInfo]) -> dict[uuid.UUID, InitInfo]:
    """combineInitMaps: the union, partitions merged, the second map's name and time winning."""
    out: dict[uuid.UUID, InitInfo] = {}
    for t in list(initialized) + [t for t in initializing if t not in initialized]:
        base = initialized.get(t)
        partitions = set(base.partitions) if base is not None else set()
        timestamp = base.timestamp if base is not None else -1
        name = base.name if base is not None else "UNKNOWN"
        extra = initializing.get(t)
        if extra is not None:
            partitions |= extra.partitions
            timestamp = extra.timestamp
            name = extra.name
        out[t] = InitInfo(name, frozenset(partitions), timestamp)
    return out
