"""Hypothesis strategies and checks shared by the assignor tests."""

from __future__ import annotations

import os
from collections.abc import Callable

from hypothesis import strategies as st

from broker.coordinator.assignors import Assignment, GroupSpec, MemberSpec, get

TOPICS = ["t0", "t1", "t2", "t3"]


def examples(n: int) -> int:
    """Hypothesis examples of a property: all of them in `make test`, a fifth in `make test-fast`
    (KAFLET_TEST_FAST=1), the quick loop while editing, where these properties took a third of the time."""
    return max(20, n // 5) if os.environ.get("KAFLET_TEST_FAST") else n


def spec_of(
    subs: dict[str, set[str] | frozenset[str]],
    partitions: dict[str, int],
    current: dict[str, dict[str, frozenset[int]]] | None = None,
    instance: dict[str, str] | None = None,
    lag: Callable[[str, int], int] | None = None,
) -> GroupSpec:
    current = current or {}
    instance = instance or {}
    members = {m: MemberSpec(m, instance.get(m), None, frozenset(ts), current.get(m, {})) for m, ts in subs.items()}
    return GroupSpec("g", members, dict(partitions), lag)


def with_current(spec: GroupSpec, current: Assignment) -> GroupSpec:
    members = {mid: MemberSpec(m.member_id, m.instance_id, m.rack_id, m.topics, current.get(mid, {})) for mid, m in spec.members.items()}
    return GroupSpec(spec.group_id, members, spec.partitions, spec.lag)


@st.composite
def group_specs(draw: st.DrawFn, homogeneous: bool | None = None, max_members: int = 8, max_partitions: int = 24) -> GroupSpec:
    """A group: members (some static), subscriptions, partition counts, lags, and a current assignment.

    The current assignment is the uniform assignor's answer for a previous state of the group (other members,
    other partition counts), as the coordinator would hand it in.
    """
    n_topics = draw(st.integers(1, len(TOPICS)))
    topics = TOPICS[:n_topics]
    partitions = {t: draw(st.integers(1, max_partitions)) for t in topics}
    ids = draw(st.lists(st.text("abcAB\uffff\U00010000", min_size=1, max_size=3), min_size=1, max_size=max_members, unique=True))
    instance = {m: "i" + m for m in ids if draw(st.booleans())}
    homo = draw(st.booleans()) if homogeneous is None else homogeneous
    if homo:
        subs = {m: set(topics) for m in ids}
    else:
        subs = {m: set(draw(st.lists(st.sampled_from(topics), max_size=n_topics, unique=True))) for m in ids}
    lags = {(t, p): draw(st.integers(0, 10**6)) for t in topics for p in range(partitions[t])}
    spec = spec_of(subs, partitions, instance=instance, lag=lambda t, p: lags[(t, p)])
    if draw(st.booleans()):
        # A previous state: a subset of the members plus some gone ones, fewer or more partitions.
        prev_ids = [m for m in ids if draw(st.booleans())] + draw(st.lists(st.sampled_from(["gone1", "gone2"]), unique=True))
        prev_parts = {t: max(1, n + draw(st.integers(-3, 3))) for t, n in partitions.items()}
        prev_subs = {m: subs.get(m, set(topics)) if draw(st.booleans()) else set(topics) for m in prev_ids}
        if prev_subs:
            prev = get("uniform").assign(spec_of(prev_subs, prev_parts))
            spec = with_current(spec, prev)
    return spec


def check_exactly_once(spec: GroupSpec, a: Assignment) -> None:
    """Every partition of every subscribed topic is assigned exactly once, to a member subscribed to it."""
    assert set(a) == set(spec.members)
    seen: dict[tuple[str, int], str] = {}
    for mid, topics in a.items():
        for t, ps in topics.items():
            assert ps, f"empty entry {mid} {t}"
            assert isinstance(ps, frozenset)
            assert t in spec.members[mid].topics, f"{mid} got {t} without subscribing"
            for p in ps:
                assert 0 <= p < spec.partitions[t]
                assert (t, p) not in seen, f"{t}-{p} assigned to {seen[(t, p)]} and {mid}"
                seen[(t, p)] = mid
    expected = {(t, p) for t, n in spec.partitions.items() if any(t in m.topics for m in spec.members.values()) for p in range(n)}
    assert set(seen) == expected


def sizes(a: Assignment) -> dict[str, int]:
    return {mid: sum(len(ps) for ps in topics.values()) for mid, topics in a.items()}


def topic_counts(a: Assignment, topic: str, members: list[str]) -> list[int]:
    return [len(a[m].get(topic, ())) for m in members]
