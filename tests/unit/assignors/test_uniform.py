"""KA-3: the uniform assignor, homogeneous and heterogeneous (spec 6.5)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.coordinator.assignors import GroupSpec, get
from tests.unit.assignors.support import check_exactly_once, examples, group_specs, sizes, spec_of, with_current

uniform = get("uniform")


def _valid_current(spec: GroupSpec) -> dict[str, int]:
    """How many of each member's current partitions are still subscribed and exist (currents are disjoint)."""
    out = {}
    for mid, m in spec.members.items():
        out[mid] = sum(1 for t, ps in m.current.items() if t in m.topics and t in spec.partitions for p in ps if p < spec.partitions[t])
    return out


def test_ka_3_homogeneous_example() -> None:
    spec = spec_of({"a": {"foo", "bar"}, "b": {"foo", "bar"}, "c": {"foo", "bar"}}, {"foo": 6, "bar": 5})
    a = uniform.assign(spec)
    check_exactly_once(spec, a)
    assert sorted(sizes(a).values()) == [3, 4, 4]


def test_ka_3_single_member_gets_everything() -> None:
    spec = spec_of({"a": {"foo", "bar"}}, {"foo": 6, "bar": 3})
    assert uniform.assign(spec) == {"a": {"foo": frozenset(range(6)), "bar": frozenset(range(3))}}


def test_ka_3_more_members_than_partitions() -> None:
    spec = spec_of({m: {"foo"} for m in "abcde"}, {"foo": 3})
    a = uniform.assign(spec)
    check_exactly_once(spec, a)
    assert sorted(sizes(a).values()) == [0, 0, 1, 1, 1]
    assert all(topics == {} for topics in a.values() if not topics)


def test_ka_3_new_member_takes_only_from_the_overloaded() -> None:
    # a and b hold 3 each of foo(6); c joins: each of a, b gives up exactly one partition.
    first = uniform.assign(spec_of({"a": {"foo"}, "b": {"foo"}}, {"foo": 6}))
    spec = with_current(spec_of({"a": {"foo"}, "b": {"foo"}, "c": {"foo"}}, {"foo": 6}), first)
    a = uniform.assign(spec)
    check_exactly_once(spec, a)
    assert sizes(a) == {"a": 2, "b": 2, "c": 2}
    assert a["a"]["foo"] <= first["a"]["foo"] and a["b"]["foo"] <= first["b"]["foo"]


def test_ka_3_extra_partition_stays_with_its_holder() -> None:
    # 7 partitions over a, b, c: the member that held 3 keeps its third one (no partition moves needlessly).
    current = {"a": {"foo": frozenset({0, 1})}, "b": {"foo": frozenset({2, 3})}, "c": {"foo": frozenset({4, 5, 6})}}
    spec = spec_of({m: {"foo"} for m in "abc"}, {"foo": 7}, current=current)
    assert uniform.assign(spec) == current


def test_ka_3_unsubscribed_and_vanished_partitions_are_dropped() -> None:
    current = {"a": {"foo": frozenset({0, 1, 9}), "gone": frozenset({0})}, "b": {"foo": frozenset({1, 2})}}
    spec = spec_of({"a": {"foo"}, "b": {"foo"}}, {"foo": 4}, current=current)
    a = uniform.assign(spec)
    check_exactly_once(spec, a)
    assert a["a"]["foo"] == {0, 1}  # foo-1 claimed twice: the first member in member order keeps it
    assert a["b"]["foo"] == {2, 3}


def test_ka_3_heterogeneous_example() -> None:
    # a: foo, b: foo + bar, c: bar. Each topic goes only to its subscribers; sizes even out.
    spec = spec_of({"a": {"foo"}, "b": {"foo", "bar"}, "c": {"bar"}}, {"foo": 4, "bar": 4})
    a = uniform.assign(spec)
    check_exactly_once(spec, a)
    assert sorted(sizes(a).values()) == [2, 3, 3]


def test_ka_3_member_without_existing_topics() -> None:
    spec = spec_of({"a": {"foo"}, "b": set()}, {"foo": 3})
    a = uniform.assign(spec)
    check_exactly_once(spec, a)
    assert a["b"] == {}


def test_ka_3_empty_group_and_no_topics() -> None:
    assert uniform.assign(spec_of({}, {"foo": 3})) == {}
    assert uniform.assign(spec_of({"a": set()}, {})) == {"a": {}}


@settings(max_examples=examples(300), deadline=None)
@given(group_specs())
def test_ka_3_every_partition_exactly_once(spec: GroupSpec) -> None:
    check_exactly_once(spec, uniform.assign(spec))


@settings(max_examples=examples(300), deadline=None)
@given(group_specs(homogeneous=True))
def test_ka_3_homogeneous_balance_and_stickiness(spec: GroupSpec) -> None:
    a = uniform.assign(spec)
    total = sum(spec.partitions.values())
    q, r = divmod(total, len(spec.members))
    got = sorted(sizes(a).values())
    assert got == [q] * (len(got) - r) + [q + 1] * r
    valid = _valid_current(spec)
    for mid, m in spec.members.items():
        kept = sum(len(a[mid].get(t, frozenset()) & ps) for t, ps in m.current.items())
        assert kept >= min(valid[mid], q), f"{mid} kept {kept} of {valid[mid]} (quota {q})"
        if valid[mid] <= q:
            assert kept == valid[mid]


@settings(max_examples=examples(300), deadline=None)
@given(group_specs(homogeneous=False))
def test_ka_3_heterogeneous_balance(spec: GroupSpec) -> None:
    """Balanced as far as subscriptions allow: no partition can move to a subscriber with 2+ fewer partitions."""
    a = uniform.assign(spec)
    check_exactly_once(spec, a)
    size = sizes(a)
    for mid, topics in a.items():
        for t in topics:
            for other, m in spec.members.items():
                if t in m.topics:
                    assert size[mid] - size[other] <= 1, f"{t} could move from {mid} ({size[mid]}) to {other} ({size[other]})"


@settings(max_examples=examples(300), deadline=None)
@given(group_specs())
def test_ka_3_deterministic_and_unchanged_input_unchanged_output(spec: GroupSpec) -> None:
    a = uniform.assign(spec)
    assert uniform.assign(spec) == a
    again = with_current(spec, a)
    assert uniform.assign(again) == a


@settings(max_examples=examples(200), deadline=None)
@given(group_specs(), st.data())
def test_ka_3_garbage_current_assignments_still_exactly_once(spec: GroupSpec, data: st.DataObject) -> None:
    """Overlapping, out-of-range and unsubscribed current partitions never break the invariants."""
    current = {
        mid: {
            t: frozenset(data.draw(st.lists(st.integers(-2, 30), max_size=6)))
            for t in data.draw(st.sets(st.sampled_from(["t0", "t1", "zz"])))
        }
        for mid in spec.members
    }
    spec = with_current(spec, current)
    check_exactly_once(spec, uniform.assign(spec))
