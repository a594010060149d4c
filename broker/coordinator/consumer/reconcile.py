"""The broker side of reconciliation (6.6, KR-1..KR-3), as Kafka's CurrentAssignmentBuilder.

`next_assignment` returns the member's next state; it never hands out a partition whose current
epoch is not -1 (still assigned to, or pending revocation by, another member), so no partition
is ever owned twice (KR-3).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from broker.coordinator.consumer.group import ConsumerMember, MemberState, Partitions
from broker.runtime.errors import CoordinatorError
from protocol.errors import ErrorCode

# TopicPartitions reported by the member: [(topic id, [partitions])], or None ("unchanged").
Owned = list[tuple[uuid.UUID, list[int]]] | None


def owns_any(owned: Owned, parts: Partitions) -> bool:
    """Whether the member still reports owning any of `parts` (a null report counts as yes)."""
    if owned is None:
        return True
    for topic_id, ps in owned:
        pending = parts.get(topic_id)
        if pending and any(p in pending for p in ps):
            return True
    return False


def next_assignment(
    member: ConsumerMember,
    target_epoch: int,
    target: Partitions,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Owned,
) -> ConsumerMember:
    """KR-2: by state; returns `member` itself when nothing changes."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _compute(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return member
        return _compute(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _compute(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    # UNKNOWN: only a member that abandoned everything may start over.
    if owned is None or owned:
        raise CoordinatorError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.",
        )
    return _compute(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _with_epoch(member: ConsumerMember, epoch: int, **changes: object) -> ConsumerMember:
    # As Kafka's updateMemberEpoch: the previous epoch is the old one even when they are equal.
    out = member.copy(**changes)
    out.previous_member_epoch = member.member_epoch
    out.member_epoch = epoch
    return out


def _compute(
    member: ConsumerMember,
    base_epoch: int,
    target_epoch: int,
    target: Partitions,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Owned,
) -> ConsumerMember:
    """KR-1."""
    unreleased = False
    assigned: Partitions = {}
    revoke: Partitions = {}
    grant: Partitions = {}
    for topic_id in {*target, *member.assigned}:
        want = target.get(topic_id, frozenset())
        have = member.assigned.get(topic_id, frozenset())
        keep = have & want
        gone = have - keep
        pending = want - keep
        free = frozenset(p for p in pending if partition_epoch(topic_id, p) == -1)
        if len(free) != len(pending):
            unreleased = True
        if keep:
            assigned[topic_id] = keep
        if gone:
            revoke[topic_id] = gone
        if free:
            grant[topic_id] = free
    if revoke and owns_any(owned, revoke):
        return _with_epoch(member, base_epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned, pending_revocation=revoke)
    if grant:
        for topic_id, ps in grant.items():
            assigned[topic_id] = assigned.get(topic_id, frozenset()) | ps
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return _with_epoch(member, target_epoch, state=state, assigned=assigned, pending_revocation={})
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with_epoch(member, target_epoch, state=state, assigned=assigned, pending_revocation={})
