"""Classic <-> consumer group migration (spec 6.10, KM-1..KM-4), as Kafka's GroupMetadataManager:

* KM-2, online upgrade: the first ConsumerGroupHeartbeat (epoch 0) on a non-empty classic group
  of protocol type `consumer` converts it: parked JoinGroup/SyncGroup requests are answered
  REBALANCE_IN_PROGRESS, the classic group is tombstoned, and each classic member becomes a
  consumer-group member that uses the classic protocol, at the group's generation, STABLE, with
  its last classic assignment as both its current and its target assignment.
* KM-3: JoinGroup, SyncGroup, Heartbeat and LeaveGroup of classic members are served by the
  consumer group: the assignment is the server's (JoinGroup names no leader and no members;
  SyncGroup hands the member its assigned partitions as a ConsumerProtocolAssignment); Heartbeat
  answers REBALANCE_IN_PROGRESS when the member must rejoin to make progress. Join and sync
  timers (the member's rebalance timeout) fence a member that does not come back.
* KM-4, online downgrade: when the last member that uses the consumer protocol leaves or is
  fenced and only classic members remain, the consumer group is tombstoned and a Stable classic
  group (generation = group epoch, assignments = target assignments) is written, then a
  rebalance is prepared.

`--group-consumer-migration-policy` (KM-1): bidirectional (default), upgrade, downgrade,
disabled. Converting an empty group is always allowed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import structlog

from broker.coordinator.classic import ClassicGroup, ClassicMember, GroupState, JoinResult, SyncResult
from broker.coordinator.consumer.embedded import (
    EmbeddedProtocolError,
    parse_assignment,
    parse_subscription,
    serialize_assignment,
    subscription_version,
)
from broker.coordinator.consumer.group import ConsumerGroup, ConsumerMember, MemberState, new_member_id
from broker.coordinator.consumer.regex import RegexStatus
from broker.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from broker.runtime.errors import CoordinatorError
from protocol.errors import ErrorCode
from storage import offsets_records as orec

if TYPE_CHECKING:
    from broker.coordinator.consumer.manager import ConsumerGroupManager
    from broker.coordinator.rebalance import JoinRequest, SyncRequest

log = structlog.get_logger("kaflet.coordinator")


def _join_key(group_id: str, member_id: str) -> str:
    return f"consumer-join-{group_id}-{member_id}"


def _sync_key(group_id: str, member_id: str) -> str:
    return f"consumer-sync-{group_id}-{member_id}"


class Migration:
    def __init__(self, manager: ConsumerGroupManager) -> None:
        self.m = manager
        self.shard = manager.shard
        self.timers = manager.timers
        self.config = manager.config

    # -- KM-1 --------------------------------------------------------------------------------

    @property
    def policy(self) -> str:
        return self.config.group_consumer_migration_policy.strip().lower()

    @property
    def upgrade_enabled(self) -> bool:
        return self.policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        return self.policy in ("bidirectional", "downgrade")

    # -- KM-2: upgrade ---------------------------------------------------------------------------

    def can_upgrade(self, classic: ClassicGroup) -> bool:
        if not self.upgrade_enabled:
            log.info("classic group not upgraded: online upgrade is disabled", group=classic.group_id)
            return False
        if not classic.uses_consumer_protocol:
            log.info("classic group not upgraded: it does not use the consumer protocol", group=classic.group_id)
            return False
        if len(classic.members) > self.config.group_consumer_max_size:
            log.info("classic group not upgraded: larger than group.consumer.max.size", group=classic.group_id)
            return False
        return True

    def upgrade(self, classic: ClassicGroup, records: list[Any]) -> ConsumerGroup:
        """The consumer group `classic` becomes; its records are added to `records`."""
        gid = classic.group_id
        topics = self.m.topics
        generation = classic.generation_id
        group = ConsumerGroup(gid)
        group.group_epoch = group.assignment_epoch = generation
        members = []
        try:
            for cm in classic.members.values():
                sub = parse_subscription(cm.metadata(classic.protocol_name))
                assigned: dict[uuid.UUID, frozenset[int]] = {}
                for topic, ps in parse_assignment(cm.assignment).items():
                    t = topics.get(topic)
                    if t is not None and ps:
                        assigned[t.topic_id] = assigned.get(t.topic_id, frozenset()) | frozenset(ps)
                members.append(
                    ConsumerMember(
                        cm.member_id,
                        instance_id=cm.group_instance_id,
                        rack_id=sub.rack_id,
                        client_id=cm.client_id,
                        client_host=cm.client_host,
                        subscribed_topic_names=tuple(sorted(set(sub.topics))),
                        rebalance_timeout_ms=cm.rebalance_timeout_ms,
                        classic=orec.ClassicMemberMetadata(cm.session_timeout_ms, list(cm.protocols)),
                        member_epoch=generation,
                        previous_member_epoch=generation,
                        state=MemberState.STABLE,
                        assigned=assigned,
                    )
                )
        except EmbeddedProtocolError as exc:
            log.warning("classic group not upgraded: malformed embedded consumer protocol", group=gid, error=str(exc))
            raise CoordinatorError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade the classic group {gid} to consumer group because the embedded consumer protocol is malformed.",
            ) from exc
        # Parked requests learn of the new rebalance (Kafka: completeAll*Futures(REBALANCE_IN_PROGRESS)),
        # and the classic group's timers stop: a classic group of this id may come back (KM-4).
        for cm in list(classic.members.values()):
            classic.complete_join(cm, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=cm.member_id))
            classic.complete_sync(cm, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        for mid in [*classic.members, *classic.pending_members]:
            self.timers.cancel(f"heartbeat-{gid}-{mid}")
        self.timers.cancel(f"join-{gid}")
        self.timers.cancel(f"sync-{gid}")
        records.append((orec.group_metadata_key(gid), None))
        for member in members:
            group.apply_member_metadata(member.member_id, member.metadata_value())
        metadata_hash = self.m.metadata_hash(group.subscribed_topics())
        for member in members:
            records.append(self.m._metadata_record(gid, member))
        records.append(self.m._epoch_record(gid, generation, metadata_hash))
        for member in members:
            records.append(self.m._target_record(gid, member.member_id, member.assigned))
        records.append(self.m._target_metadata_record(gid, generation, 0))
        for member in members:
            records.append(self.m._current_record(gid, member))
        # The working copy the heartbeat goes on with; the records rebuild the same when replayed.
        group.metadata_hash = metadata_hash
        for member in members:
            group.apply_target(member.member_id, [(t, sorted(p)) for t, p in member.assigned.items()])
            group.apply_current_assignment(member.member_id, member.assignment_value())
        group.metadata_refresh = True
        for member in members:
            assert member.classic is not None
            self.m._schedule_session(gid, member.member_id, member.classic.session_timeout_ms)
        log.info("classic group upgraded to a consumer group", group=gid, generation=generation, members=len(members))
        return group

    # -- KM-4: downgrade -----------------------------------------------------------------------------

    def should_downgrade(self, group: ConsumerGroup, leaving: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMembers for one leaving (or fenced) member."""
        if not group.all_classic_except([leaving]) or len(group.members) - 1 <= 0:
            return False
        if not self.downgrade_enabled:
            log.info("consumer group not downgraded: online downgrade is disabled", group=group.group_id)
            return False
        if len(group.members) - 1 > self.config.group_max_size:
            log.info("consumer group not downgraded: larger than group.max.size", group=group.group_id)
            return False
        return True

    def should_downgrade_replacing(self, group: ConsumerGroup, replaced: ConsumerMember) -> bool:
        """Kafka's validateOnlineDowngradeWithReplacedMember: a classic member takes the place of the
        group's last consumer-protocol member, a static one, through JoinGroup."""
        if not (group.classic_members == len(group.members) - 1 and not replaced.uses_classic_protocol):
            return False
        if not self.downgrade_enabled:
            log.info("consumer group not downgraded: online downgrade is disabled", group=group.group_id)
            return False
        if len(group.members) > self.config.group_max_size:
            log.info("consumer group not downgraded: larger than group.max.size", group=group.group_id)
            return False
        return True

    def downgrade(
        self,
        group: ConsumerGroup,
        leaving: str | None,
        joining: ConsumerMember | None = None,
        records: list[Any] | None = None,
        rebalance: bool = True,
        reason: str | None = None,
    ) -> Awaitable[Any] | None:
        """KM-4 (Kafka's convertToClassicGroup): the group becomes a Stable classic group at its epoch, each
        member's target assignment its classic assignment; `joining` (a classic member replacing a static
        one) takes the replaced member's place. `records`: what the operation wrote before."""
        gid = group.group_id
        topics = self.m.topics
        now = self.shard.now_ms()
        replaced = group.static_member(joining.instance_id) if joining is not None else None
        classic = ClassicGroup(
            gid,
            now,
            state=GroupState.STABLE,
            generation_id=group.group_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            current_state_timestamp=now,
        )
        sources: list[ConsumerMember] = [
            m for mid, m in group.members.items() if mid != leaving and (replaced is None or mid != replaced.member_id)
        ]
        if joining is not None:
            sources.append(joining)
        for m in sources:
            assert m.classic is not None
            classic.add(
                ClassicMember(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.classic.session_timeout_ms,
                    CONSUMER_PROTOCOL_TYPE,
                    list(m.classic.protocols),
                )
            )
        classic.protocol_name = classic.select_protocol()
        classic.subscribed_topics = classic.compute_subscribed_topics()
        for mid, cm in classic.members.items():
            source = replaced.member_id if replaced is not None and joining is not None and mid == joining.member_id else mid
            by_name: dict[str, list[int]] = {}
            for topic_id, ps in group.target.get(source, {}).items():
                t = topics.get_by_id(topic_id)
                if t is not None:
                    by_name[t.name] = sorted(ps)
            try:
                version = subscription_version(cm.metadata(classic.protocol_name))
            except EmbeddedProtocolError:
                version = 0
            cm.assignment = serialize_assignment(by_name, version)
        records = list(records or [])
        records += self.m.group_tombstones(
            group, replaced.member_id if replaced is not None else None, joining.member_id if joining is not None else None
        )
        records.append(self.shard.group_metadata_record(classic))
        for mid in group.members:
            self.m._cancel_timers(gid, mid)
            self.timers.cancel(_join_key(gid, mid))
            self.timers.cancel(_sync_key(gid, mid))
        waiter = self.shard.write(records)
        # The live classic group keeps every member's protocols (the replayed one has only the selected one);
        # Kafka's map got the group once, as the replay did here.
        self.shard.groups.swap(gid, classic)
        for cm in classic.members.values():
            self.shard.classic.reschedule_heartbeat(classic, cm)
        log.info("consumer group downgraded to a classic group", group=gid, generation=classic.generation_id, members=len(classic.members))
        if rebalance:
            self.shard.classic.prepare_rebalance(classic, reason or f"Downgrade group {gid} from consumer to classic for member leaving.")
        return waiter

    # -- KM-3: classic members inside a consumer group ----------------------------------------------------

    def _supports(self, group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
        if protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        classic = [m for m in group.members.values() if m.classic is not None]
        if not classic:
            return bool(names)
        return any(all(any(n == p for p, _ in m.classic.protocols) for m in classic if m.classic) for n in names)

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
            return member
        member = group.static_member(instance_id)
        if member is None:
            raise CoordinatorError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} is not a member of group {group.group_id}."
            )
        if member.member_id != member_id:
            raise CoordinatorError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} was fenced.")
        return member

    @staticmethod
    def _classic_only(member: ConsumerMember) -> None:
        if member.classic is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol.")

    def _must_rejoin(self, group: ConsumerGroup, member: ConsumerMember) -> bool:
        if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS:
            return True
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            target = group.target.get(member.member_id, {})
            waiting = any(
                group.current_partition_epoch(t, p) != -1
                for t, ps in target.items()
                for p in ps
                if p not in member.assigned.get(t, frozenset())
            )
            return not waiting
        return False

    def _schedule_join_timeout_if_absent(self, gid: str, member: ConsumerMember) -> None:
        key = _join_key(gid, member.member_id)
        if not self.timers.is_scheduled(key):
            mid = member.member_id
            self.timers.schedule(
                key, member.rebalance_timeout_ms, lambda: self._expired(gid, mid, "did not rejoin within its rebalance timeout")
            )

    def _expired(self, gid: str, member_id: str, why: str) -> None:
        group = self.m.groups.get(gid)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        log.info("member fenced", group=gid, member=member_id, reason=why, protocol="classic")
        self.m.fence(group, member, why)

    def join(self, group: ConsumerGroup, req: JoinRequest) -> tuple[JoinResult, Awaitable[Any] | None]:
        """JoinGroup of a classic member (KM-3), as Kafka's classicGroupJoinToConsumerGroup."""
        m = self.m
        gid = group.group_id
        unknown = req.member_id == ""
        member_id = new_member_id() if unknown else req.member_id
        max_size = self.config.group_consumer_max_size
        if (
            len(group.members) >= max_size
            and member_id not in group.members
            and (req.group_instance_id is None or req.group_instance_id not in group.static_members)
        ):
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=""), None
        if not self._supports(group, req.protocol_type, {n for n, _ in req.protocols}):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id), None
        if unknown and req.group_instance_id is None and req.api_version >= 4:
            log.info("new classic member asked for a member id", group=gid, member=member_id)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id), None
        try:
            sub = parse_subscription(req.protocols[0][1])
        except EmbeddedProtocolError:
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id), None
        records: list[Any] = []
        replaced: str | None = None
        existing = group.static_member(req.group_instance_id)
        if req.group_instance_id is None:
            member = group.members.get(member_id) or ConsumerMember(member_id)
            if member_id not in group.members:
                log.info("member joined", group=gid, member=member_id, protocol="classic")
        elif unknown:
            if existing is None:
                member = ConsumerMember(member_id)
                log.info("member joined", group=gid, member=member_id, instance_id=req.group_instance_id, protocol="classic")
            else:
                member = m.replace_static_member(group, existing, member_id, records, "classic")
                replaced = existing.member_id
        else:
            if existing is None:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id), None
            if existing.member_id != member_id:
                return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=req.member_id), None
            member = existing
        downgrade = existing is not None and self.should_downgrade_replacing(group, existing)
        updated = member.copy()
        updated.instance_id = req.group_instance_id if req.group_instance_id is not None else updated.instance_id
        if sub.rack_id is not None:
            updated.rack_id = sub.rack_id
        if req.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms
        updated.subscribed_topic_names = tuple(sorted(set(sub.topics)))
        updated.subscribed_topic_regex = ""
        updated.client_id = req.client_id
        updated.client_host = req.client_host
        updated.classic = orec.ClassicMemberMetadata(req.session_timeout_ms, list(req.protocols))
        names_changed = m._member_subscription_changed(group, member, updated, replaced is not None, records)
        regex_status = m._maybe_update_regexes(group, member, updated, records, None)
        bump = names_changed or regex_status is not RegexStatus.NO_CHANGE
        owned = []
        for topic, ps in sub.owned:
            t = m.topics.get(topic)
            if t is not None:
                owned.append((t.topic_id, list(ps)))
        if downgrade:
            group_epoch = group.group_epoch
            if bump or group.metadata_refresh:
                group_epoch = m._update_subscription_metadata(group, bump, member, updated, records)
            rebalance = group.assignment_epoch < group_epoch
            reconciled = updated
            if not rebalance:
                target = m._last_target(group, updated, replaced)
                reconciled = m._maybe_reconcile(group, updated, group.assignment_epoch, target, bump, owned, records)
            waiter = self.downgrade(
                group,
                None,
                reconciled,
                records,
                rebalance,
                f"Downgrade group {gid} from consumer to classic with stale assignment." if rebalance else None,
            )
            self.timers.cancel(_join_key(gid, reconciled.member_id))
        else:
            reconciled, waiter, group = m._update_member(group, member, updated, replaced, bump, bump, owned, records)
            self.timers.cancel(_join_key(gid, reconciled.member_id))
            mid = reconciled.member_id
            self.timers.schedule(
                _sync_key(gid, mid),
                reconciled.rebalance_timeout_ms,
                lambda: self._expired(gid, mid, "did not sync within its rebalance timeout"),
            )
        result = JoinResult(
            member_id=reconciled.member_id,
            generation_id=reconciled.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=req.protocols[0][0],
            leader="",
            members=[],
        )
        return result, waiter

    def sync(self, group: ConsumerGroup, req: SyncRequest) -> SyncResult:
        """SyncGroup of a classic member (KM-3): its assigned partitions, computed by the server."""
        gid = group.group_id
        member = self._member(group, req.member_id, req.group_instance_id)
        self._classic_only(member)
        if req.generation_id != member.member_epoch:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        assert member.classic is not None
        first = member.classic.protocols[0][0] if member.classic.protocols else None
        if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            req.protocol_name is not None and req.protocol_name != first
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout_if_absent(gid, member)
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        self.timers.cancel(_sync_key(gid, member.member_id))
        self.m._schedule_session(gid, member.member_id, member.classic.session_timeout_ms)
        by_name: dict[str, list[int]] = {}
        for topic_id, ps in member.assigned.items():
            t = self.m.topics.get_by_id(topic_id)
            if t is not None:
                by_name[t.name] = sorted(ps)
        try:
            version = subscription_version(member.classic.protocols[0][1])
        except EmbeddedProtocolError:
            version = 0
        return SyncResult(
            protocol_type=req.protocol_type or CONSUMER_PROTOCOL_TYPE,
            protocol_name=req.protocol_name or first,
            assignment=serialize_assignment(by_name, version),
        )

    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        """Heartbeat of a classic member (KM-3)."""
        try:
            member = self._member(group, member_id, instance_id)
            self._classic_only(member)
        except CoordinatorError as exc:
            return exc.code
        if generation != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        assert member.classic is not None
        self.m._schedule_session(group.group_id, member.member_id, member.classic.session_timeout_ms)
        if self._must_rejoin(group, member):
            self._schedule_join_timeout_if_absent(group.group_id, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(
        self, group: ConsumerGroup, members: list[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]], Awaitable[Any] | None]:
        """LeaveGroup of classic members (KM-3): each removed as a fenced member is."""
        results: list[tuple[str, str | None, ErrorCode]] = []
        waiter = None
        for member_id, instance_id, reason in members:
            try:
                if instance_id is None:
                    member = group.members.get(member_id)
                    if member is None:
                        raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    member = group.static_member(instance_id)
                    if member is None:
                        raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
                    if member_id != "" and member.member_id != member_id:
                        raise CoordinatorError(ErrorCode.FENCED_INSTANCE_ID)
                self._classic_only(member)
            except CoordinatorError as exc:
                results.append((member_id, instance_id, exc.code))
                continue
            log.info("member left", group=group.group_id, member=member.member_id, reason=reason or "not provided", protocol="classic")
            waiter = self.m.fence(group, member, "left the group") or waiter
            results.append((member.member_id, instance_id, ErrorCode.NONE))
            group = self.m.groups.get(group.group_id, group)
            if group.group_id not in self.m.groups:
                break
        return ErrorCode.NONE, results, waiter


def settle_after(fut: asyncio.Future[Any], value: Any, waiter: Awaitable[Any] | None, error_value: Any) -> None:
    """Complete `fut` with `value` once `waiter` (the records' durability) is done."""
    if waiter is None:
        if not fut.done():
            fut.set_result(value)
        return

    async def wait() -> None:
        try:
            await waiter
        except Exception:
            if not fut.done():
                fut.set_result(error_value)
            return
        if not fut.done():
            fut.set_result(value)

    asyncio.get_running_loop().create_task(wait())
