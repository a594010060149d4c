"""A share group (KIP-932) and its members, exactly the state Kafka's share-group records (types
10-15 of `__consumer_offsets`) carry: Kafka's ShareGroup and ShareGroupMember.

Nothing here changes except through `ShareGroupManager.replay` (broker/coordinator/share/manager.py),
at load and for every live write alike.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from broker.coordinator.consumer.group import MemberState
from storage import offsets_records as orec

# topic id -> partitions
Partitions = dict[uuid.UUID, frozenset[int]]

PROTOCOL_TYPE = "share"
LEAVE_GROUP_MEMBER_EPOCH = -1


class ShareGroupState:
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"
    ALL = ("Empty", "Stable")


def to_partitions(items: orec.TopicPartitions) -> Partitions:
    return {topic_id: frozenset(parts) for topic_id, parts in items}


def from_partitions(parts: Partitions) -> orec.TopicPartitions:
    """Record order: topics and partitions sorted, so equal states write equal bytes."""
    return [(topic_id, sorted(ps)) for topic_id, ps in sorted(parts.items(), key=lambda kv: kv[0].bytes)]


@dataclass
class ShareMember:
    """ShareGroupMember: a new one is at epoch 0, previous epoch -1, STABLE, without partitions."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    assigned: Partitions = field(default_factory=dict)

    def copy(self) -> ShareMember:
        return ShareMember(
            self.member_id,
            self.member_epoch,
            self.previous_member_epoch,
            self.state,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
            dict(self.assigned),
        )

    def same_metadata(self, other: ShareMember) -> bool:
        """What ShareGroupMemberMetadata holds (and equals() compares besides the assignment)."""
        return (
            self.rack_id == other.rack_id
            and self.client_id == other.client_id
            and self.client_host == other.client_host
            and self.subscribed_topic_names == other.subscribed_topic_names
        )

    def same(self, other: ShareMember) -> bool:
        return (
            self.same_metadata(other)
            and self.member_epoch == other.member_epoch
            and self.previous_member_epoch == other.previous_member_epoch
            and self.state == other.state
            and self.assigned == other.assigned
        )

    def reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch


@dataclass
class InitInfo:
    """ShareGroup.InitMapValue: a topic's partitions in one of the state-partition maps."""

    name: str
    partitions: frozenset[int]
    timestamp: int


@dataclass
class StatePartitions:
    """ShareGroupStatePartitionMetadataInfo: which partitions have share state (initialized), are
    being initialized, or are being deleted."""

    initializing: dict[uuid.UUID, InitInfo] = field(default_factory=dict)
    initialized: dict[uuid.UUID, InitInfo] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # Kafka 4.4's ModernGroup starts at group epoch 1 and target assignment epoch 1 (the first bump makes 2).
        self.group_epoch = 1
        self.metadata_hash = 0
        self.assignment_epoch = 1
        self.assignment_timestamp = 0
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, Partitions] = {}
        # Soft state (Kafka's metadataRefreshDeadline): recompute the metadata hash at the next heartbeat.
        self.metadata_refresh = True
        self.created_ms = 0

    @property
    def state(self) -> str:
        return ShareGroupState.EMPTY if not self.members else ShareGroupState.STABLE

    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def protocol_type(self) -> str:
        return PROTOCOL_TYPE

    def subscribed_topic_names(self, members: dict[str, ShareMember] | None = None) -> dict[str, int]:
        """Topic name -> how many members subscribe to it."""
        counts: dict[str, int] = {}
        for m in (members if members is not None else self.members).values():
            for name in m.subscribed_topic_names:
                counts[name] = counts.get(name, 0) + 1
        return counts

    def subscription_homogeneous(self, members: dict[str, ShareMember]) -> bool:
        """ModernGroup.subscriptionType: every member subscribes to the same topics."""
        subs = {m.subscribed_topic_names for m in members.values()}
        return len(subs) <= 1

    def is_subscribed_to(self, topic: str) -> bool:
        return any(topic in m.subscribed_topic_names for m in self.members.values())
