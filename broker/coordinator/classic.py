"""A classic (JoinGroup/SyncGroup) group and its members: the data structure of Kafka's ClassicGroup.

The rebalance logic that drives it lives in rebalance.py; this module keeps the bookkeeping
exact (awaiting-join counts, supported-protocol counts, static member map, pending members).
Where Kafka leaves a choice to hash-map order, kaflet decides deterministically:
members keep insertion order, a new leader is the first remaining member, and protocol
vote ties go to the leader's preference (JG-16).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

import structlog

from broker.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from protocol.errors import ErrorCode

log = structlog.get_logger("kaflet.coordinator")


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}

Protocols = list[tuple[str, bytes]]


@dataclass
class JoinResult:
    """What a JoinGroup is answered with; the handler encodes it for the request's version."""

    error: ErrorCode = ErrorCode.NONE
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResult:
    error: ErrorCode = ErrorCode.NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


def _settle(fut: asyncio.Future[object] | None, value: object) -> None:
    if fut is not None and not fut.done():
        fut.set_result(value)


class ClassicMember:
    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "group_instance_id",
        "is_new",
        "join_future",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "sync_future",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = assignment
        self.join_future: asyncio.Future[JoinResult] | None = None
        self.sync_future: asyncio.Future[SyncResult] | None = None
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def has_satisfied_heartbeat(self) -> bool:
        """New members can expire while awaiting join; others are alive while parked (CT-1)."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols in the same order, names and metadata (JG-12)."""
        return protocols == self.protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


class ClassicGroup:
    def __init__(
        self,
        group_id: str,
        now_ms: int,
        state: GroupState = GroupState.EMPTY,
        generation_id: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str | None = None,
        current_state_timestamp: int | None = None,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = state
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.current_state_timestamp = current_state_timestamp
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: dict[str, int] = {}
        self.num_awaiting_join = 0
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.rebalance_started_at: float | None = None
        self._now_ms = now_ms

    # -- state ------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise RuntimeError(f"group {self.group_id}: illegal transition {self.state.value} -> {target.value}")
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = now_ms

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # -- members ----------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def add(self, member: ClassicMember, join_future: asyncio.Future[JoinResult] | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} is already in group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        member.join_future = join_future
        if join_future is not None:
            self.num_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self._count_protocols(removed, -1)
            if removed.awaiting_join:
                self.num_awaiting_join -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: ClassicMember,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_future: asyncio.Future[JoinResult] | None,
    ) -> None:
        self._count_protocols(member, -1)
        member.protocols = protocols
        self._count_protocols(member, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_future is not None and not member.awaiting_join:
            self.num_awaiting_join += 1
        elif join_future is None and member.awaiting_join:
            self.num_awaiting_join -= 1
        member.join_future = join_future

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicMember:
        """SM-2: the new id takes the old member's place; parked requests of the old id are fenced."""
        old = self.members.pop(old_id)
        self.complete_join(old, JoinResult(error=ErrorCode.FENCED_INSTANCE_ID, member_id=old_id, leader=""))
        self.complete_sync(old, SyncResult(error=ErrorCode.FENCED_INSTANCE_ID))
        new = ClassicMember(
            new_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
        )
        self.members[new_id] = new
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return new

    def complete_join(self, member: ClassicMember, result: JoinResult) -> bool:
        if member.join_future is None:
            return False
        _settle(member.join_future, result)  # type: ignore[arg-type]
        member.join_future = None
        self.num_awaiting_join -= 1
        return True

    def complete_sync(self, member: ClassicMember, result: SyncResult) -> bool:
        if member.sync_future is None:
            return False
        _settle(member.sync_future, result)  # type: ignore[arg-type]
        member.sync_future = None
        return True

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """JG-11: NONE, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                # A zombie: another member holds this instance id now (Kafka's FencedInstanceIdException).
                log.info("member fenced", group=self.group_id, member=member_id, instance_id=group_instance_id, current_member=existing)
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    @staticmethod
    def generate_member_id(client_id: str | None, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else (client_id or "")
        return f"{prefix}-{uuid.uuid4()}"

    # -- protocols --------------------------------------------------------------------

    def _count_protocols(self, member: ClassicMember, delta: int) -> None:
        counts = self.supported_protocols
        for name, _ in member.protocols:
            counts[name] = counts.get(name, 0) + delta

    def supports_protocols(self, protocol_type: str, protocol_names: Iterable[str]) -> bool:
        """JG-6: the request could join this group."""
        names = set(protocol_names)
        if self.state is GroupState.EMPTY:
            return protocol_type != "" and bool(names)
        if self.protocol_type != protocol_type:
            return False
        size = len(self.members)
        return any(self.supported_protocols.get(n, 0) == size for n in names)

    def candidate_protocols(self) -> set[str]:
        size = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == size}

    def select_protocol(self) -> str:
        """JG-16: each member votes for its first candidate; most votes wins; ties to the leader's preference."""
        if not self.members:
            raise RuntimeError("cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        tied = {name for name, count in votes.items() if count == best}
        if len(tied) == 1:
            return next(iter(tied))
        leader = self.members.get(self.leader_id or "")
        order = [name for name, _ in leader.protocols] if leader is not None else []
        for name in order:
            if name in tied:
                return name
        return sorted(tied)[0]

    def compute_subscribed_topics(self) -> set[str] | None:
        """RF-6: the union of the members' subscribed topics, when the coordinator can know it."""
        if self.protocol_type is None or self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                parsed = subscribed_topics(member.metadata(self.protocol_name))
            except KeyError:
                return None
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        """OD-2: unknown subscriptions count as 'everything' for consumer groups, 'nothing' otherwise."""
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol

    def init_next_generation(self, now_ms: int) -> None:
        """CS-5: generation +1; CompletingRebalance with members, Empty without."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_members(self) -> list[tuple[str, str | None, bytes]]:
        """The leader's member list (JG-17): every member with its metadata for the selected protocol."""
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def offset_expiration_base(self) -> str | None:
        """OR-3: which timestamp offsets of this group expire from ('state', 'commit'), or None."""
        if self.protocol_type is not None:
            if self.state is GroupState.EMPTY:
                return "state"
            if self.uses_consumer_protocol and self.subscribed_topics is not None and self.state is GroupState.STABLE:
                return "commit"
            return None
        return "commit"
