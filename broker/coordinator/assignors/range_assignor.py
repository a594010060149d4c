"""The `range` assignor (KA-4): consecutive partition ranges per topic, deterministic.

Members are ordered static-first by instance id, then dynamic by member id (Java `String.compareTo`, UTF-16
code-unit order). For each topic with `n` subscribers and `P` partitions, walking its subscribers in that order,
the first `P mod n` get `P // n + 1` partitions and the rest `P // n`, as consecutive ranges from partition 0.
A member that gets no partition of a topic has no entry for it. The current assignment is not consulted
(spec KA-4 pins the exact map; kaflet's range is not sticky).
"""

from __future__ import annotations

from .base import Assignment, Assignor, GroupSpec, range_member_order, topic_subscribers


def range_layout(spec: GroupSpec, order: list[str], subs: dict[str, list[int]] | None = None) -> dict[str, list[tuple[int, int, int]]]:
    """Topic -> [(index in `order`, first partition, end partition exclusive)] for members receiving >= 1 partition."""
    if subs is None:
        subs = topic_subscribers(spec, order)
    layout: dict[str, list[tuple[int, int, int]]] = {}
    for topic, group in subs.items():
        total = spec.partitions[topic]
        q, r = divmod(total, len(group))
        ranges = []
        start = 0
        for k, i in enumerate(group[: min(total, len(group))]):
            end = start + (q + 1 if k < r else q)
            ranges.append((i, start, end))
            start = end
        layout[topic] = ranges
    return layout


def build(spec: GroupSpec, order: list[str], layout: dict[str, list[tuple[int, int, int]]]) -> Assignment:
    out: Assignment = {mid: {} for mid in spec.members}
    for topic, ranges in layout.items():
        for i, start, end in ranges:
            out[order[i]][topic] = frozenset(range(start, end))
    return out


class RangeAssignor(Assignor):
    name = "range"

    def assign(self, spec: GroupSpec) -> Assignment:
        order = range_member_order(spec.members)
        return build(spec, order, range_layout(spec, order))
