"""The `lag-aware` assignor (issue 13): partitions balanced by count first, then by lag.

The proposal's algorithm, per topic (topics in name order), within one group:

1. The coordinator's `lag(topic, partition)` closure (or its `topic_lags(topic, n)`, when it has one) gives each
   partition's lag (log end offset minus the
   group's committed offset; for an uncommitted partition per `lag.aware.uncommitted`). Without a closure every
   lag is 0 and the assignor balances counts only.
2. The topic's partitions are sorted by decreasing lag, ties by partition number.
3. Each in turn goes to the subscribed member with the fewest partitions of that topic; among those, the one with
   the least total assigned lag (over all topics assigned so far); ties by member order as in `range` (KA-4:
   static members by instance id, then dynamic by member id).

Counts per topic therefore differ by at most one between its subscribers. Since counts come first, step 3 runs in
rounds: every subscriber takes one partition per round, the least loaded one the largest partition.

Where kaflet decides: the proposal's greedy is not always at least as good as `range` (two members, lags by
partition [5, 5, 0, 4, 3, 3]: the greedy gives 9 / 11, range's consecutive halves 10 / 10). The issue promises
"never a wider lag spread than range", so after the greedy the assignor also lays out range's assignment and keeps
it when its spread (max minus min total lag per member) is strictly smaller. That is the from-scratch assignment,
a fresh group's.

A group with a current assignment keeps as much of it as it can (issue 26): broker/coordinator/assignors/lag_sticky.py
reaches count balance first and a lag spread within one partition's lag of the from-scratch result's second, with
the fewest moves it finds, and returns the current assignment unchanged when it is already there. The assignor runs
when the target assignment is recomputed (a group epoch bump, `kaflet groups rebalance`), never on lag drift alone.
"""

from __future__ import annotations

from collections import deque
from itertools import accumulate, chain, repeat
from operator import add, sub

from .base import Assignment, Assignor, AssignorError, GroupSpec, range_member_order, topic_subscribers
from .lag_sticky import sticky
from .range_assignor import build, range_layout


def _from_scratch(spec: GroupSpec, order: list[str], subs: dict[str, list[int]], lags_by_topic: dict[str, list[int]]) -> Assignment:
    """The proposal's greedy (or range's layout when narrower), ignoring the current assignment; fills
    `lags_by_topic` with every subscribed topic's partition lags."""
    lag = spec.lag
    # The coordinator's closure also answers a whole topic at once (broker/coordinator/consumer/lag.py).
    bulk = getattr(lag, "topic_lags", None)
    totals = [0] * len(order)  # member index -> total assigned lag
    put = totals.__setitem__
    owned: list[dict] = [{} for _ in order]  # topic -> partitions (a list until the topic is done)
    loaded = False  # some member's total lag is not 0

    for topic in sorted(subs):
        n = spec.partitions[topic]
        if lag is None:
            lags = [0] * n
        else:
            try:
                lags = bulk(topic, n) if bulk is not None else list(map(lag, repeat(topic, n), range(n)))
            except Exception as e:
                raise AssignorError(f"lag of {topic} unavailable: {e!r}") from e
        lags_by_topic[topic] = lags
        # Partitions by decreasing lag, ties by number: a reverse sort keeps equal keys in their original order.
        ordered = sorted(range(n), key=lags.__getitem__, reverse=True)
        group = subs[topic]  # subscribers as indices in range's member order, ascending
        width = len(group)
        if n <= width:
            # One round (the common case): every chosen member gets exactly one partition of the topic. The
            # member dicts are filled by C-level maps: these sets are most of the assignment's cost.
            # (Until some lag is assigned every total is 0: the member order is already the load order.)
            by_load = sorted(group, key=totals.__getitem__)[:n] if loaded else group[:n]
            deque(map(put, by_load, map(add, map(totals.__getitem__, by_load), map(lags.__getitem__, ordered))), maxlen=0)
            singles = _singletons(n)
            deque(map(dict.__setitem__, map(owned.__getitem__, by_load), repeat(topic), map(singles.__getitem__, ordered)), maxlen=0)
            loaded = loaded or any(lags)
            continue
        for start in range(0, n, width):
            # A round: all subscribers hold the same count of this topic, so the next partitions go to them
            # by least total lag, ties by member order (a stable sort of the rank-ordered list).
            chunk = ordered[start : start + width]
            by_load = sorted(group, key=totals.__getitem__)[: len(chunk)]
            deque(map(put, by_load, map(add, map(totals.__getitem__, by_load), map(lags.__getitem__, chunk))), maxlen=0)
            for i, p in zip(by_load, chunk, strict=True):
                mine = owned[i]
                if topic in mine:
                    mine[topic].append(p)
                else:
                    mine[topic] = [p]
        for i in group:
            mine = owned[i]
            mine[topic] = frozenset(mine[topic])  # n > width: every subscriber got some
        loaded = loaded or any(lags)

    spread = max(totals) - min(totals)
    if spread > 0 and len(order) > 1 and _range_spread(spec, subs, lags_by_topic, len(order)) < spread:
        return build(spec, order, range_layout(spec, order, subs))
    return dict(zip(order, owned, strict=True))


class LagAwareAssignor(Assignor):
    name = "lag-aware"

    def assign(self, spec: GroupSpec) -> Assignment:
        order = range_member_order(spec.members)
        if not order:
            return {}
        subs = topic_subscribers(spec, order)
        lags_by_topic: dict[str, list[int]] = {}
        scratch = _from_scratch(spec, order, subs, lags_by_topic)
        if not any(m.current for m in spec.members.values()):
            return scratch
        return sticky(spec, order, subs, lags_by_topic, scratch)


# frozenset({p}) for every partition number seen so far: immutable, so one object serves every assignment.
_SINGLETONS: list[frozenset[int]] = []


def _singletons(n: int) -> list[frozenset[int]]:
    if len(_SINGLETONS) < n:
        _SINGLETONS.extend(map(frozenset, zip(range(len(_SINGLETONS), n))))
    return _SINGLETONS


def _range_spread(spec: GroupSpec, subs: dict[str, list[int]], lags_by_topic: dict[str, list[int]], members: int) -> int:
    """The lag spread of range's layout (KA-4) for the same input, from prefix sums (no assignment built)."""
    totals = [0] * members
    for topic, group in subs.items():
        n = spec.partitions[topic]
        width = min(n, len(group))
        if n <= len(group):  # one partition each for the first n subscribers
            sums = iter(lags_by_topic[topic])
        else:
            q, r = divmod(n, len(group))
            bounds = accumulate(chain(repeat(q + 1, r), repeat(q, width - r)), initial=0)
            prefix = list(accumulate(lags_by_topic[topic], initial=0))
            edges = list(map(prefix.__getitem__, bounds))
            sums = map(sub, edges[1:], edges[:-1])
        if len(group) == members:  # everyone, in order: add the slices at C speed
            totals[:width] = map(add, totals[:width], sums)
        else:
            for i, v in zip(group, sums, strict=False):
                totals[i] += v
    return max(totals) - min(totals)
