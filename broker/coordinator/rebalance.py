"""The classic rebalance protocol of one shard: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
their timers, step for step as Kafka's GroupMetadataManager runs them (spec sections 3.x).

Parked requests are futures on the members; every transition completes them as Kafka does
(CT-8). Timer keys follow Kafka's: heartbeat-<group>-<member>, join-<group>, sync-<group>.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from broker.coordinator.classic import ClassicGroup, ClassicMember, GroupState, JoinResult, Protocols, SyncResult
from broker.runtime.errors import CoordinatorError, map_append_error
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.coordinator.shard import GroupShard

log = structlog.get_logger("kaflet.coordinator")

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # CT-2, a constant in Kafka


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    reason: str | None
    client_id: str
    client_host: str
    api_version: int


@dataclass
class SyncRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


def _heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def _join_key(group_id: str) -> str:
    return f"join-{group_id}"


def _sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


class ClassicRebalancer:
    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard
        self.timers = shard.timers
        self.config = shard.config
        self.stats = shard.service.stats

    def _now(self) -> int:
        return self.shard.now_ms()

    # -- JoinGroup ------------------------------------------------------------------------

    def join(self, req: JoinRequest) -> asyncio.Future[JoinResult]:
        """JG-3..JG-19. The future completes now (errors, MEMBER_ID_REQUIRED, no-op rejoins) or when parked."""
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        if req.group_id in self.shard.share_groups:  # KIP-932: a share group takes no classic member
            fut.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=""))
            return fut
        groups = self.shard.groups
        if req.group_id in self.shard.streams_groups:
            # KS-29: an empty streams group becomes a classic group (its offsets stay); a live one is refused.
            tombstones = self.shard.streams.maybe_delete_empty(req.group_id)
            if tombstones is None:
                fut.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=""))
                return fut
            try:
                self.shard.write(tombstones)
            except CoordinatorError as exc:
                fut.set_result(JoinResult(map_append_error(exc.code), member_id=req.member_id))
                return fut
            log.info("converted the empty streams group to a classic group", group=req.group_id)
        consumer_group = self.shard.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            if not consumer_group.is_empty:
                # KM-3: a classic member inside a consumer group.
                from broker.coordinator.consumer.migration import settle_after

                try:
                    result, waiter = self.shard.consumer.migration.join(consumer_group, req)
                except CoordinatorError as exc:
                    fut.set_result(JoinResult(map_append_error(exc.code), member_id=""))
                    return fut
                settle_after(fut, result, waiter, JoinResult(ErrorCode.NOT_COORDINATOR, member_id=""))
                return fut
            # An empty consumer group becomes a classic group (KM-1: always allowed); its offsets stay.
            try:
                self.shard.write(self.shard.consumer.group_tombstones(consumer_group))
            except CoordinatorError as exc:
                fut.set_result(JoinResult(map_append_error(exc.code), member_id=req.member_id))
                return fut
        group = groups.get(req.group_id)
        unknown = req.member_id == ""
        is_new_group = group is None
        if group is None:
            if not unknown:
                fut.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id))
                return fut
            group = groups[req.group_id] = ClassicGroup(req.group_id, self._now())
        wrote = False
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            fut.set_result(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=""))
        elif unknown:
            wrote = self._join_new_member(group, req, fut)
        else:
            wrote = self._join_existing_member(group, req, fut)
        if is_new_group and not wrote:
            # JG-3a: persist the new group with an "empty group" record.
            record = self.shard.group_metadata_record(
                ClassicGroup(group.group_id, 0, current_state_timestamp=group.current_state_timestamp)
            )

            def done(error: ErrorCode | None) -> None:
                if error is not None:
                    self._forget(group)  # GE-6: the failed write takes the new group with it
                    _settle(fut, JoinResult(error))

            self._write_then(group, [record], done)
        return fut

    def _forget(self, group: ClassicGroup) -> None:
        if self.shard.groups.get(group.group_id) is group:
            del self.shard.groups[group.group_id]
        self._cancel_group_timers(group)

    def _cancel_group_timers(self, group: ClassicGroup) -> None:
        for member_id in [*group.members, *group.pending_members]:
            self.timers.cancel(_heartbeat_key(group.group_id, member_id))
        self.timers.cancel(_join_key(group.group_id))
        self.timers.cancel(_sync_key(group.group_id))

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """JG-4 (group.max.size)."""
        limit = self.config.group_max_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < limit
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(self, group: ClassicGroup, req: JoinRequest, fut: asyncio.Future[JoinResult]) -> bool:
        if group.is_in(GroupState.DEAD):
            fut.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=""))
            return False
        if not group.supports_protocols(req.protocol_type, (name for name, _ in req.protocols)):
            fut.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=""))
            return False
        new_id = group.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            existing = group.static_members.get(req.group_instance_id)
            if existing is not None:
                log.info(
                    "static member replaced",
                    group=group.group_id,
                    instance_id=req.group_instance_id,
                    old_member=existing,
                    new_member=new_id,
                    state=group.state.value,
                )
                return self._update_static_member(group, req, existing, new_id, fut)
            return self._add_member_then_rebalance(group, req, new_id, fut)
        if req.api_version >= 4:
            # JG-7: hand out a member id and ask for a second JoinGroup with it.
            group.pending_members.add(new_id)
            self.timers.schedule(
                _heartbeat_key(group.group_id, new_id),
                req.session_timeout_ms,
                lambda: self.expire_heartbeat(group.group_id, new_id),
                group=group.group_id,
            )
            fut.set_result(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id))
            return False
        return self._add_member_then_rebalance(group, req, new_id, fut)

    def _join_existing_member(self, group: ClassicGroup, req: JoinRequest, fut: asyncio.Future[JoinResult]) -> bool:
        member_id = req.member_id
        if group.is_in(GroupState.DEAD):
            fut.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
            return False
        if not group.supports_protocols(req.protocol_type, (name for name, _ in req.protocols)):
            fut.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return False
        if member_id in group.pending_members:
            # JG-9: a pending member's second JoinGroup (a pending member is never static).
            if req.group_instance_id is not None:
                raise CoordinatorError(ErrorCode.UNKNOWN_SERVER_ERROR, "static JoinGroup for a pending member")
            return self._add_member_then_rebalance(group, req, member_id, fut)
        error = group.validate_member(member_id, req.group_instance_id)
        if error is not ErrorCode.NONE:
            fut.set_result(JoinResult(error, member_id=member_id))
            return False
        member = group.members[member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return self._update_member_then_rebalance(group, member, req, fut, "member joining during PreparingRebalance")
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                fut.set_result(self._current_generation(group, member_id, leader_members=group.is_leader(member_id)))
                return False
            return self._update_member_then_rebalance(group, member, req, fut, "member metadata changed during CompletingRebalance")
        if group.is_in(GroupState.STABLE):
            if group.is_leader(member_id):
                return self._update_member_then_rebalance(group, member, req, fut, "leader rejoined")
            if not member.matches(req.protocols):
                return self._update_member_then_rebalance(group, member, req, fut, "member metadata changed")
            fut.set_result(self._current_generation(group, member_id, leader_members=False))
            return False
        # Empty: let the member reset its generation and rejoin (JG-12).
        fut.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
        return False

    def _current_generation(self, group: ClassicGroup, member_id: str, leader_members: bool) -> JoinResult:
        return JoinResult(
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=group.current_members() if leader_members else [],
        )

    def _add_member_then_rebalance(self, group: ClassicGroup, req: JoinRequest, member_id: str, fut: asyncio.Future[JoinResult]) -> bool:
        """JG-10."""
        member = ClassicMember(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
        )
        member.is_new = True
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, fut)
        log.info(
            "member joined",
            group=group.group_id,
            member=member_id,
            instance_id=req.group_instance_id,
            client_id=req.client_id,
            state=group.state.value,
        )
        self.reschedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        return self._maybe_prepare_rebalance_or_complete_join(group, f"adding new member {member_id}")

    def _update_member_then_rebalance(
        self, group: ClassicGroup, member: ClassicMember, req: JoinRequest, fut: asyncio.Future[JoinResult], reason: str
    ) -> bool:
        # JG-19: a newer JoinGroup replaces a parked one, which is never answered.
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, fut)
        return self._maybe_prepare_rebalance_or_complete_join(group, reason)

    def _update_static_member(
        self, group: ClassicGroup, req: JoinRequest, old_id: str, new_id: str, fut: asyncio.Future[JoinResult]
    ) -> bool:
        """SM-2..SM-4."""
        current_leader = group.leader_id
        new_member = group.replace_static_member(req.group_instance_id or "", old_id, new_id)
        self.timers.cancel(_heartbeat_key(group.group_id, old_id))
        self.reschedule_heartbeat(group, new_member)
        old_rebalance, old_session, old_protocols = new_member.rebalance_timeout_ms, new_member.session_timeout_ms, new_member.protocols
        group.update_member(new_member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, fut)
        if group.is_in(GroupState.STABLE):
            if (group.protocol_name or "") == group.select_protocol():
                # SM-3: restart without rebalance; persist the new member id first.
                record = self.shard.group_metadata_record(group)
                instance_id = req.group_instance_id or ""
                version = req.api_version

                def done(error: ErrorCode | None) -> None:
                    if error is not None:
                        group.update_member(new_member, old_protocols, old_rebalance, old_session, None)
                        old_member = group.replace_static_member(instance_id, new_id, old_id)
                        self.timers.cancel(_heartbeat_key(group.group_id, new_id))
                        self.reschedule_heartbeat(group, old_member)
                        _settle(
                            fut,
                            JoinResult(
                                error,
                                member_id="",
                                generation_id=group.generation_id,
                                protocol_type=group.protocol_type,
                                protocol_name=group.protocol_name,
                                leader=current_leader or "",
                            ),
                        )
                        return
                    if version >= 9:
                        is_leader = group.is_leader(new_id)
                        result = self._current_generation(group, new_id, leader_members=is_leader)
                        result.skip_assignment = is_leader
                    else:
                        result = self._current_generation(group, new_id, leader_members=False)
                        result.leader = current_leader or ""
                    group.complete_join(new_member, result)

                self._write_then(group, [record], done)
                return True
            return self._maybe_prepare_rebalance_or_complete_join(group, f"static member {new_id} changed the selected protocol")
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return self.prepare_rebalance(group, f"static member {new_id} rejoined during CompletingRebalance")
        return self._maybe_complete_join_phase(group)

    # -- join phase -----------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> bool:
        if group.can_rebalance():
            return self.prepare_rebalance(group, reason)
        return self._maybe_complete_join_phase(group)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> bool:
        """JG-13. Returns True if records were written."""
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_with_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_in(GroupState.EMPTY)
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            gid = group.group_id
            self.timers.schedule(_join_key(gid), delay, lambda: self._try_complete_initial_rebalance(gid, delay, remaining), group=gid)
        if group.rebalance_started_at is None or group.is_in(GroupState.STABLE, GroupState.EMPTY):
            group.rebalance_started_at = time.monotonic()  # a rebalance, possibly restarted, runs until Stable
        group.transition_to(GroupState.PREPARING_REBALANCE, self._now())
        log.info("rebalance started", group=group.group_id, generation=group.generation_id, members=len(group.members), reason=reason)
        if initial:
            return False
        return self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> bool:
        if group.has_all_members_joined():
            return self.complete_join(group)
        gid = group.group_id
        self.timers.schedule(_join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid), group=gid)
        return False

    def _try_complete_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        """JG-14: every new member during the window extends it by up to the delay."""
        group = self.shard.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self.timers.schedule(
                _join_key(group_id),
                new_delay,
                lambda: self._try_complete_initial_rebalance(group_id, new_delay, new_remaining),
                group=group_id,
            )
        else:
            self.complete_join(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> bool:
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return False
        if group.previous_state is GroupState.EMPTY:
            return False  # the initial rebalance completes only on its timer (JG-14)
        if not group.has_all_members_joined():
            return False
        return self.complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.shard.groups.get(group_id)
        if group is not None:
            self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> bool:
        """JG-15. Returns True if a record was written (the group became Empty)."""
        self.timers.cancel(_join_key(group.group_id))
        dropped = [m for m in group.not_yet_rejoined() if not m.is_static]
        for member in dropped:
            group.remove(member.member_id)
            self.timers.cancel(_heartbeat_key(group.group_id, member.member_id))
        if dropped:
            log.info("removed members that did not rejoin", group=group.group_id, members=[m.member_id for m in dropped])
        if group.is_in(GroupState.DEAD):
            return False
        if not group.maybe_elect_new_joined_leader() and group.members:
            # No member rejoined: extend the phase until sessions expire (SM-6).
            gid = group.group_id
            self.timers.schedule(_join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid), group=gid)
            return False
        group.init_next_generation(self._now())
        if group.is_in(GroupState.EMPTY):
            log.info("group is empty", group=group.group_id, generation=group.generation_id)
            record = self.shard.group_metadata_record(group)
            self._write_then(group, [record], lambda error: None)
            return True
        log.info(
            "join phase completed",
            group=group.group_id,
            generation=group.generation_id,
            members=len(group.members),
            protocol=group.protocol_name,
            leader=group.leader_id,
        )
        for member in list(group.members.values()):
            is_leader = group.is_leader(member.member_id)
            group.complete_join(member, self._current_generation(group, member.member_id, leader_members=is_leader))
            self.reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        gid, generation = group.group_id, group.generation_id
        self.timers.schedule(_sync_key(gid), group.rebalance_timeout_ms(), lambda: self._expire_pending_sync(gid, generation), group=gid)
        return False

    # -- SyncGroup ------------------------------------------------------------------------

    def sync(self, req: SyncRequest) -> asyncio.Future[SyncResult]:
        """SG-2..SG-7."""
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        consumer_group = self.shard.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            try:
                fut.set_result(self.shard.consumer.migration.sync(consumer_group, req))  # KM-3
            except CoordinatorError as exc:
                fut.set_result(SyncResult(exc.code))
            return fut
        group = self.shard.groups.get(req.group_id)
        if group is None or group.is_empty:
            fut.set_result(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return fut
        error = self._validate_sync(group, req)
        if error is not ErrorCode.NONE:
            fut.set_result(SyncResult(error))
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            fut.set_result(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            member = group.members[req.member_id]
            member.sync_future = fut
            self._remove_pending_sync_member(group, req.member_id)
            if group.is_leader(req.member_id):
                self._store_leader_assignment(group, req)
        elif group.is_in(GroupState.STABLE):
            self._remove_pending_sync_member(group, req.member_id)
            member = group.members[req.member_id]
            fut.set_result(SyncResult(protocol_type=group.protocol_type, protocol_name=group.protocol_name, assignment=member.assignment))
        return fut

    def _validate_sync(self, group: ClassicGroup, req: SyncRequest) -> ErrorCode:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error is not ErrorCode.NONE:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(req.protocol_name, group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    def _store_leader_assignment(self, group: ClassicGroup, req: SyncRequest) -> None:
        """SG-6: persist the assignment, then hand it out if the group is still where it was."""
        assignment = {m: a for m, a in req.assignments.items()}
        missing = [m for m in group.members if m not in assignment]
        for member_id in missing:
            assignment[member_id] = b""
        if missing:
            log.warning("leader sent no assignment for some members", group=group.group_id, members=missing)
        generation = req.generation_id
        record = self.shard.group_metadata_record(group, assignment)

        def done(error: ErrorCode | None) -> None:
            if not (group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation):
                return
            if error is not None:
                self._reset_and_propagate_assignment_with_error(group, error)
                self._maybe_prepare_rebalance_or_complete_join(group, f"error {error.name} storing the assignment")
                return
            for member in group.members.values():
                member.assignment = assignment.get(member.member_id, b"")
            self._propagate_assignment(group, ErrorCode.NONE)
            group.transition_to(GroupState.STABLE, self._now())
            duration = time.monotonic() - group.rebalance_started_at if group.rebalance_started_at is not None else 0.0
            group.rebalance_started_at = None
            self.stats.rebalance_completed(group, duration)
            log.info(
                "rebalance completed",
                group=group.group_id,
                generation=group.generation_id,
                members=len(group.members),
                duration_ms=round(duration * 1000, 1),
            )

        self._write_then(group, [record], done)

    def _reset_and_propagate_assignment_with_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error is ErrorCode.NONE
        for member in list(group.members.values()):
            result = SyncResult(
                error,
                protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None,
                assignment=member.assignment,
            )
            if group.complete_sync(member, result):
                self.reschedule_heartbeat(group, member)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.is_in(GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE) or not group.pending_sync_members:
            self.timers.cancel(_sync_key(group.group_id))

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timers.cancel(_sync_key(group.group_id))

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        """CT-5."""
        group = self.shard.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync_members:
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                group.remove(member_id)
                self.timers.cancel(_heartbeat_key(group_id, member_id))
            log.info("members expired without SyncGroup", group=group_id, members=missing)
            self.prepare_rebalance(group, f"removing {missing} on pending sync expiration")

    # -- Heartbeat ------------------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        """HB-1, HB-2, HB-4."""
        consumer_group = self.shard.consumer_groups.get(group_id)
        if consumer_group is not None:
            return self.shard.consumer.migration.heartbeat(consumer_group, member_id, instance_id, generation)  # KM-3
        group = self.shard.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error is not ErrorCode.NONE:
            return error
        if generation != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.reschedule_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def reschedule_heartbeat(self, group: ClassicGroup, member: ClassicMember, timeout_ms: int | None = None) -> None:
        gid, mid = group.group_id, member.member_id
        self.timers.schedule(
            _heartbeat_key(gid, mid),
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self.expire_heartbeat(gid, mid),
            group=gid,
        )

    def expire_heartbeat(self, group_id: str, member_id: str) -> None:
        """CT-1 and CT-3."""
        group = self.shard.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return
        if member_id in group.pending_members:
            log.info("pending member expired", group=group_id, member=member_id)
            group.remove(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self.complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info(
            "member expired",
            group=group_id,
            member=member_id,
            instance_id=member.group_instance_id,
            session_timeout_ms=member.session_timeout_ms,
        )
        group.complete_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=""))
        group.remove(member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, f"removing member {member_id} on heartbeat expiration")
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self.complete_join(group)

    # -- LeaveGroup -----------------------------------------------------------------------

    def leave(
        self, group_id: str, members: list[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """LG-2..LG-5: (top-level error, [(member id, instance id, error)])."""
        consumer_group = self.shard.consumer_groups.get(group_id)
        if consumer_group is not None:
            top, results, _waiter = self.shard.consumer.migration.leave(consumer_group, members)  # KM-3
            return top, results
        group = self.shard.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i, _ in members]
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results: list[tuple[str, str | None, ErrorCode]] = []
        removed_any = False
        for member_id, instance_id, reason in members:
            if member_id == "":
                if instance_id is not None and instance_id in group.static_members:
                    self._remove_current_member(group, group.static_members[instance_id], reason)
                    results.append((member_id, instance_id, ErrorCode.NONE))
                    removed_any = True
                else:
                    results.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
            elif member_id in group.pending_members:
                group.remove(member_id)
                self.timers.cancel(_heartbeat_key(group_id, member_id))
                log.info("pending member left", group=group_id, member=member_id, reason=reason)
                results.append((member_id, instance_id, ErrorCode.NONE))
                removed_any = True
            else:
                error = group.validate_member(member_id, instance_id)
                if error is ErrorCode.NONE:
                    self._remove_current_member(group, member_id, reason)
                    removed_any = True
                results.append((member_id, instance_id, error))
        if removed_any:
            if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, "explicit LeaveGroup")
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return ErrorCode.NONE, results

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str | None) -> None:
        member = group.members[member_id]
        self.timers.cancel(_heartbeat_key(group.group_id, member_id))
        log.info(
            "member left", group=group.group_id, member=member_id, instance_id=member.group_instance_id, reason=reason or "not provided"
        )
        group.complete_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=""))
        group.remove(member_id)

    # -- unloading ------------------------------------------------------------------------

    def on_unloaded(self, group: ClassicGroup) -> None:
        group.transition_to(GroupState.DEAD, self._now())
        if group.previous_state is GroupState.PREPARING_REBALANCE:
            for member in list(group.members.values()):
                group.complete_join(member, JoinResult(ErrorCode.NOT_COORDINATOR, member_id=member.member_id))
        elif group.previous_state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            for member in list(group.members.values()):
                group.complete_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))

    # -- recovery ---------------------------------------------------------------------------

    def recover_group(self, group_id: str, reason: str) -> None:
        """A timer operation of the group raised. Kafka's runtime reverts such an operation's
        uncommitted changes; kaflet cannot undo in place, so it treats the group as its
        coordinator would after an unload and reload: every parked JoinGroup/SyncGroup gets
        NOT_COORDINATOR (clients rediscover the coordinator and rejoin), the members are
        dropped, and the group starts again Empty at its generation, committed offsets kept.
        An empty-group record is written so that a restart agrees."""
        group = self.shard.groups.get(group_id)
        if group is None:
            return
        self._cancel_group_timers(group)
        if not group.is_in(GroupState.DEAD):
            self.on_unloaded(group)
        fresh = ClassicGroup(group_id, self._now(), generation_id=group.generation_id, protocol_type=group.protocol_type)
        fresh.current_state_timestamp = self._now()
        self.shard.groups.swap(group_id, fresh)  # in its place, as Kafka's revert leaves the group's entry (LI-4)
        log.error("group reset after a failed timer", group=group_id, generation=group.generation_id, reason=reason)

        def done(error: ErrorCode | None) -> None:
            if error is not None:
                log.error("could not record the reset group", group=group_id, error=error.name)

        self._write_then(fresh, [self.shard.group_metadata_record(fresh)], done)

    # -- writes with a continuation --------------------------------------------------------

    def _write_then(self, group: ClassicGroup, records: list[Any], done: Any) -> None:
        """Write a GroupMetadata record (not replayed: the live group is the source) and call
        `done(None)` once it is durable, or `done(error)` with the client-facing error."""
        try:
            waiter = self.shard.write(records, replay=False)
        except CoordinatorError as exc:
            done(map_append_error(exc.code))
            return
        if waiter is None:
            done(None)
            return

        async def wait() -> None:
            try:
                await waiter
            except Exception as exc:
                log.error("coordinator write was not made durable", group=group.group_id, error=str(exc))
                done(ErrorCode.NOT_COORDINATOR)
                return
            done(None)

        asyncio.get_running_loop().create_task(wait())


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def _settle(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)
