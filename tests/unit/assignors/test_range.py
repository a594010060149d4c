"""KA-4: the range assignor, deterministic consecutive ranges (spec 6.5)."""

from __future__ import annotations

from hypothesis import given, settings

from broker.coordinator.assignors import GroupSpec, get
from broker.coordinator.assignors.base import java_string_key, range_member_order
from tests.unit.assignors.support import check_exactly_once, examples, group_specs, spec_of, with_current

range_assignor = get("range")


def test_ka_4_spec_example() -> None:
    spec = spec_of({"a": {"T1", "T2"}, "b": {"T1", "T2"}}, {"T1": 3, "T2": 3})
    assert range_assignor.assign(spec) == {
        "a": {"T1": frozenset({0, 1}), "T2": frozenset({0, 1})},
        "b": {"T1": frozenset({2}), "T2": frozenset({2})},
    }


def test_ka_4_first_join_example_kh_13() -> None:
    spec = spec_of({"m": {"foo", "bar"}}, {"foo": 6, "bar": 3})
    assert range_assignor.assign(spec) == {"m": {"foo": frozenset(range(6)), "bar": frozenset(range(3))}}


def test_ka_4_static_members_first_by_instance_id_then_dynamic_by_member_id() -> None:
    # Insertion order is deliberately scrambled; static z (instance "a") sorts before static a (instance "b").
    subs = {"y": {"t"}, "a": {"t"}, "x": {"t"}, "z": {"t"}}
    spec = spec_of(subs, {"t": 7}, instance={"a": "b", "z": "a"})
    assert range_member_order(spec.members) == ["z", "a", "x", "y"]
    assert range_assignor.assign(spec) == {
        "z": {"t": frozenset({0, 1})},
        "a": {"t": frozenset({2, 3})},
        "x": {"t": frozenset({4, 5})},
        "y": {"t": frozenset({6})},
    }


def test_ka_4_java_string_order_is_utf16_code_units() -> None:
    # U+10000 is the surrogate pair D800 DC00 in UTF-16, which Java orders before U+FFFF (Python would not).
    hi_bmp, astral = "\uffff", "\U00010000"
    assert hi_bmp < astral and java_string_key(astral) < java_string_key(hi_bmp)
    spec = spec_of({hi_bmp: {"t"}, astral: {"t"}}, {"t": 3})
    assert range_assignor.assign(spec) == {astral: {"t": frozenset({0, 1})}, hi_bmp: {"t": frozenset({2})}}


def test_ka_4_member_with_no_partition_has_no_entry() -> None:
    spec = spec_of({"a": {"t", "u"}, "b": {"t", "u"}, "c": {"t"}}, {"t": 2, "u": 1})
    assert range_assignor.assign(spec) == {"a": {"t": frozenset({0}), "u": frozenset({0})}, "b": {"t": frozenset({1})}, "c": {}}


def test_ka_4_heterogeneous_topics_split_among_their_subscribers() -> None:
    spec = spec_of({"a": {"t"}, "b": {"t", "u"}, "c": {"u"}}, {"t": 3, "u": 5})
    assert range_assignor.assign(spec) == {
        "a": {"t": frozenset({0, 1})},
        "b": {"t": frozenset({2}), "u": frozenset({0, 1, 2})},
        "c": {"u": frozenset({3, 4})},
    }


@settings(max_examples=examples(300), deadline=None)
@given(group_specs())
def test_ka_4_layout_properties(spec: GroupSpec) -> None:
    a = range_assignor.assign(spec)
    check_exactly_once(spec, a)
    order = range_member_order(spec.members)
    for t, n in spec.partitions.items():
        subs = [m for m in order if t in spec.members[m].topics]
        if not subs:
            continue
        q, r = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            size = q + 1 if i < r else q
            assert a[m].get(t, frozenset()) == frozenset(range(start, start + size))
            start += size
    # Deterministic and blind to the current assignment and to the members' insertion order.
    assert range_assignor.assign(with_current(spec, a)) == a
    reordered = GroupSpec(spec.group_id, dict(reversed(list(spec.members.items()))), spec.partitions, spec.lag)
    assert range_assignor.assign(reordered) == a
