"""A consumer (KIP-848) group and its members, exactly the state Kafka's records 3-8 and 16 carry.

Nothing here is changed except by `apply_*`, which the shard's replay calls for every record,
at load and for every live write alike (RL-5): the live path computes records and replays them.

Besides the records' state, a group keeps the indexes Kafka's ConsumerGroup keeps, updated by the
same `apply_*` calls, so that no heartbeat has to walk the members: how many members subscribe to
each topic (by name or through a resolved regular expression) and to each regular expression, how
many name each server assignor, how many use the classic protocol, and how many are not yet
reconciled to the assignment epoch (the group's state, KR-4).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum

from storage import offsets_records as orec

# topic id -> partitions
Partitions = dict[uuid.UUID, frozenset[int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
NO_RESOLVED_REGEX = orec.ResolvedRegex(frozenset(), 0, 0)


def new_member_id() -> str:
    """Kafka's `Uuid.randomUuid().toString()`: 22 characters of URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def regex_of(member: ConsumerMember | None) -> str | None:
    """The member's regular expression, or None when it has none (Kafka treats "" as none)."""
    if member is None:
        return None
    regex = member.subscribed_topic_regex
    return regex if regex else None


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


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    # Kafka's member builder starts at "" (no expression): a heartbeat that sends null keeps it, so a classic
    # member replacing a static one ("" as well) is no change of expression (KM-4), and describe shows "".
    subscribed_topic_regex: str | None = ""
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
        return (
            self.instance_id == other.instance_id
            and self.rack_id == other.rack_id
            and self.client_id == other.client_id
            and self.client_host == other.client_host
            and self.subscribed_topic_names == other.subscribed_topic_names
            and self.subscribed_topic_regex == other.subscribed_topic_regex
            and self.rebalance_timeout_ms == other.rebalance_timeout_ms
            and self.server_assignor == other.server_assignor
            and self.classic == other.classic
        )

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


def _inc(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def _dec(counts: dict[str, int], key: str) -> None:
    n = counts.get(key, 0) - 1
    if n > 0:
        counts[key] = n
    else:
        counts.pop(key, None)


class ConsumerGroup:
    """Group epoch, metadata hash, assignment epoch, members, targets, resolved regexes (6.3, KR-4)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 1  # Kafka 4.4 starts a new group at epoch 1 (ModernGroup), its first member makes it 2
        self.metadata_hash = 0  # of the subscribed topics' metadata (ConsumerGroupMetadataValue's tagged field)
        self.assignment_epoch = 1  # TargetAssignmentMetadata.INITIAL
        self.assignment_timestamp = 0  # when the target was last computed (ms; 0: never, or reset)
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Partitions] = {}  # member id -> target partitions
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}  # KR-3's "current epoch" of a partition
        # Kafka 4.x: regular expression -> the topics it resolved to, with the metadata version and time.
        self.resolved_regexes: dict[str, orec.ResolvedRegex] = {}
        # A (pre-4.1) ConsumerGroupPartitionMetadata record was replayed: the next update tombstones it.
        self.has_subscription_metadata_record = False
        # -- indexes over the members, kept by apply_* (Kafka's ConsumerGroup keeps the same) --
        self.names_by_name: dict[str, int] = {}  # topic -> members naming it
        self.names_by_regex: dict[str, int] = {}  # topic -> resolved regexes matching it
        self.subscribed_regexes: dict[str, int] = {}  # regex -> members subscribing with it
        self.server_assignors: dict[str, int] = {}  # assignor -> members naming it
        self.classic_members = 0
        self._unreconciled = 0  # members not reconciled to assignment_epoch
        # Not persisted: set when a subscribed topic was created, grew or was deleted (KH-8).
        self.metadata_refresh = True
        self.last_stable_ms: float | None = None  # for the "reconciliation finished" log line
        self.last_assignment: dict[str, int] = {}  # the last target computation's moves and lag spread (describe)

    # -- KR-4 ---------------------------------------------------------------------------

    @property
    def state(self) -> str:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if self._unreconciled:
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
        regex = regex_of(member)
        if regex is not None:
            resolved = self.resolved_regexes.get(regex)
            if resolved is not None:
                names |= resolved.topics
        return names

    def subscribed_topics(self) -> set[str]:
        """Every topic a member subscribes to by name or a resolved regex matches (Kafka's subscribedTopicNames)."""
        return self.names_by_name.keys() | self.names_by_regex.keys()

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.names_by_name or topic in self.names_by_regex

    def num_subscribed_members(self, regex: str) -> int:
        return self.subscribed_regexes.get(regex, 0)

    def last_regex_refresh_ms(self) -> int | None:
        """When the regexes were last resolved (they are resolved together), None if never."""
        for resolved in self.resolved_regexes.values():
            return resolved.timestamp
        return None

    def last_regex_version(self) -> int:
        for resolved in self.resolved_regexes.values():
            return resolved.version
        return 0

    def offset_expiration_base(self) -> str | None:
        """Offsets of a consumer group expire from their commit timestamp (OR-2)."""
        return "commit"

    current_state_timestamp: int | None = None

    def preferred_assignor(self, default: str) -> str:
        """KA-1: the ServerAssignor named by the most members; ties go to the first named (kaflet)."""
        counts = self.server_assignors
        if not counts:
            return default
        return max(counts, key=lambda name: counts[name])

    def all_classic_except(self, member_ids: Iterable[str]) -> bool:
        """Whether every member but these uses the classic protocol (KM-4)."""
        excluded = [self.members[m] for m in set(member_ids) if m in self.members]
        consumer_excluded = sum(1 for m in excluded if not m.uses_classic_protocol)
        return len(self.members) - self.classic_members == consumer_excluded

    # -- replay (RL-5) -------------------------------------------------------------------

    def _remove_partition_epochs(self, member: ConsumerMember) -> None:
        epochs = self.partition_epochs
        epoch = member.member_epoch
        for parts in (member.assigned, member.pending_revocation):
            for topic_id, ps in parts.items():
                for p in ps:
                    if epochs.get((topic_id, p)) == epoch:
                        del epochs[(topic_id, p)]

    def _add_partition_epochs(self, member: ConsumerMember) -> None:
        epochs = self.partition_epochs
        epoch = member.member_epoch
        for parts in (member.assigned, member.pending_revocation):
            for topic_id, ps in parts.items():
                for p in ps:
                    epochs[(topic_id, p)] = epoch

    def _unindex(self, member: ConsumerMember) -> None:
        for name in member.subscribed_topic_names:
            _dec(self.names_by_name, name)
        regex = regex_of(member)
        if regex is not None:
            _dec(self.subscribed_regexes, regex)
        if member.server_assignor is not None:
            _dec(self.server_assignors, member.server_assignor)
        if member.classic is not None:
            self.classic_members -= 1

    def _index(self, member: ConsumerMember) -> None:
        for name in member.subscribed_topic_names:
            _inc(self.names_by_name, name)
        regex = regex_of(member)
        if regex is not None:
            _inc(self.subscribed_regexes, regex)
        if member.server_assignor is not None:
            _inc(self.server_assignors, member.server_assignor)
        if member.classic is not None:
            self.classic_members += 1

    def _count_unreconciled(self, member: ConsumerMember, sign: int) -> None:
        if not member.is_reconciled_to(self.assignment_epoch):
            self._unreconciled += sign

    def apply_member_metadata(self, member_id: str, value: orec.ConsumerMemberMetadataValue | None) -> None:
        if value is None:
            member = self.members.pop(member_id, None)
            if member is not None:
                self._unindex(member)
                self._count_unreconciled(member, -1)
                self._remove_partition_epochs(member)
                if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                    del self.static_members[member.instance_id]
            return
        member = self.members.get(member_id)
        if member is None:
            member = self.members[member_id] = ConsumerMember(member_id)
            self._count_unreconciled(member, +1)
        else:
            self._unindex(member)
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
        self._index(member)
        if value.instance_id is not None:
            self.static_members[value.instance_id] = member_id

    def apply_current_assignment(self, member_id: str, value: orec.CurrentAssignmentValue | None) -> None:
        member = self.members.get(member_id)
        if member is None:
            if value is None:
                return
            member = self.members[member_id] = ConsumerMember(member_id)
            self._index(member)
            self._count_unreconciled(member, +1)
        self._count_unreconciled(member, -1)
        self._remove_partition_epochs(member)
        if value is None:
            # RL-5: a tombstone leaves the member at epoch -1 without partitions.
            member.member_epoch = member.previous_member_epoch = LEAVE_GROUP_MEMBER_EPOCH
            member.assigned, member.pending_revocation = {}, {}
        else:
            member.member_epoch = value.member_epoch
            member.previous_member_epoch = value.previous_member_epoch
            member.state = MemberState.of(value.state)
            member.assigned = to_partitions(value.assigned)
            member.pending_revocation = to_partitions(value.pending_revocation)
            self._add_partition_epochs(member)
        self._count_unreconciled(member, +1)

    def apply_target(self, member_id: str, value: orec.TopicPartitions | None) -> None:
        if value is None:
            self.target.pop(member_id, None)
        else:
            self.target[member_id] = to_partitions(value)

    def set_target(self, member_id: str, partitions: Partitions) -> None:
        """apply_target of a record this coordinator just wrote from `partitions` (no decoding)."""
        self.target[member_id] = {t: ps for t, ps in partitions.items() if ps}

    def apply_target_metadata(self, epoch: int, timestamp: int) -> None:
        if epoch != self.assignment_epoch:
            self.assignment_epoch = epoch
            epoch_now = self.assignment_epoch
            self._unreconciled = sum(1 for m in self.members.values() if not m.is_reconciled_to(epoch_now))
        self.assignment_timestamp = timestamp

    def apply_resolved_regex(self, regex: str, resolved: orec.ResolvedRegex | None) -> None:
        old = self.resolved_regexes.pop(regex, None)
        if old is not None:
            for topic in old.topics:
                _dec(self.names_by_regex, topic)
        if resolved is not None:
            self.resolved_regexes[regex] = resolved
            for topic in resolved.topics:
                _inc(self.names_by_regex, topic)
