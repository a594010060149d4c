"""The server-side assignor interface (KIP-848 consumer groups, spec 6.5 KA-1..KA-4).

The coordinator resolves each member's subscription to existing topic names and hands an assignor one
`GroupSpec`; the assignor answers a whole target `Assignment`. Assignors are pure and stateless: the same
`GroupSpec` (same member order) always gives the same `Assignment`.

Shared helpers live here too: the member order of `range` (KA-4), which `lag-aware` reuses for its ties, and the
lag spread used by the lag-aware assignor, the coordinator's log line and the benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# member id -> topic name -> partitions. Every member of the GroupSpec has an entry (possibly {}); a topic a
# member receives no partition of has no entry.
Assignment = dict[str, dict[str, frozenset[int]]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    topics: frozenset[str]  # subscribed topic names that exist (already resolved: names + regex)
    # the member's current target assignment (stickiness input); empty for a new member
    current: Mapping[str, frozenset[int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupSpec:
    group_id: str
    members: Mapping[str, MemberSpec]  # in the group's member order (insertion order)
    partitions: Mapping[str, int]  # topic name -> partition count, for every subscribed topic that exists
    # lag of (topic, partition) for this group; None when the coordinator offers none. Only lag-aware reads it.
    lag: Callable[[str, int], int] | None = None
    # The racks of (topic, partition)'s replicas (Kafka's SubscribedTopicDescriber.racksForPartition): empty
    # without racks; None when the coordinator offers none. Kafka 4.4's uniform and range do not read it.
    racks: Callable[[str, int], frozenset[str]] | None = None


class AssignorError(Exception):
    """The assignor could not compute an assignment; the coordinator answers UNKNOWN_SERVER_ERROR (KH-9)."""


class Assignor:
    """One module per assignor, each a subclass registered by name in `assignors.ASSIGNORS`."""

    name: str = ""

    def assign(self, spec: GroupSpec) -> Assignment:  # pragma: no cover - abstract
        raise NotImplementedError


def java_string_key(s: str) -> bytes:
    """Sort key equal to Java's `String.compareTo`: UTF-16 code-unit order.

    Python compares code points, which differs from UTF-16 code units for characters above U+FFFF (surrogates,
    0xD800..0xDFFF) against U+E000..U+FFFF. Big-endian UTF-16 bytes compare exactly like the code units.
    """
    return s.encode("utf-16-be", "surrogatepass")


def range_member_order(members: Mapping[str, MemberSpec]) -> list[str]:
    """KA-4's member order: static members by instance id, then dynamic members by member id (Java order)."""
    statics = [(m.instance_id, mid) for mid, m in members.items() if m.instance_id is not None]
    dynamics = [mid for mid, m in members.items() if m.instance_id is None]
    # Python's code-point order equals UTF-16 code-unit order for ASCII (the usual ids): skip the encoding then.
    if all(mid.isascii() for mid in members) and all(iid.isascii() for iid, _ in statics):
        statics.sort()
        dynamics.sort()
    else:
        statics.sort(key=lambda s: (java_string_key(s[0]), java_string_key(s[1])))
        dynamics.sort(key=java_string_key)
    return [mid for _, mid in statics] + dynamics


def subscribed_topics(spec: GroupSpec) -> dict[str, list[str]]:
    """Topic -> its subscribers in the group's member order, for topics that exist and have partitions."""
    mids = list(spec.members)
    return {t: [mids[i] for i in idx] for t, idx in topic_subscribers(spec, mids).items()}


def topic_subscribers(spec: GroupSpec, order: list[str]) -> dict[str, list[int]]:
    """Topic -> the indices in `order` of its subscribers, ascending, for topics that exist and have partitions.

    With homogeneous subscriptions every topic shares one list: callers must not mutate it.
    """
    parts = spec.partitions
    members = spec.members
    topic_sets = {m.topics for m in members.values()}
    if len(topic_sets) == 1:
        everyone = list(range(len(order)))
        return {t: everyone for t in sorted(topic_sets.pop()) if parts.get(t, 0) > 0}
    subs: dict[str, list[int]] = {}
    for i, mid in enumerate(order):
        for t in members[mid].topics:
            if parts.get(t, 0) > 0:
                subs.setdefault(t, []).append(i)
    return subs


def member_lags(assignment: Assignment, lag: Callable[[str, int], int] | None) -> dict[str, int]:
    """Total lag each member is assigned (0 for all when no lag is offered)."""
    out: dict[str, int] = {}
    for mid, topics in assignment.items():
        total = 0
        if lag is not None:
            for t, ps in topics.items():
                for p in ps:
                    total += lag(t, p)
        out[mid] = total
    return out


def lag_spread(assignment: Assignment, lag: Callable[[str, int], int] | None) -> int:
    """Max minus min total assigned lag over the members (0 for an empty group)."""
    totals = member_lags(assignment, lag)
    return max(totals.values()) - min(totals.values()) if totals else 0
