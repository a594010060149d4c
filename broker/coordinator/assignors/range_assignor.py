"""The `range` assignor (KA-4): consecutive partition ranges per topic, deterministic.

Members are ordered static-first by instance id, then dynamic by member id (Java `String.compareTo`, UTF-16
code-unit order). For each topic with `n` subscribers and `P` partitions, walking its subscribers in that order,
the first `P mod n` get `P // n + 1` partitions and the rest `P // n`, as consecutive ranges from partition 0.
A member that gets no partition of a topic has no entry for it. The current assignment is not consulted
(spec KA-4 pins the exact map; kaflet's range is not sticky).
"""

from __future__ import annotations

from .base import Assignment, Assignor, GroupSpec, range_member_order, subscribed_topics


def range_layout(spec: GroupSpec, order: list[str] | None = None) -> dict[str, list[tuple[str, int, int]]]:
    """Topic -> [(member id, first partition, end partition exclusive)] for members receiving >= 1 partition."""
    if order is None:
        order = range_member_order(spec.members)
    rank = {mid: i for i, mid in enumerate(order)}
    layout: dict[str, list[tuple[str, int, int]]] = {}
    for topic, subs in subscribed_topics(spec).items():
        subs.sort(key=rank.__getitem__)
        total = spec.partitions[topic]
        q, r = divmod(total, len(subs))
        start = 0
        ranges = []
        for i, mid in enumerate(subs):
            size = q + 1 if i < r else q
            if size == 0:
                break
            ranges.append((mid, start, start + size))
            start += size
        layout[topic] = ranges
    return layout


class RangeAssignor(Assignor):
    name = "range"

    def assign(self, spec: GroupSpec) -> Assignment:
        out: Assignment = {mid: {} for mid in spec.members}
        for topic, ranges in range_layout(spec).items():
            for mid, start, end in ranges:
                out[mid][topic] = frozenset(range(start, end))
        return out
