"""Rack-aware assignment as Kafka 4.4's server-side assignors do it (issue 26, part "rack-aware assignment").

Kafka 4.4's `uniform` (UniformHomogeneous/HeterogeneousAssignmentBuilder) and `range` (RangeAssignor) receive
each member's RackId and each partition's replica racks (SubscribedTopicDescriber.racksForPartition) and read
neither: a member's rack never moves a partition. Racks act through the subscription's metadata hash only (a
change of replica placement bumps the group epoch; tests/conformance/consumer/test_racks.py). kaflet hands
both to its assignors and, as Kafka, `uniform` and `range` give the same answer with or without them.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.coordinator.assignors import GroupSpec, MemberSpec, get
from tests.unit.assignors.support import group_specs, spec_of

RACKS = ["r0", "r1", "r2"]


def with_racks(spec: GroupSpec, member_racks: dict[str, str | None], partition_racks: dict[tuple[str, int], frozenset[str]]) -> GroupSpec:
    members = {mid: MemberSpec(m.member_id, m.instance_id, member_racks.get(mid), m.topics, m.current) for mid, m in spec.members.items()}
    return GroupSpec(spec.group_id, members, spec.partitions, spec.lag, racks=lambda t, p: partition_racks.get((t, p), frozenset()))


def test_kafka_4_4_uniform_and_range_keep_partitions_off_their_replicas_racks() -> None:
    """Every partition a member gets is placed on the other member's rack: a rack-aware assignor (Kafka 3.x's
    client-side ones, or the KIP-848 design's first draft) would swap them all; Kafka 4.4's do not."""
    for name in ("uniform", "range"):
        plain = spec_of({"a": {"t"}, "b": {"t"}}, {"t": 4})
        before = get(name).assign(plain)
        other = {"a": "r1", "b": "r0"}
        placement = {("t", p): frozenset({other[mid]}) for mid, topics in before.items() for p in topics.get("t", ())}
        racked = with_racks(plain, {"a": "r0", "b": "r1"}, placement)
        assert get(name).assign(racked) == before, name


@settings(max_examples=150, deadline=None)
@given(group_specs(), st.data())
def test_kafka_4_4_uniform_and_range_ignore_member_and_replica_racks(spec: GroupSpec, data: st.DataObject) -> None:
    member_racks = {mid: data.draw(st.sampled_from([None, *RACKS])) for mid in spec.members}
    partition_racks = {
        (t, p): frozenset(data.draw(st.lists(st.sampled_from(RACKS), max_size=3))) for t, n in spec.partitions.items() for p in range(n)
    }
    racked = with_racks(spec, member_racks, partition_racks)
    for name in ("uniform", "range"):
        assert get(name).assign(racked) == get(name).assign(spec), name
