"""The share groups' server-side assignor, `simple` (Kafka's SimpleAssignor with its homogeneous and
heterogeneous assignment builders).

Share partitions are shared: a partition may go to several members and a member may hold several
partitions. With N members subscribed to P partitions, each partition is shared by
ceil(N / P) members (the desired sharing) and each member holds about sharing * P / N partitions;
a member keeps what it held where that still fits, so assignments move as little as possible.
Only partitions whose share state the share coordinator has initialized are assignable.

Kafka iterates hash maps and hash sets of topic partitions; kaflet iterates in a stable order
(topics by id, partitions and members by index), so which of several equal members takes which
partition may differ from Kafka's while the shape (how many members share each partition, how
many partitions each member gets) is the same.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping

Partitions = dict[uuid.UUID, frozenset[int]]
NAME = "simple"


class AssignorError(Exception):
    """PartitionAssignorException."""


def assign(
    members: Mapping[str, tuple[frozenset[uuid.UUID], Partitions]],
    homogeneous: bool,
    assignable: Mapping[uuid.UUID, frozenset[int]],
    num_partitions: Callable[[uuid.UUID], int],
) -> dict[str, Partitions]:
    """members: member id -> (subscribed topic ids, current target assignment)."""
    if not members:
        return {}
    ids = list(members)
    old = [dict(members[m][1]) for m in ids]
    if homogeneous:
        subscribed = members[ids[0]][0]
        new = _homogeneous(ids, old, subscribed, assignable, num_partitions)
    else:
        subscribed_by = {m: members[m][0] for m in ids}
        new = _heterogeneous(ids, old, subscribed_by, assignable, num_partitions)
    return {ids[i]: {t: frozenset(ps) for t, ps in (new[i] if new[i] is not None else old[i]).items()} for i in range(len(ids))}


def _targets(
    topic_ids: list[uuid.UUID], assignable: Mapping[uuid.UUID, frozenset[int]], num_partitions: Callable[[uuid.UUID], int]
) -> list[tuple[uuid.UUID, int]]:
    out = []
    for topic_id in topic_ids:
        n = num_partitions(topic_id)
        if n == -1:
            raise AssignorError(f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
        allowed = assignable.get(topic_id, frozenset())
        out += [(topic_id, p) for p in range(n) if p in allowed]
    return out


def _desired_counts(n_members: int, sharing: int, n_targets: int) -> list[int]:
    precise = sharing * n_targets / n_members if n_members else 0.0
    return [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(n_members)]


def _copy(a: Partitions | dict[uuid.UUID, set[int]]) -> dict[uuid.UUID, set[int]]:
    return {t: set(ps) for t, ps in a.items()}


def _homogeneous(
    ids: list[str],
    old: list[dict[uuid.UUID, frozenset[int]]],
    subscribed: frozenset[uuid.UUID],
    assignable: Mapping[uuid.UUID, frozenset[int]],
    num_partitions: Callable[[uuid.UUID], int],
) -> list[dict[uuid.UUID, set[int]] | None]:
    n = len(ids)
    new: list[dict[uuid.UUID, set[int]] | None] = [None] * n
    if not subscribed:
        return [{} for _ in range(n)]
    targets = _targets(sorted(subscribed, key=lambda t: t.bytes), assignable, num_partitions)
    sharing = 0 if not targets else (n + len(targets) - 1) // len(targets)
    desired = _desired_counts(n, sharing, len(targets))
    by_partition: dict[tuple[uuid.UUID, int], list[int]] = {}
    by_member: dict[int, list[tuple[uuid.UUID, int]]] = {}
    unfilled: list[int] = []
    overfilled: list[int] = []
    # revokeUnassignablePartitions
    for i in range(n):
        assigned = 0
        for topic_id, parts in sorted(old[i].items(), key=lambda kv: kv[0].bytes):
            if topic_id in subscribed:
                for p in sorted(parts):
                    tp = (topic_id, p)
                    by_partition.setdefault(tp, []).append(i)
                    by_member.setdefault(i, []).append(tp)
                    assigned += 1
                    if assigned >= desired[i] and new[i] is None:
                        new[i] = _copy(old[i])
                continue
            if new[i] is None:
                new[i] = _copy(old[i])
            new[i].pop(topic_id, None)  # type: ignore[union-attr]
        if assigned < desired[i]:
            unfilled.append(i)
        elif assigned > desired[i]:
            overfilled.append(i)
    # revokeOverfilledMembers
    for i in overfilled:
        final = by_member[i]
        while len(final) > desired[i]:
            tp = final.pop(0)
            target = new[i]
            assert target is not None
            parts = target.get(tp[0])
            if parts is not None:
                parts.discard(tp[1])
            by_partition[tp].remove(i)
    # revokeOversharedPartitions
    for tp, assigned_members in list(by_partition.items()):
        count = len(assigned_members)
        if count <= sharing:
            continue
        for i in list(assigned_members):
            if new[i] is None:
                new[i] = _copy(old[i])
            parts = new[i].get(tp[0])  # type: ignore[union-attr]
            if parts is not None and tp[1] in parts:
                parts.discard(tp[1])
                count -= 1
                assigned_members.remove(i)
                by_member[i].remove(tp)
                if i not in unfilled:
                    unfilled.append(i)
            if count <= sharing:
                break
    for tp in targets:
        by_partition.setdefault(tp, [])
    # assignRemainingPartitions
    _fill(by_partition, by_member, unfilled, sharing, lambda i: desired[i], new, old, lambda tp: (tp[0], tp[1]))
    return new


def _fill(
    by_partition: dict,  # type: ignore[type-arg]
    by_member: dict,  # type: ignore[type-arg]
    unfilled: list[int],
    sharing: int,
    desired: Callable[[int], int],
    new: list[dict[uuid.UUID, set[int]] | None],
    old: list[dict[uuid.UUID, frozenset[int]]],
    as_tp: Callable[[object], tuple[uuid.UUID, int]],
) -> None:
    """assignRemainingPartitions: under-shared partitions go round the unfilled members."""
    unfilled.sort()
    if not unfilled:
        return
    pos = 0
    assigned_this_round = False
    for key, members_assigned in by_partition.items():
        if len(members_assigned) < sharing:
            to_make = sharing - len(members_assigned)
            while to_make > 0:
                if pos >= len(unfilled):
                    if not assigned_this_round or not unfilled:
                        break
                    pos = 0
                    assigned_this_round = False
                i = unfilled[pos]
                if i in members_assigned:
                    pos += 1
                    continue
                if new[i] is None:
                    new[i] = _copy(old[i])
                topic_id, p = as_tp(key)
                new[i].setdefault(topic_id, set()).add(p)  # type: ignore[union-attr]
                by_member.setdefault(i, []).append(key)
                members_assigned.append(i)
                to_make -= 1
                assigned_this_round = True
                if len(by_member[i]) >= desired(i):
                    unfilled.pop(pos)
                else:
                    pos += 1
        if not unfilled:
            break


def _heterogeneous(
    ids: list[str],
    old: list[dict[uuid.UUID, frozenset[int]]],
    subscribed_by: dict[str, frozenset[uuid.UUID]],
    assignable: Mapping[uuid.UUID, frozenset[int]],
    num_partitions: Callable[[uuid.UUID], int],
) -> list[dict[uuid.UUID, set[int]] | None]:
    n = len(ids)
    new: list[dict[uuid.UUID, set[int]] | None] = [None] * n
    all_topics: set[uuid.UUID] = set()
    for m in ids:
        all_topics |= subscribed_by[m]
    if not all_topics:
        return [{} for _ in range(n)]
    for topic_id in sorted(all_topics, key=lambda t: t.bytes):
        targets = [p for _, p in _targets([topic_id], assignable, num_partitions)]
        members = [i for i, m in enumerate(ids) if topic_id in subscribed_by[m]]
        sharing = 0 if not targets else (len(members) + len(targets) - 1) // len(targets)
        counts = _desired_counts(len(members), sharing, len(targets))
        desired = {members[k]: counts[k] for k in range(len(members))}
        by_partition: dict[int, list[int]] = {}
        by_member: dict[int, list[int]] = {}
        # revokeUnassignablePartitions (a topic nobody subscribes to is not iterated here)
        for i in range(n):
            parts = old[i].get(topic_id)
            if not parts:
                continue
            for p in sorted(parts):
                by_partition.setdefault(p, []).append(i)
                by_member.setdefault(i, []).append(p)
        # revokeOverfilledMembers
        for i, parts_held in by_member.items():
            want = desired.get(i, 0)
            while len(parts_held) > want:
                p = parts_held.pop(0)
                by_partition[p].remove(i)
                if new[i] is None:
                    new[i] = _copy(old[i])
                new[i].get(topic_id, set()).discard(p)  # type: ignore[union-attr]
        # revokeOversharedPartitions
        for p, assigned_members in list(by_partition.items()):
            count = len(assigned_members)
            if count <= sharing:
                continue
            for i in list(assigned_members):
                if new[i] is None:
                    new[i] = _copy(old[i])
                held = new[i].get(topic_id)  # type: ignore[union-attr]
                if held is not None and p in held:
                    held.discard(p)
                    count -= 1
                    assigned_members.remove(i)
                    by_member[i].remove(p)
                if count <= sharing:
                    break
        for p in targets:
            by_partition.setdefault(p, [])
        unfilled = [i for i in members if len(by_member.get(i, [])) < desired[i]]
        want = desired
        tid = topic_id
        _fill(
            dict(sorted(by_partition.items())),
            by_member,
            unfilled,
            sharing,
            lambda i, want=want: want.get(i, 0),  # type: ignore[misc]
            new,
            old,
            lambda p, tid=tid: (tid, p),  # type: ignore[misc]
        )
    # As in Kafka, partitions of a topic nobody subscribes to any more stay in the target; a member's
    # assignment drops them when it reconciles (filtered by its subscription).
    return new
