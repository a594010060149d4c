"""A consumer (KIP-848) group and its members, exactly the state Kafka's records 3-8 carry.

Nothing here is changed except by `apply_*`, which the shard's replay calls for every record,
at load and for every live write alike (RL-5): the live path computes records and replays them.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from enum import IntEnum

from storage import offsets_records as orec

# topic id -> partitions
Partitions = dict[uuid.UUID, frozenset[int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


def new_member_id() -> str:
    """Kafka's `Uuid.randomUuid().toString()`: 22 characters of URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class MemberState(IntEnum):
    """6.6: the record's int8 State."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ConsumerGroupState:
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    ALL = ("Empty", "Assigning", "Reconciling", "Stable")


def to_partitions(items: orec.TopicPartitions) -> Partitions:
    return {topic_id: frozenset(parts) for topic_id, parts in items if parts}


def from_partitions(parts: Partitions) -> orec.TopicPartitions:
    """Record order: topics and partitions sorted, so equal states write equal bytes."""
    return [(topic_id, sorted(ps)) for topic_id, ps in sorted(parts.items(), key=lambda kv: kv[0].bytes) if ps]


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: orec.ClassicMemberMetadata | None = None
    # KH-6: a new member is at epoch 0, previous epoch -1, STABLE, without partitions.
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def metadata_value(self) -> orec.ConsumerMemberMetadataValue:
        return orec.ConsumerMemberMetadataValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=sorted(self.subscribed_topic_names),
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            classic=self.classic,
        )

    def same_metadata(self, other: ConsumerMember) -> bool:
        return self.metadata_value() == other.metadata_value()

    def assignment_value(self) -> orec.CurrentAssignmentValue:
        return orec.CurrentAssignmentValue(
            self.member_epoch,
            self.previous_member_epoch,
            int(self.state),
            from_partitions(self.assigned),
            from_partitions(self.pending_revocation),
        )

    def same_assignment(self, other: ConsumerMember) -> bool:
        return (
            self.member_epoch == other.member_epoch
            and self.previous_member_epoch == other.previous_member_epoch
            and self.state is other.state
            and self.assigned == other.assigned
            and self.pending_revocation == other.pending_revocation
        )

    def copy(self, **changes: object) -> ConsumerMember:
        out = ConsumerMember(**{f: getattr(self, f) for f in self.__dataclass_fields__})
        for name, value in changes.items():
            setattr(out, name, value)
        return out


class ConsumerGroup:
    """Group epoch, assignment epoch, subscription metadata, members, targets (6.3, KR-4)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # Kafka 4 starts a new consumer group at epoch 1 (ModernGroup), so its first member's
        # join bumps it to 2: no member epoch of a live group is ever 1.
        self.group_epoch = 1
        self.assignment_epoch = 0
        self.subscription_metadata: dict[str, orec.TopicMetadata] = {}
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Partitions] = {}  # member id -> target partitions
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}  # KR-3's "current epoch" of a partition
        # Not persisted: set when a subscribed topic was created, grew or was deleted (KH-8).
        self.metadata_refresh = True
        self.regex_topics: dict[str, frozenset[str]] = {}  # regex -> the topic names it resolves to now
        self.last_stable_ms: float | None = None  # for the "reconciliation finished" log line

    # -- KR-4 ---------------------------------------------------------------------------

    @property
    def state(self) -> str:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        epoch = self.assignment_epoch
        for member in self.members.values():
            if not member.is_reconciled_to(epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def is_empty(self) -> bool:
        return not self.members

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def subscribed_names(self, member: ConsumerMember) -> set[str]:
        """The member's topic names: its list plus what its regex resolves to now."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            names |= self.regex_topics.get(member.subscribed_topic_regex, frozenset())
        return names

    def is_subscribed_to(self, topic: str) -> bool:
        return any(topic in self.subscribed_names(m) for m in self.members.values())

    def offset_expiration_base(self) -> str | None:
        """Offsets of a consumer group expire from their commit timestamp (OR-2)."""
        return "commit"

    current_state_timestamp: int | None = None

    def preferred_assignor(self, default: str) -> str:
        """KA-1: the ServerAssignor named by the most members; ties go to the first named (kaflet)."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return default
        return max(counts, key=lambda name: counts[name])

    # -- replay (RL-5) -------------------------------------------------------------------

    def _remove_partition_epochs(self, member: ConsumerMember) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for topic_id, ps in parts.items():
                for p in ps:
                    if self.partition_epochs.get((topic_id, p)) == member.member_epoch:
                        del self.partition_epochs[(topic_id, p)]

    def _add_partition_epochs(self, member: ConsumerMember) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for topic_id, ps in parts.items():
                for p in ps:
                    self.partition_epochs[(topic_id, p)] = member.member_epoch

    def apply_member_metadata(self, member_id: str, value: orec.ConsumerMemberMetadataValue | None) -> None:
        if value is None:
            member = self.members.pop(member_id, None)
            if member is not None:
                self._remove_partition_epochs(member)
                if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                    del self.static_members[member.instance_id]
            return
        member = self.members.get(member_id)
        if member is None:
            member = self.members[member_id] = ConsumerMember(member_id)
        if member.instance_id is not None and member.instance_id != value.instance_id:
            self.static_members.pop(member.instance_id, None)
        member.instance_id = value.instance_id
        member.rack_id = value.rack_id
        member.client_id = value.client_id
        member.client_host = value.client_host
        member.subscribed_topic_names = tuple(value.subscribed_topic_names)
        member.subscribed_topic_regex = value.subscribed_topic_regex
        member.rebalance_timeout_ms = value.rebalance_timeout_ms
        member.server_assignor = value.server_assignor
        member.classic = value.classic
        if value.instance_id is not None:
            self.static_members[value.instance_id] = member_id

    def apply_current_assignment(self, member_id: str, value: orec.CurrentAssignmentValue | None) -> None:
        member = self.members.get(member_id)
        if member is None:
            if value is None:
                return
            member = self.members[member_id] = ConsumerMember(member_id)
        self._remove_partition_epochs(member)
        if value is None:
            # RL-5: a tombstone leaves the member at epoch -1 without partitions.
            member.member_epoch = member.previous_member_epoch = LEAVE_GROUP_MEMBER_EPOCH
            member.assigned, member.pending_revocation = {}, {}
            return
        member.member_epoch = value.member_epoch
        member.previous_member_epoch = value.previous_member_epoch
        member.state = MemberState.of(value.state)
        member.assigned = to_partitions(value.assigned)
        member.pending_revocation = to_partitions(value.pending_revocation)
        self._add_partition_epochs(member)

    def apply_target(self, member_id: str, value: orec.TopicPartitions | None) -> None:
        if value is None:
            self.target.pop(member_id, None)
        else:
            self.target[member_id] = to_partitions(value)
