"""The sticky half of the `lag-aware` assignor: count balance first and lag spread second, reached from
the current assignment with as few partition moves as it can.

`sticky(spec, order, subs, lags, scratch)` starts from every member's current (target) partitions that are
still valid, then:

1. Count balance, per topic (topics in name order): each subscriber may hold `n // width` partitions, and
   `n % width` of them one more; those extras go to the subscribers holding the most now, so that as few
   as possible give any up. A subscriber over its quota gives up partitions (those that bring its total
   lag nearest the group's mean), and the given-up and unowned ones go, the most lagging first, to the
   subscriber below quota with the least total lag. Moves here are the fewest count balance allows.
2. Lag spread: while the spread (max minus min total lag) exceeds the bound below, the most and the least
   loaded members trade within a topic they share: one partition moves (when the giver holds one more of
   that topic than the taker, counts stay balanced) or two swap; the trade that leaves the pair's gap
   smallest is taken, a single move before a swap. It stops when no trade narrows the spread.

The bound: the spread of the from-scratch assignment (the proposal's greedy, or range's layout when
narrower; `scratch`) plus the largest single partition lag. The result is the sticky assignment when it
is within the bound (a current assignment already within it is returned unchanged: no move), else the
from-scratch one; of two within the bound, the one with fewer moves. So the spread is never worse than
the from-scratch result's by more than one partition's lag, and the moves never more than its.
"""

from __future__ import annotations

from bisect import bisect_left

from .base import Assignment, GroupSpec

Owned = list[dict[str, list[int]]]  # member index -> topic -> partitions


def moves_from(spec: GroupSpec, assignment: Assignment) -> int:
    """Partitions assigned to a member that did not hold them in its current assignment."""
    out = 0
    for mid, topics in assignment.items():
        current = spec.members[mid].current
        for t, ps in topics.items():
            out += len(ps) - len(ps & current.get(t, frozenset()))
    return out


def spread_of(assignment: Assignment, lags: dict[str, list[int]]) -> int:
    totals = [sum(lags[t][p] for t, ps in topics.items() for p in ps) for topics in assignment.values()]
    return max(totals) - min(totals) if totals else 0


def sticky(spec: GroupSpec, order: list[str], subs: dict[str, list[int]], lags: dict[str, list[int]], scratch: Assignment) -> Assignment:
    biggest = max((max(v) for v in lags.values() if v), default=0)
    bound = spread_of(scratch, lags) + biggest
    owned, totals = _current(spec, order, subs, lags)
    balanced = all(_balanced(subs[t], owned, t, spec.partitions[t]) for t in subs)
    complete = all(sum(len(owned[i].get(t, ())) for i in subs[t]) == spec.partitions[t] for t in subs)
    if balanced and complete and max(totals) - min(totals) <= bound:
        return _build(order, owned)  # already within the bound: no move
    for topic in sorted(subs):
        _balance_counts(topic, subs[topic], spec.partitions[topic], lags[topic], owned, totals)
    _narrow(subs, lags, owned, totals, bound)
    result = _build(order, owned)
    if max(totals) - min(totals) <= bound and moves_from(spec, result) <= moves_from(spec, scratch):
        return result
    return scratch


def _current(spec: GroupSpec, order: list[str], subs: dict[str, list[int]], lags: dict[str, list[int]]) -> tuple[Owned, list[int]]:
    """Every member's valid current partitions (subscribed, existing, claimed once: the first in member order)."""
    owned: Owned = [{} for _ in order]
    totals = [0] * len(order)
    for t, group in subs.items():
        n = spec.partitions[t]
        claimed = bytearray(n)
        topic_lags = lags[t]
        for i in group:
            mine = []
            for p in sorted(spec.members[order[i]].current.get(t, ())):
                if 0 <= p < n and not claimed[p]:
                    claimed[p] = 1
                    mine.append(p)
                    totals[i] += topic_lags[p]
            if mine:
                owned[i][t] = mine
    return owned, totals


def _balanced(group: list[int], owned: Owned, topic: str, n: int) -> bool:
    counts = [len(owned[i].get(topic, ())) for i in group]
    return max(counts) - min(counts) <= 1


def _balance_counts(topic: str, group: list[int], n: int, topic_lags: list[int], owned: Owned, totals: list[int]) -> None:
    width = len(group)
    q, r = divmod(n, width)
    counts = {i: len(owned[i].get(topic, ())) for i in group}
    # The r extras go to those holding the most now (member order breaks ties): the fewest give any up.
    by_holding = sorted(group, key=lambda i: -counts[i])
    quota = {i: q + (1 if k < r else 0) for k, i in enumerate(by_holding)}
    mean = sum(totals) / len(totals)
    pool: list[int] = []
    held = set()
    for i in group:
        mine = owned[i].get(topic, [])
        held.update(mine)
        excess = len(mine) - quota[i]
        while excess > 0:
            # Give up the partition that brings this member's total nearest the mean.
            want = totals[i] - mean
            k = min(range(len(mine)), key=lambda k: (abs(topic_lags[mine[k]] - want), mine[k]))
            p = mine.pop(k)
            totals[i] -= topic_lags[p]
            pool.append(p)
            excess -= 1
        if not mine:
            owned[i].pop(topic, None)
    pool += [p for p in range(n) if p not in held]
    pool.sort(key=lambda p: (-topic_lags[p], p))
    for p in pool:
        takers = [i for i in group if len(owned[i].get(topic, ())) < quota[i]]
        i = min(takers, key=lambda i: (totals[i], group.index(i)))
        owned[i].setdefault(topic, []).append(p)
        totals[i] += topic_lags[p]


def _narrow(subs: dict[str, list[int]], lags: dict[str, list[int]], owned: Owned, totals: list[int], bound: int) -> None:
    """Trades between the most and the least loaded members while the spread exceeds `bound`."""
    topics_of: list[list[str]] = [[] for _ in totals]
    for t, group in subs.items():
        for i in group:
            topics_of[i].append(t)
    limit = sum(len(v) for v in lags.values()) * 2 + 8
    for _ in range(limit):
        hi = max(range(len(totals)), key=totals.__getitem__)
        lo = min(range(len(totals)), key=totals.__getitem__)
        gap = totals[hi] - totals[lo]
        if gap <= bound:
            return
        best: tuple[int, int, str, int, int | None] | None = None  # (new gap, moves, topic, giver's p, taker's p)
        shared = set(topics_of[hi]) & set(topics_of[lo])
        for t in sorted(shared):
            topic_lags = lags[t]
            give = owned[hi].get(t, [])
            take = owned[lo].get(t, [])
            if not give:
                continue
            if len(give) > len(take):  # a single move keeps the topic's counts balanced
                for p in give:
                    new = abs(gap - 2 * topic_lags[p])
                    if new < gap and (best is None or (new, 1) < best[:2]):
                        best = (new, 1, t, p, None)
            if take:
                theirs = sorted((topic_lags[p], p) for p in take)
                keys = [v for v, _ in theirs]
                for p in give:
                    # The swap moving d = lag(p) - lag(p') from hi to lo is best when d is nearest gap / 2.
                    ideal = topic_lags[p] - gap / 2
                    k = bisect_left(keys, ideal)
                    for j in (k - 1, k):
                        if 0 <= j < len(theirs):
                            d = topic_lags[p] - theirs[j][0]
                            new = abs(gap - 2 * d)
                            if d > 0 and new < gap and (best is None or (new, 2) < best[:2]):
                                best = (new, 2, t, p, theirs[j][1])
        if best is None:
            return
        _, _, t, p, q = best
        topic_lags = lags[t]
        owned[hi][t].remove(p)
        owned[lo].setdefault(t, []).append(p)
        totals[hi] -= topic_lags[p]
        totals[lo] += topic_lags[p]
        if q is not None:
            owned[lo][t].remove(q)
            owned[hi][t].append(q)
            totals[lo] -= topic_lags[q]
            totals[hi] += topic_lags[q]
        if not owned[hi][t]:
            del owned[hi][t]


def _build(order: list[str], owned: Owned) -> Assignment:
    return {mid: {t: frozenset(ps) for t, ps in owned[i].items() if ps} for i, mid in enumerate(order)}
