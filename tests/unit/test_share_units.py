"""Share groups' pure parts (KIP-932): the `simple` assignor's shapes, the share coordinator's
state-batch combiner (Kafka's PersisterStateBatchCombiner), and the record codecs refusing what
is not a record. The protocol and records against Kafka 4.4 are in tests/differential/."""

from __future__ import annotations

import uuid

import pytest

from broker.coordinator.share import assignor
from broker.share.coordinator.combiner import combine_state_batches
from broker.share.coordinator.service import coordinator_key, kafka_uuid, parse_coordinator_key, parse_kafka_uuid
from storage import share_group_records as sg
from storage import share_state_records as ss
from storage.offsets_records import RecordFormatError

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
B = ss.StateBatch
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


def _assign(
    members: dict[str, tuple[set[uuid.UUID], dict[uuid.UUID, set[int]]]], sizes: dict[uuid.UUID, int], homogeneous: bool = True
) -> dict[str, dict[uuid.UUID, set[int]]]:
    specs = {m: (frozenset(subs), {t: frozenset(ps) for t, ps in cur.items()}) for m, (subs, cur) in members.items()}
    assignable = {t: frozenset(range(n)) for t, n in sizes.items()}
    out = assignor.assign(specs, homogeneous, assignable, lambda t: sizes.get(t, -1))
    return {m: {t: set(ps) for t, ps in a.items() if ps} for m, a in out.items()}


def test_more_members_than_partitions_share_them() -> None:
    out = _assign({f"m{i}": ({T1}, {}) for i in range(4)}, {T1: 1})
    assert all(a == {T1: {0}} for a in out.values())


def test_partitions_spread_evenly_and_each_once_when_members_are_fewer() -> None:
    out = _assign({"a": ({T1}, {}), "b": ({T1}, {})}, {T1: 5})
    counts = sorted(len(a[T1]) for a in out.values())
    assert counts == [2, 3] and out["a"][T1] | out["b"][T1] == set(range(5)) and not out["a"][T1] & out["b"][T1]


def test_a_joining_member_takes_partitions_without_moving_the_rest() -> None:
    before = _assign({"a": ({T1}, {}), "b": ({T1}, {})}, {T1: 4})
    after = _assign({"a": ({T1}, before["a"]), "b": ({T1}, before["b"]), "c": ({T1}, {})}, {T1: 4})
    for m in ("a", "b"):
        assert after[m][T1] <= before[m][T1]  # kept what still fits
    assert set().union(*(a[T1] for a in after.values())) == set(range(4)) and after["c"][T1]


def test_heterogeneous_members_get_only_their_topics() -> None:
    out = _assign({"a": ({T1}, {}), "b": ({T2}, {}), "c": ({T1, T2}, {})}, {T1: 2, T2: 2}, homogeneous=False)
    assert set(out["a"]) == {T1} and set(out["b"]) == {T2}
    covered = {(t, p) for a in out.values() for t, ps in a.items() for p in ps}
    assert covered == {(T1, 0), (T1, 1), (T2, 0), (T2, 1)}


def test_only_initialized_partitions_are_assigned_and_unknown_topics_fail() -> None:
    specs = {"a": (frozenset({T1}), {})}
    out = assignor.assign(specs, True, {T1: frozenset({1})}, lambda t: 3)
    assert out["a"] == {T1: frozenset({1})}
    with pytest.raises(assignor.AssignorError, match="doesn't exist in the topic metadata"):
        assignor.assign(specs, True, {T1: frozenset({0})}, lambda t: -1)


def test_combiner_higher_delivery_count_then_state_wins_and_neighbours_coalesce() -> None:
    so_far = [B(0, 9, AVAILABLE, 1)]
    new = [B(3, 5, ACKNOWLEDGED, 1), B(4, 4, AVAILABLE, 2), B(8, 12, ARCHIVED, 1)]
    assert combine_state_batches(so_far, new, -1) == [
        B(0, 2, AVAILABLE, 1),
        B(3, 3, ACKNOWLEDGED, 1),
        B(4, 4, AVAILABLE, 2),
        B(5, 5, ACKNOWLEDGED, 1),
        B(6, 7, AVAILABLE, 1),
        B(8, 12, ARCHIVED, 1),
    ]


def test_combiner_prunes_below_the_start_offset() -> None:
    assert combine_state_batches([B(0, 4, ACKNOWLEDGED, 1), B(5, 9, AVAILABLE, 1)], [], 7) == [B(7, 9, AVAILABLE, 1)]
    assert combine_state_batches([B(0, 4, ACKNOWLEDGED, 1)], [B(5, 9, ACKNOWLEDGED, 1)], -1) == [B(0, 9, ACKNOWLEDGED, 1)]


def test_share_coordinator_keys_as_kafka_parses_them() -> None:
    key = coordinator_key("a:b", T1, 3)
    assert parse_coordinator_key(key) == ("a:b", T1, 3)
    assert parse_coordinator_key(key + ":") == ("a:b", T1, 3)  # Java's split drops trailing empties
    assert parse_kafka_uuid(kafka_uuid(T2) + "==") == T2
    for bad in (
        "",
        "g:t",
        f"g:{kafka_uuid(T1)}:x",
        f" :{kafka_uuid(T1)}:0",
        f"g:{kafka_uuid(T1)}: 1",
        f"g:{kafka_uuid(T1)}:1_0",
        "g:AAAA:0",
        f"g:{'A' * 25}:0",
    ):
        with pytest.raises(ValueError):
            parse_coordinator_key(bad)


def test_codecs_round_trip_and_refuse_what_is_not_a_record() -> None:
    key = ss.share_key(ss.SHARE_UPDATE_KEY, "g", T1, 0)
    update = ss.ShareUpdate(0, 1, 5, 2, [B(5, 6, ACKNOWLEDGED, 1)])
    value = ss.share_update_value(update)
    assert ss.parse_share_key(key) == (ss.SHARE_UPDATE_KEY, "g", T1, 0)
    assert ss.parse_share_update_value(value) == update
    member = sg.share_group_key(sg.SHARE_GROUP_MEMBER_METADATA_KEY, "g", "m")
    assert sg.parse_share_group_key(member) == (sg.SHARE_GROUP_MEMBER_METADATA_KEY, "g", "m")
    for broken in (key[:-1], key + b"x", b"\x00\x07" + key[2:]):
        with pytest.raises(RecordFormatError):
            ss.parse_share_key(broken)
    with pytest.raises(RecordFormatError):
        ss.parse_share_update_value(value[:-3])
    with pytest.raises(RecordFormatError):
        sg.parse_share_group_key(member[:-1])
    with pytest.raises(ValueError):
        sg.share_group_key(sg.SHARE_GROUP_METADATA_KEY, "g", "m")  # type 11 takes no member id
