"""The broker side of reconciliation (6.6, KR-1..KR-3), as Kafka 4.4's CurrentAssignmentBuilder.

`next_assignment` returns the member's next state; it never hands out a partition whose current
epoch is not -1 (still assigned to, or pending revocation by, another member), so no partition
is ever owned twice (KR-3). Partitions of topics the member no longer subscribes to are revoked
at once when its subscription changed, before the next target assignment says so (Kafka 4.x).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from broker.coordinator.consumer.group import ConsumerMember, MemberState, Partitions
from broker.runtime.errors import CoordinatorError
from protocol.errors import ErrorCode

# TopicPartitions reported by the member: [(topic id, [partitions])], or None ("unchanged").
Owned = list[tuple[uuid.UUID, list[int]]] | None
TopicIds = Callable[[], set[uuid.UUID]]


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
    subscribed: TopicIds,
    subscription_changed: bool = False,
) -> ConsumerMember:
    """KR-2: by state; returns `member` itself when nothing changes. `subscribed()` gives the ids of the
    existing topics the member subscribes to (by name or a resolved regex)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _compute(member, member.member_epoch, target_epoch, target, partition_epoch, owned, subscribed())
        if subscription_changed:
            return _update_current(member, member.member_epoch, owned, subscribed())
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            if subscription_changed:
                return _update_current(member, member.member_epoch, owned, subscribed())
            return member
        return _compute(member, member.member_epoch, target_epoch, target, partition_epoch, owned, subscribed())
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _compute(member, member.member_epoch, target_epoch, target, partition_epoch, owned, subscribed())
    # UNKNOWN: only a member that abandoned everything may start over.
    if owned is None or owned:
        raise CoordinatorError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.",
        )
    return _compute(member, target_epoch, target_epoch, target, partition_epoch, owned, subscribed())


def _with_epoch(member: ConsumerMember, epoch: int, **changes: object) -> ConsumerMember:
    # As Kafka's updateMemberEpoch: the previous epoch is the old one even when they are equal.
    out = member.copy(**changes)
    out.previous_member_epoch = member.member_epoch
    out.member_epoch = epoch
    return out


def _update_current(member: ConsumerMember, epoch: int, owned: Owned, subscribed: set[uuid.UUID]) -> ConsumerMember:
    """Kafka's updateCurrentAssignment: the partitions of topics no longer subscribed to go to revocation."""
    assigned = member.assigned
    if not subscribed and not member.pending_revocation:
        new_assigned: Partitions = {}
        pending = assigned
    else:
        gone = [t for t in assigned if t not in subscribed]
        if not gone:
            return member
        new_assigned = {t: ps for t, ps in assigned.items() if t in subscribed}
        pending = dict(member.pending_revocation)
        for t in gone:
            pending[t] = pending.get(t, frozenset()) | assigned[t]
    if pending and owns_any(owned, pending):
        return _with_epoch(member, epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned=new_assigned, pending_revocation=pending)
    return _with_epoch(member, epoch, assigned=new_assigned)


def _compute(
    member: ConsumerMember,
    base_epoch: int,
    target_epoch: int,
    target: Partitions,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Owned,
    subscribed: set[uuid.UUID],
) -> ConsumerMember:
    """KR-1 (Kafka's computeNextAssignment)."""
    unreleased = False
    assigned: Partitions = {}
    revoke: Partitions = {}
    grant: Partitions = {}
    empty: frozenset[int] = frozenset()
    own_pending = member.pending_revocation
    for topic_id in {*target, *member.assigned}:
        want = target.get(topic_id, empty) if topic_id in subscribed else empty
        have = member.assigned.get(topic_id, empty)
        keep = have & want
        gone = have - keep
        pending = want - keep
        if pending:
            mine = own_pending.get(topic_id, empty)
            free = frozenset(p for p in pending if partition_epoch(topic_id, p) == -1 or p in mine)
            if len(free) != len(pending):
                unreleased = True
        else:
            free = empty
        if keep:
            assigned[topic_id] = keep
        if gone:
            revoke[topic_id] = gone
        if free:
            grant[topic_id] = free
    if revoke and owns_any(owned, revoke):
        return _with_epoch(member, base_epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned, pending_revocation=revoke)
    for topic_id, ps in grant.items():
        assigned[topic_id] = assigned.get(topic_id, empty) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with_epoch(member, target_epoch, state=state, assigned=assigned, pending_revocation={})
