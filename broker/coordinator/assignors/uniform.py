"""The `uniform` assignor (KA-3): balanced, then sticky.

Homogeneous subscriptions (every subscribed topic is subscribed by every member, KA-2), after Kafka's
UniformHomogeneousAssignmentBuilder: with `P` partitions and `N` members each member's quota is `P // N`, and
exactly `P mod N` members get one more. A member keeps its current target partitions up to its quota; what is
left over, and every partition nobody keeps, is handed to members below quota in member order, walking the
partitions by topic name then number.

Heterogeneous subscriptions, after Kafka's UniformHeterogeneousAssignmentBuilder: every member keeps the current
partitions it is still subscribed to; unassigned partitions go, topic by topic (most partitions per subscriber
first, then fewest subscribers, then name), each to the subscriber with the fewest partitions; then, topic by
topic and repeated until nothing moves, partitions move from a topic's most loaded subscriber to its least loaded
one while their sizes differ by more than one (the partitions received last move first, so kept ones stay).

Where kaflet decides (Kafka leaves it open, KA-3 "Impl-defined"): in the homogeneous case the extra partitions go
first to the members that currently hold more than `P // N` valid partitions (in member order), then to the rest
in member order; Kafka gives them to the first `P mod N` members of its member iteration, which can take a
partition away from one member only to hand one to another. A partition claimed in two members' current
assignments (never produced by kaflet itself) stays with the first member in member order.
"""

from __future__ import annotations

import heapq
from fractions import Fraction

from .base import Assignment, Assignor, GroupSpec, subscribed_topics

# Passes over the topics in the heterogeneous balancing phase. Each move strictly lowers the sum of squared
# member sizes, so the loop ends on its own; the bound only caps pathological overlapping subscriptions.
MAX_BALANCE_PASSES = 64


class UniformAssignor(Assignor):
    name = "uniform"

    def assign(self, spec: GroupSpec) -> Assignment:
        members = list(spec.members)
        if not members:
            return {}
        subs = subscribed_topics(spec)
        if not subs:
            return {mid: {} for mid in members}
        if all(len(s) == len(members) for s in subs.values()):
            return _homogeneous(spec, members, sorted(subs))
        return _heterogeneous(spec, members, subs)


def _homogeneous(spec: GroupSpec, members: list[str], topics: list[str]) -> Assignment:
    counts = {t: spec.partitions[t] for t in topics}
    q, r = divmod(sum(counts.values()), len(members))
    claimed = {t: bytearray(n) for t, n in counts.items()}

    # Each member's valid current partitions: subscribed, existing, not claimed by an earlier member.
    valid: list[list[tuple[str, int]]] = []
    for mid in members:
        cur = spec.members[mid].current
        mine: list[tuple[str, int]] = []
        for t in sorted(cur):
            flags = claimed.get(t)
            if flags is None:
                continue
            n = len(flags)
            for p in sorted(cur[t]):
                if 0 <= p < n and not flags[p]:
                    flags[p] = 1
                    mine.append((t, p))
        valid.append(mine)

    # Quotas: the extra partitions go to members already holding more than q, then to the others.
    quota = [q] * len(members)
    extra = r
    for i, mine in enumerate(valid):
        if extra and len(mine) > q:
            quota[i] += 1
            extra -= 1
    for i in range(len(members)):
        if not extra:
            break
        if quota[i] == q:
            quota[i] += 1
            extra -= 1

    out: Assignment = {}
    kept_by_member: list[dict[str, list[int]]] = []
    for i, mine in enumerate(valid):
        keep: dict[str, list[int]] = {}
        for j, (t, p) in enumerate(mine):
            if j < quota[i]:
                keep.setdefault(t, []).append(p)
            else:
                claimed[t][p] = 0  # over quota: back to the pool
        kept_by_member.append(keep)

    unassigned = [(t, p) for t in topics for p, c in enumerate(claimed[t]) if not c]
    pos = 0
    for i, mid in enumerate(members):
        keep = kept_by_member[i]
        room = quota[i] - sum(len(ps) for ps in keep.values())
        if room > 0:
            for t, p in unassigned[pos : pos + room]:
                keep.setdefault(t, []).append(p)
            pos += room
        out[mid] = {t: frozenset(ps) for t, ps in keep.items()}
    if pos != len(unassigned):  # quotas add up to P by construction
        raise AssertionError("uniform: partitions left unassigned")
    return out


def _heterogeneous(spec: GroupSpec, members: list[str], subs_by_name: dict[str, list[str]]) -> Assignment:
    index = {mid: i for i, mid in enumerate(members)}
    counts = spec.partitions
    subs = {t: [index[m] for m in ms] for t, ms in subs_by_name.items()}
    size = [0] * len(members)
    owned: list[dict[str, list[int]]] = [{} for _ in members]
    owner = {t: [-1] * counts[t] for t in subs}

    # 1. Keep every current partition the member is still subscribed to.
    for i, mid in enumerate(members):
        m = spec.members[mid]
        for t in sorted(m.current):
            if t not in m.topics or t not in owner:
                continue
            own = owner[t]
            n = len(own)
            for p in sorted(m.current[t]):
                if 0 <= p < n and own[p] < 0:
                    own[p] = i
                    owned[i].setdefault(t, []).append(p)
                    size[i] += 1

    # Partitions per subscriber, descending, compared exactly: each distinct ratio is ranked once (a Fraction per
    # topic made the sort the assignor's main cost with thousands of topics).
    shapes = {(counts[t], len(s)) for t, s in subs.items()}
    rank = {shape: i for i, shape in enumerate(sorted(shapes, key=lambda c: Fraction(-c[0], c[1])))}
    order = sorted(subs, key=lambda t: (rank[(counts[t], len(subs[t]))], len(subs[t]), t))

    # 2. Hand the unassigned partitions, topic by topic, to the least loaded subscriber.
    for t in order:
        own = owner[t]
        free = [p for p, o in enumerate(own) if o < 0]
        if not free:
            continue
        heap = [(size[i], i) for i in subs[t]]
        heapq.heapify(heap)
        for p in free:
            s, i = heapq.heappop(heap)
            own[p] = i
            owned[i].setdefault(t, []).append(p)
            size[i] = s + 1
            heapq.heappush(heap, (s + 1, i))

    # 3. Balance: move partitions of a topic from its most to its least loaded subscriber until none moves.
    movable = [t for t in order if len(subs[t]) >= 2]
    for _ in range(MAX_BALANCE_PASSES):
        moved = 0
        for t in movable:
            moved += _balance_topic(t, subs[t], size, owned, owner[t])
        if not moved:
            break

    return {mid: {t: frozenset(ps) for t, ps in owned[i].items() if ps} for i, mid in enumerate(members)}


def _balance_topic(t: str, subscribers: list[int], size: list[int], owned: list[dict[str, list[int]]], own: list[int]) -> int:
    lo = [(size[i], i) for i in subscribers]
    hi = [(-size[i], i) for i in subscribers if owned[i].get(t)]
    heapq.heapify(lo)
    heapq.heapify(hi)
    moves = 0
    while hi and lo:
        # Skip stale heap entries (sizes changed since they were pushed).
        while hi and (-hi[0][0] != size[hi[0][1]] or not owned[hi[0][1]].get(t)):
            heapq.heappop(hi)
        while lo and lo[0][0] != size[lo[0][1]]:
            heapq.heappop(lo)
        if not hi or not lo:
            break
        giver, taker = hi[0][1], lo[0][1]
        if size[giver] - size[taker] <= 1:
            break
        p = owned[giver][t].pop()
        owned[taker].setdefault(t, []).append(p)
        own[p] = taker
        size[giver] -= 1
        size[taker] += 1
        moves += 1
        heapq.heappush(lo, (size[giver], giver))
        heapq.heappush(lo, (size[taker], taker))
        if owned[giver][t]:
            heapq.heappush(hi, (-size[giver], giver))
        heapq.heappush(hi, (-size[taker], taker))
    return moves
