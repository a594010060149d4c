"""KIP-848 consumer groups on one coordinator shard: ConsumerGroupHeartbeat (KH-2..KH-16),
target assignment (KA-1, KH-9), reconciliation (KR-1..KR-3), timers (KT-1..KT-3), topic events
and regex subscriptions, replay of records 3-8 (RL-5) and the admin views.

Every state change is a record: an operation computes its records from the current state, as
Kafka's GroupMetadataManager does, and `shard.write` appends them and replays them through
`replay()`, the function that rebuilds the groups at load. Timers and the metadata-refresh flag
are soft state, as in Kafka.

Where kaflet decides (Kafka is silent, or kaflet is a development broker):
* KH-2 is checked before the request is routed to its shard (Kafka 4.0's order). v0 follows the
  pinned rules (an empty MemberId at epoch 0 gets a server-generated id; SubscribedTopicNames
  must be non-empty); v1 follows KIP-1082 and Kafka 4.0 (MemberId required at every epoch;
  SubscribedTopicNames or SubscribedTopicRegex non-null when joining).
* Regex subscriptions are resolved synchronously (Kafka 4.0 resolves them in the background and
  bumps the epoch when done), with RE2 full-match semantics (RE2/J's `matches()`), over the
  non-internal topics; they are re-resolved when a topic is created or deleted.
* KA-1 ties between assignors named by equally many members go to the one named first.
* Subscription metadata carries no racks (kaflet is one broker): PartitionMetadata is empty.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from broker.coordinator.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
    Partitions,
    from_partitions,
    new_member_id,
)
from broker.coordinator.consumer.lag import GROUP_CONFIG as LAG_CONFIG
from broker.coordinator.consumer.lag import MODES as LAG_MODES
from broker.coordinator.consumer.lag import lag_function
from broker.coordinator.consumer.migration import Migration
from broker.coordinator.consumer.reconcile import next_assignment
from broker.runtime.errors import CoordinatorError
from protocol.errors import ErrorCode
from storage import offsets_records as orec

if TYPE_CHECKING:
    from broker.coordinator.shard import GroupShard

log = structlog.get_logger("kaflet.coordinator")

Record = tuple[bytes, bytes | None]
Owned = list[tuple[uuid.UUID, list[int]]] | None


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    topic_partitions: Owned
    client_id: str = ""
    client_host: str = ""
    api_version: int = 0


@dataclass
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


def _session_key(group_id: str, member_id: str) -> str:
    return f"consumer-session-{group_id}-{member_id}"


def _rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance-{group_id}-{member_id}"


def key_of(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    return orec.consumer_group_key(kind, group_id, member_id)


class ConsumerGroupManager:
    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard
        self.timers = shard.timers
        self.config = shard.config
        self.stats = shard.service.stats
        self.migration = Migration(self)
        self._session_deadlines: dict[tuple[str, str], float] = {}  # KH-12: (group, member) -> loop time

    @property
    def groups(self) -> dict[str, ConsumerGroup]:
        return self.shard.consumer_groups

    @property
    def topics(self) -> Any:
        return self.shard.service.topics

    # -- configuration --------------------------------------------------------------------

    def _group_config(self, group_id: str, name: str) -> int | None:
        """Per-group dynamic configs (`consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`,
        set by IncrementalAlterConfigs on the GROUP resource: broker/config/group_configs.py);
        None when the group has none, and the broker default applies (KH-11, KH-12)."""
        configs = getattr(self.shard.service, "group_configs", None)
        if configs is None:
            return None
        value = configs.get(group_id, name)
        return int(value) if value is not None else None

    def session_timeout_ms(self, group_id: str) -> int:
        value = self._group_config(group_id, "consumer.session.timeout.ms")
        return value if value is not None else self.config.group_consumer_session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        value = self._group_config(group_id, "consumer.heartbeat.interval.ms")
        return value if value is not None else self.config.group_consumer_heartbeat_interval_ms

    @property
    def default_assignor(self) -> str:
        return self.config.group_consumer_assignors.split(",")[0].strip()

    # -- replay (RL-5) ----------------------------------------------------------------------

    def _group_for_replay(self, group_id: str, create: bool) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        if group is None and create:
            classic = self.shard.groups.get(group_id)
            if classic is not None:
                # RL-5: a simple (offsets-only) or empty classic group is replaced.
                del self.shard.groups[group_id]
            group = self.groups[group_id] = ConsumerGroup(group_id)
            group.metadata_refresh = True
            self._resolve_regexes(group)
        return group

    def replay(self, kind: int, key: bytes, value: bytes | None) -> None:
        _, group_id, member_id = orec.parse_consumer_group_key(key)
        group = self._group_for_replay(group_id, value is not None)
        if group is None:
            return  # a tombstone for an unknown group is ignored (RC-2)
        if kind == orec.CONSUMER_GROUP_METADATA_KEY:
            if value is None:
                if not group.members:
                    del self.groups[group_id]
                return
            group.group_epoch = orec.parse_consumer_group_epoch_value(value)
        elif kind == orec.CONSUMER_GROUP_PARTITION_METADATA_KEY:
            topics = orec.parse_consumer_group_partition_metadata_value(value) if value is not None else []
            group.subscription_metadata = {t.name: t for t in topics}
        elif kind == orec.CONSUMER_GROUP_MEMBER_METADATA_KEY:
            assert member_id is not None
            group.apply_member_metadata(member_id, orec.parse_consumer_member_metadata_value(value) if value is not None else None)
            if value is not None:
                self._resolve_regexes(group)
        elif kind == orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY:
            group.assignment_epoch = orec.parse_consumer_group_epoch_value(value) if value is not None else -1
        elif kind == orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY:
            assert member_id is not None
            group.apply_target(member_id, orec.parse_consumer_target_assignment_value(value) if value is not None else None)
        elif kind == orec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY:
            assert member_id is not None
            group.apply_current_assignment(member_id, orec.parse_consumer_current_assignment_value(value) if value is not None else None)

    def on_loaded(self) -> None:
        """KT-3: session timers for every member, rebalance timers for those revoking."""
        self._session_deadlines.clear()
        for group in self.groups.values():
            group.metadata_refresh = True
            self._resolve_regexes(group)
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id, member.classic.session_timeout_ms if member.classic else None)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance(group.group_id, member.member_id, member.member_epoch, member.rebalance_timeout_ms)
            if group.members:
                log.info("loaded consumer group", group=group.group_id, members=len(group.members), group_epoch=group.group_epoch)

    # -- records ------------------------------------------------------------------------------

    @staticmethod
    def _metadata_record(group_id: str, member: ConsumerMember) -> Record:
        return key_of(orec.CONSUMER_GROUP_MEMBER_METADATA_KEY, group_id, member.member_id), orec.consumer_member_metadata_value(
            member.metadata_value()
        )

    @staticmethod
    def _current_record(group_id: str, member: ConsumerMember) -> Record:
        return key_of(
            orec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, member.member_id
        ), orec.consumer_current_assignment_value(member.assignment_value())

    @staticmethod
    def _target_record(group_id: str, member_id: str, parts: Partitions) -> Record:
        return key_of(orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id), orec.consumer_target_assignment_value(
            from_partitions(parts)
        )

    @staticmethod
    def _epoch_record(group_id: str, epoch: int) -> Record:
        return key_of(orec.CONSUMER_GROUP_METADATA_KEY, group_id), orec.consumer_group_epoch_value(epoch)

    @staticmethod
    def _subscription_record(group_id: str, metadata: dict[str, orec.TopicMetadata]) -> Record:
        topics = sorted(metadata.values(), key=lambda t: t.name)
        return key_of(orec.CONSUMER_GROUP_PARTITION_METADATA_KEY, group_id), orec.consumer_group_partition_metadata_value(topics)

    @staticmethod
    def _remove_member_records(group_id: str, member_id: str) -> list[Record]:
        """RF-5: current assignment, target assignment, metadata tombstones, in that order."""
        return [
            (key_of(orec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, member_id), None),
            (key_of(orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id), None),
            (key_of(orec.CONSUMER_GROUP_MEMBER_METADATA_KEY, group_id, member_id), None),
        ]

    def group_tombstones(self, group: ConsumerGroup) -> list[Record]:
        """RF-5: the whole group, in Kafka's order."""
        gid = group.group_id
        out: list[Record] = []
        out += [(key_of(orec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, gid, m), None) for m in group.members]
        out += [(key_of(orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, gid, m), None) for m in group.target]
        out.append((key_of(orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, gid), None))
        out += [(key_of(orec.CONSUMER_GROUP_MEMBER_METADATA_KEY, gid, m), None) for m in group.members]
        out.append((key_of(orec.CONSUMER_GROUP_PARTITION_METADATA_KEY, gid), None))
        out.append((key_of(orec.CONSUMER_GROUP_METADATA_KEY, gid), None))
        return out

    # -- subscriptions ----------------------------------------------------------------------

    def _resolve_regexes(self, group: ConsumerGroup) -> bool:
        """Resolve every member's regex against the current topics; True if any result changed."""
        regexes = {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex is not None}
        if not regexes and not group.regex_topics:
            return False
        resolved = {}
        for regex in regexes:
            resolved[regex] = resolve_regex(regex, self._topic_names())
        changed = resolved != group.regex_topics
        group.regex_topics = resolved
        return changed

    def _topic_names(self) -> list[str]:
        return [t.name for t in self.topics.topics.values() if not t.internal]

    def _subscription_metadata(self, group: ConsumerGroup, members: dict[str, ConsumerMember]) -> dict[str, orec.TopicMetadata]:
        """KH-8: id, name and partition count of every subscribed topic that exists."""
        names: set[str] = set()
        for m in members.values():
            names |= group.subscribed_names(m)
        out = {}
        for name in sorted(names):
            topic = self.topics.get(name)
            if topic is not None:
                out[name] = orec.TopicMetadata(topic.topic_id, name, topic.partitions)
        return out

    @staticmethod
    def _members_view(group: ConsumerGroup, updated: ConsumerMember | None, removed: str | None) -> dict[str, ConsumerMember]:
        """The group's members as they will be once this operation's records are applied."""
        members = dict(group.members)
        if removed is not None:
            members.pop(removed, None)
        if updated is not None:
            members[updated.member_id] = updated
        return members

    def on_topic_event(self, name: str, created_or_deleted: bool) -> None:
        """A topic was created, deleted or grew: groups subscribed to it refresh their
        subscription metadata at their next heartbeat (KH-8); regexes are re-resolved."""
        for group in self.groups.values():
            changed = self._resolve_regexes(group) if created_or_deleted else False
            if changed or name in group.subscription_metadata or group.is_subscribed_to(name):
                group.metadata_refresh = True

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest) -> tuple[HeartbeatResult, Awaitable[Any] | None]:
        """KH-3..KH-16. Raises CoordinatorError with the error (and message) to answer."""
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req)
        steady = self._steady(req)
        if steady is not None:
            return steady, None
        records: list[Record] = []
        joining = req.member_epoch == 0
        group = self._get_or_create_group(req.group_id, joining, records)
        max_size = self.config.group_consumer_max_size
        if len(group.members) >= max_size and (not req.member_id or req.member_id not in group.members):
            raise CoordinatorError(
                ErrorCode.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of {max_size} members."
            )
        member_id = req.member_id or new_member_id()
        replaced: str | None = None
        if req.instance_id is None:
            member = self._dynamic_member(group, member_id, req, joining)
        else:
            member, replaced = self._static_member(group, member_id, req, joining, records)
        if joining and member_id not in group.members and replaced is None:
            log.info("member joined", group=group.group_id, member=member_id, instance_id=req.instance_id, protocol="consumer")

        before = member.copy()  # replay updates the live member in place
        updated = member.copy()
        if req.instance_id is not None:
            updated.instance_id = req.instance_id
        if req.rack_id is not None:
            updated.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.server_assignor is not None:
            updated.server_assignor = req.server_assignor
        if req.subscribed_topic_names is not None:
            updated.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
        if req.subscribed_topic_regex is not None:
            # "" is no regex (Kafka's member default): it drops a regex, and is no change otherwise.
            updated.subscribed_topic_regex = req.subscribed_topic_regex or None
        updated.client_id = req.client_id
        updated.client_host = req.client_host
        updated.classic = None

        bump = False
        is_new = updated.member_id not in group.members or replaced is not None
        if is_new or not updated.same_metadata(member):
            records.append(self._metadata_record(group.group_id, updated))
            bump = (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            )
        reconciled, waiter, group = self._update_member(group, before, updated, replaced, is_new, bump, req.topic_partitions, records)

        full = joining or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None and req.topic_partitions is not None)
        result = HeartbeatResult(reconciled.member_id, reconciled.member_epoch, self.heartbeat_interval_ms(group.group_id))
        if full or reconciled.assigned != before.assigned:
            result.assignment = reconciled.assigned
        return result, waiter

    def steady(self, group_id: str, member_id: str, epoch: int, client_id: str, client_host: str) -> HeartbeatResult | None:
        """`_steady` for a request the API layer has already seen to carry no optional field."""
        group = self.groups.get(group_id)
        if group is None or group.metadata_refresh or group.group_epoch != group.assignment_epoch:
            return None
        member = group.members.get(member_id)
        if (
            member is None
            or member.member_epoch != epoch
            or epoch != group.assignment_epoch
            or member.classic is not None
            or member.state is not MemberState.STABLE
            or member.client_id != client_id
            or member.client_host != client_host
        ):
            return None
        self._schedule_session(group_id, member_id)
        return HeartbeatResult(member_id, epoch, self.heartbeat_interval_ms(group_id))

    def _steady(self, req: HeartbeatRequest) -> HeartbeatResult | None:
        """The heartbeat of a reconciled member that changes nothing, answered without building
        anything: what the full path would do (no record, no epoch bump, nothing to reconcile, no
        assignment in the answer since the request is not full), minus the copies."""
        if (
            req.member_epoch <= 0
            or req.instance_id is not None
            or req.rack_id is not None
            or req.rebalance_timeout_ms != -1
            or req.subscribed_topic_names is not None
            or req.subscribed_topic_regex is not None
            or req.server_assignor is not None
        ):
            return None
        group = self.groups.get(req.group_id)
        if group is None or group.metadata_refresh or group.group_epoch != group.assignment_epoch:
            return None
        member = group.members.get(req.member_id)
        if (
            member is None
            or member.member_epoch != req.member_epoch
            or member.classic is not None
            or member.state is not MemberState.STABLE
            or member.member_epoch != group.assignment_epoch
            or member.client_id != req.client_id
            or member.client_host != req.client_host
        ):
            return None
        self._schedule_session(req.group_id, req.member_id)
        return HeartbeatResult(req.member_id, req.member_epoch, self.heartbeat_interval_ms(req.group_id))

    def _update_member(
        self,
        group: ConsumerGroup,
        before: ConsumerMember,
        updated: ConsumerMember,
        replaced: str | None,
        is_new: bool,
        bump: bool,
        owned: Owned,
        records: list[Record],
    ) -> tuple[ConsumerMember, Awaitable[Any] | None, ConsumerGroup]:
        """KH-8..KH-10 for a member whose new metadata is `updated` (from a ConsumerGroupHeartbeat
        or, KM-3, a classic JoinGroup): subscription metadata and group epoch, target assignment,
        reconciliation; the records are written and the member's timers armed."""
        regex_changed = False
        if updated.subscribed_topic_regex is not None and updated.subscribed_topic_regex not in group.regex_topics:
            group.regex_topics[updated.subscribed_topic_regex] = resolve_regex(updated.subscribed_topic_regex, self._topic_names())
            regex_changed = True

        group_epoch = group.group_epoch
        subscription = group.subscription_metadata
        refreshed = False
        if bump or regex_changed or group.metadata_refresh:
            members = self._members_view(group, updated, replaced)
            subscription = self._subscription_metadata(group, members)
            reason = "member subscription changed" if bump else "subscribed topics changed"
            if subscription != group.subscription_metadata:
                bump = True
                records.append(self._subscription_record(group.group_id, subscription))
            if bump:
                group_epoch += 1
                records.append(self._epoch_record(group.group_id, group_epoch))
                log.info("group epoch bumped", group=group.group_id, group_epoch=group_epoch, member=updated.member_id, reason=reason)
                self.stats.consumer_epoch_bumps += 1
            refreshed = True

        if group_epoch > group.assignment_epoch:
            target = self._update_target(group, group_epoch, updated, replaced, subscription, records)
            target_epoch = group_epoch
        else:
            target_epoch = group.assignment_epoch
            target = group.target.get(updated.member_id)
            if target is None and replaced is not None:
                target = group.target.get(replaced)
            target = target or {}

        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            reconciled = next_assignment(updated, target_epoch, target, group.current_partition_epoch, owned)
            if reconciled is not updated and (is_new or not reconciled.same_assignment(updated)):
                records.append(self._current_record(group.group_id, reconciled))

        was_stable = group.state == ConsumerGroupState.STABLE
        waiter = self.shard.write(records) if records else None
        # A new group exists once its records are replayed: from here on, the registered object.
        group = self.groups.get(group.group_id, group)
        if refreshed:
            group.metadata_refresh = False
        self._after_write(group, before, reconciled, group_epoch, was_stable)
        self._schedule_session(group.group_id, reconciled.member_id, reconciled.classic.session_timeout_ms if reconciled.classic else None)
        return reconciled, waiter, group

    def _after_write(self, group: ConsumerGroup, before: ConsumerMember, after: ConsumerMember, group_epoch: int, was_stable: bool) -> None:
        gid = group.group_id
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            if (
                before.state is not MemberState.UNREVOKED_PARTITIONS
                or before.member_epoch != after.member_epoch
                or not before.same_assignment(after)
            ):
                self._schedule_rebalance(gid, after.member_id, after.member_epoch, after.rebalance_timeout_ms)
        else:
            self.timers.cancel(_rebalance_key(gid, after.member_id))
        if group.state == ConsumerGroupState.STABLE and not was_stable:
            duration = None if group.last_stable_ms is None else round((time.monotonic() * 1000) - group.last_stable_ms, 1)
            log.info(
                "reconciliation finished",
                group=gid,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                members=len(group.members),
                duration_ms=duration,
            )
            self.stats.consumer_reconciliations += 1
        elif was_stable and group.state != ConsumerGroupState.STABLE:
            group.last_stable_ms = time.monotonic() * 1000

    def _get_or_create_group(self, group_id: str, create: bool, records: list[Record]) -> ConsumerGroup:
        """KH-3."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.shard.streams_groups:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        classic = self.shard.groups.get(group_id)
        if classic is None:
            if group_id in self.shard.share_groups:  # KIP-932: ids are unique across group types
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            if not create:
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id)
        if create and classic.is_empty:
            # An empty classic group is tombstoned and replaced (its offsets stay).
            log.info("empty classic group replaced by a consumer group", group=group_id)
            records.append((orec.group_metadata_key(group_id), None))
            return ConsumerGroup(group_id)
        if create and self.migration.can_upgrade(classic):
            return self.migration.upgrade(classic, records)  # KM-2
        raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int, owned: Owned) -> None:
        """KH-7."""
        if epoch > member.member_epoch:
            raise CoordinatorError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by the group coordinator "
                f"({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch:
            subset = owned is not None and all(p in member.assigned.get(topic_id, frozenset()) for topic_id, ps in owned for p in ps)
            if epoch != member.previous_member_epoch or not subset:
                raise CoordinatorError(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group coordinator "
                    f"({member.member_epoch}). The member must abandon all its partitions and rejoin.",
                )

    def _dynamic_member(self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest, create: bool) -> ConsumerMember:
        """KH-6, KH-7."""
        member = group.members.get(member_id)
        if member is None:
            if not create:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
            member = ConsumerMember(member_id)
        self._check_epoch(member, req.member_epoch, req.topic_partitions)
        return member

    def _static_member(
        self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest, create: bool, records: list[Record]
    ) -> tuple[ConsumerMember, str | None]:
        """KH-16: (the member, the id of the static member it replaces or None)."""
        existing = group.static_member(req.instance_id)
        if create:
            if existing is None:
                member = group.members.get(member_id)
                if member is None:
                    member = ConsumerMember(member_id)
                self._check_epoch(member, req.member_epoch, req.topic_partitions)
                return member, None
            if existing.member_id == member_id:
                self._check_epoch(existing, req.member_epoch, req.topic_partitions)
                return existing, None
            if not existing.uses_classic_protocol and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise CoordinatorError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {existing.member_id} with instance id {req.instance_id} cannot be replaced because it has not "
                    "left the group.",
                )
            replacement = existing.copy(member_id=member_id, member_epoch=0, previous_member_epoch=0)
            records += self._remove_member_records(group.group_id, existing.member_id)
            records.append(self._metadata_record(group.group_id, replacement))
            records.append(self._target_record(group.group_id, member_id, group.target.get(existing.member_id, {})))
            records.append(self._current_record(group.group_id, replacement))
            self._cancel_timers(group.group_id, existing.member_id)
            log.info(
                "static member replaced",
                group=group.group_id,
                instance_id=req.instance_id,
                old_member=existing.member_id,
                new_member=member_id,
                protocol="consumer",
            )
            return replacement, existing.member_id
        if existing is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise CoordinatorError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {req.instance_id} was fenced by member {existing.member_id}.",
            )
        self._check_epoch(existing, req.member_epoch, req.topic_partitions)
        return existing, None

    def _update_target(
        self,
        group: ConsumerGroup,
        group_epoch: int,
        updated: ConsumerMember | None,
        replaced: str | None,
        subscription: dict[str, orec.TopicMetadata],
        records: list[Record],
    ) -> Partitions:
        """KH-9, KA-1, KA-2: a new target for every member; records for those whose target changed."""
        from broker.coordinator import assignors

        members = self._members_view(group, updated, replaced)
        name = self._preferred_assignor(members)
        by_id = {t.topic_id: t.name for t in subscription.values()}
        specs = {}
        for mid, m in members.items():
            current = group.target.get(mid)
            if current is None and replaced is not None and mid == (updated.member_id if updated else None):
                current = group.target.get(replaced)
            current_by_name = {by_id[t]: ps for t, ps in (current or {}).items() if t in by_id}
            topics = frozenset(n for n in group.subscribed_names(m) if n in subscription)
            specs[mid] = assignors.MemberSpec(mid, m.instance_id, m.rack_id, topics, current_by_name)
        spec = assignors.GroupSpec(
            group.group_id, specs, {n: t.partitions for n, t in subscription.items()}, self._lag_function(group.group_id, subscription)
        )
        started = time.monotonic()
        try:
            result = assignors.get(name).assign(spec)
        except Exception as exc:
            log.error("target assignment failed", group=group.group_id, assignor=name, group_epoch=group_epoch, error=str(exc))
            raise CoordinatorError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment for epoch {group_epoch}: {exc}"
            ) from exc
        new_targets: dict[str, Partitions] = {}
        for mid in members:
            parts: Partitions = {}
            for topic, ps in (result.get(mid) or {}).items():
                meta = subscription.get(topic)
                if meta is not None and ps:
                    parts[meta.topic_id] = frozenset(ps)
            new_targets[mid] = parts
            if group.target.get(mid) != parts:
                records.append(self._target_record(group.group_id, mid, parts))
        records.append(
            (key_of(orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, group.group_id), orec.consumer_group_epoch_value(group_epoch))
        )
        elapsed_ms = round((time.monotonic() - started) * 1000, 2)
        member_lags = assignors.base.member_lags(result, spec.lag)
        log.info(
            "target assignment computed",
            group=group.group_id,
            group_epoch=group_epoch,
            assignor=name,
            members=len(members),
            ms=elapsed_ms,
            lag_spread=max(member_lags.values()) - min(member_lags.values()) if member_lags else 0,
            lag_max=max(member_lags.values(), default=0),
            lag_total=sum(member_lags.values()),
        )
        return new_targets.get(updated.member_id, {}) if updated is not None else {}

    def _preferred_assignor(self, members: dict[str, ConsumerMember]) -> str:
        counts: dict[str, int] = {}
        for m in members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return self.default_assignor
        return max(counts, key=lambda n: counts[n])

    def _lag_function(self, group_id: str, subscription: dict[str, orec.TopicMetadata]) -> Any:
        """Lag of (topic, partition) for this group (issue 13, broker/coordinator/consumer/lag.py)."""
        return lag_function(self.shard.service.logs, self.shard.offsets.of_group(group_id), self.lag_aware_uncommitted(group_id))

    def lag_aware_uncommitted(self, group_id: str) -> str:
        """`lag.aware.uncommitted` of the group (a group config), else the broker's `--lag-aware-uncommitted`."""
        configs = getattr(self.shard.service, "group_configs", None)
        value = configs.get(group_id, LAG_CONFIG) if configs is not None else None
        return str(value) if value in LAG_MODES else getattr(self.config, "lag_aware_uncommitted", "earliest")

    def assigned_lags(self, group: ConsumerGroup) -> dict[str, int]:
        """Member id -> total lag of the partitions it is assigned now (describe, metrics)."""
        lag = self._lag_function(group.group_id, group.subscription_metadata)
        topics = self.topics
        out: dict[str, int] = {}
        for mid, member in group.members.items():
            total = 0
            for topic_id, ps in member.assigned.items():
                topic = topics.get_by_id(topic_id)
                if topic is not None:
                    total += sum(lag(topic.name, p) for p in ps)
            out[mid] = total
        return out

    def request_rebalance(self, group_id: str, reason: str) -> Awaitable[Any] | None:
        """Bump the group epoch with no membership change (issue 13's `kaflet groups rebalance`): the next
        heartbeat computes a new target assignment, as after a subscription change (KH-8, KH-9)."""
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        epoch = group.group_epoch + 1
        waiter = self.shard.write([self._epoch_record(group_id, epoch)])
        log.info("group epoch bumped", group=group_id, group_epoch=epoch, reason=reason)
        return waiter

    # -- offsets (KO-1, OF-8) ------------------------------------------------------------------

    @staticmethod
    def validate_offset_commit(
        group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int, transactional: bool, instance_id: str | None = None
    ) -> ErrorCode:
        return validate_offset_commit(group, member_id, member_epoch, api_version, transactional, instance_id)

    @staticmethod
    def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
        return validate_offset_fetch(group, member_id, member_epoch)

    # -- leaving and fencing ----------------------------------------------------------------------

    def _leave(self, req: HeartbeatRequest) -> tuple[HeartbeatResult, Awaitable[Any] | None]:
        """KH-14, KH-15."""
        group = self.groups.get(req.group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}.")
            log.info("member left", group=group.group_id, member=member.member_id, protocol="consumer")
            return HeartbeatResult(req.member_id, req.member_epoch), self.fence(group, member, "left the group")
        member = group.static_member(req.instance_id)
        if member is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise CoordinatorError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member {member.member_id}.",
            )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            leaving = member.copy(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
            log.info("static member left temporarily", group=group.group_id, member=member.member_id, instance_id=req.instance_id)
            waiter = self.shard.write([self._current_record(group.group_id, leaving)])
            self.timers.cancel(_rebalance_key(group.group_id, member.member_id))
            return HeartbeatResult(member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH), waiter
        log.info("static member left", group=group.group_id, member=member.member_id, instance_id=req.instance_id)
        return HeartbeatResult(req.member_id, req.member_epoch), self.fence(group, member, "left the group")

    def fence(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> Awaitable[Any] | None:
        """KH-14's effects: the member's records tombstoned, subscription metadata recomputed,
        the group epoch bumped, the member's timers cancelled; or, when only classic members
        would remain, the downgrade to a classic group (KM-4)."""
        if self.migration.should_downgrade(group, member.member_id):
            self.stats.consumer_members_fenced += 1 if reason != "left the group" else 0
            return self.migration.downgrade(group, member.member_id)
        records = self._remove_member_records(group.group_id, member.member_id)
        members = self._members_view(group, None, member.member_id)
        subscription = self._subscription_metadata(group, members)
        if subscription != group.subscription_metadata:
            records.append(self._subscription_record(group.group_id, subscription))
        epoch = group.group_epoch + 1
        records.append(self._epoch_record(group.group_id, epoch))
        if len(group.members) == 1:
            # The last member gone: as Kafka 4.4, the (empty) target assignment is at the new
            # epoch at once, so that an empty group is not left "assigning".
            records.append(
                (key_of(orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, group.group_id), orec.consumer_group_epoch_value(epoch))
            )
        waiter = self.shard.write(records)
        self._cancel_timers(group.group_id, member.member_id)
        self.stats.consumer_members_fenced += 1 if reason != "left the group" else 0
        self.stats.consumer_epoch_bumps += 1
        log.info(
            "group epoch bumped",
            group=group.group_id,
            group_epoch=group.group_epoch,
            reason=f"member {member.member_id} {reason}",
        )
        return waiter

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timers.cancel(_session_key(group_id, member_id))
        self._session_deadlines.pop((group_id, member_id), None)
        self.timers.cancel(_rebalance_key(group_id, member_id))
        self.timers.cancel(f"consumer-join-{group_id}-{member_id}")  # KM-3's join and sync timers
        self.timers.cancel(f"consumer-sync-{group_id}-{member_id}")

    # -- timers (KT-1..KT-3) ------------------------------------------------------------------------

    def _schedule_session(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
        """KH-12 (KM-3: a classic member's own session timeout)."""
        timeout = self.session_timeout_ms(group_id) if timeout_ms is None else timeout_ms
        # Every heartbeat moves the deadline; the timer is only re-armed when it fires early (or
        # must fire sooner), so a steady heartbeat costs a dict store, not a timer cancel + create.
        key = (group_id, member_id)
        deadline = asyncio.get_running_loop().time() + timeout / 1000
        self._session_deadlines[key] = deadline
        timer = _session_key(group_id, member_id)
        armed = self.timers.deadline(timer)
        if armed is None or armed > deadline:
            self.timers.schedule(timer, timeout, lambda: self._session_check(group_id, member_id))

    def _session_check(self, group_id: str, member_id: str) -> None:
        deadline = self._session_deadlines.get((group_id, member_id))
        if deadline is None:
            return
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining > 0:
            self.timers.schedule(_session_key(group_id, member_id), remaining * 1000, lambda: self._session_check(group_id, member_id))
            return
        del self._session_deadlines[(group_id, member_id)]
        self._session_expired(group_id, member_id)

    def _session_expired(self, group_id: str, member_id: str) -> None:
        """KT-1."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        log.info("member fenced", group=group_id, member=member_id, instance_id=member.instance_id, reason="session timeout")
        self.fence(group, member, "session timed out")

    def _schedule_rebalance(self, group_id: str, member_id: str, epoch: int, timeout_ms: int) -> None:
        self.timers.schedule(
            _rebalance_key(group_id, member_id), max(timeout_ms, 0), lambda: self._rebalance_expired(group_id, member_id, epoch)
        )

    def _rebalance_expired(self, group_id: str, member_id: str, epoch: int) -> None:
        """KT-2."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.member_epoch != epoch:
            return
        log.info("member fenced", group=group_id, member=member_id, reason="did not revoke within its rebalance timeout", epoch=epoch)
        self.fence(group, member, "did not revoke its partitions within the rebalance timeout")


def resolve_regex(regex: str, topics: list[str]) -> frozenset[str]:
    """The topics `regex` matches as a whole (RE2/J `matcher(topic).matches()`)."""
    pattern = compile_regex(regex)
    return frozenset(t for t in topics if pattern.fullmatch(t))


_COMPILED: dict[str, Any] = {}


def compile_regex(regex: str) -> Any:
    """RE2 syntax (Kafka uses RE2/J); raises ValueError for an invalid expression."""
    compiled = _COMPILED.get(regex)
    if compiled is None:
        import re2

        try:
            compiled = re2.compile(regex)
        except re2.error as exc:
            raise ValueError(str(exc)) from exc
        if len(_COMPILED) > 1000:
            _COMPILED.clear()
        _COMPILED[regex] = compiled
    return compiled


def _member_epoch_error(received: int, member: ConsumerMember) -> ErrorCode:
    if received != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def validate_offset_commit(
    group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int, transactional: bool, instance_id: str | None = None
) -> ErrorCode:
    """KO-1: admin commits (epoch < 0) only into an empty group; members commit at their epoch,
    with OffsetCommit v9+ when they use the consumer protocol. A transactional commit (TX-2) may
    come without member (generation -1, no member or instance id) into any group, as in Kafka
    4.4; its stale epoch is ILLEGAL_GENERATION, TxnOffsetCommit up to v5 knowing no other."""
    if member_epoch < 0 and not group.members:
        return ErrorCode.NONE
    if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if not transactional and not member.uses_classic_protocol and api_version < 9:
        return ErrorCode.UNSUPPORTED_VERSION
    error = _member_epoch_error(member_epoch, member)
    return ErrorCode.ILLEGAL_GENERATION if transactional and error is ErrorCode.STALE_MEMBER_EPOCH else error


def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
    """OF-8."""
    if member_id is None and member_epoch < 0:
        return ErrorCode.NONE
    member = group.members.get(member_id) if member_id is not None else None
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return _member_epoch_error(member_epoch, member)
