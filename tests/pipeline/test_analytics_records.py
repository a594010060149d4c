"""The analytics' record decoding and the consumer-group replay, without Spark: what every
`__consumer_offsets` record becomes, and that a record that does not decode is skipped, never
fatal (an analytics job runs over logs other broker versions wrote)."""

from __future__ import annotations

import struct
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.analytics import offsets_log as ol
from pipeline.analytics.audit import HEADER_OFFSET, HEADER_PARTITION, HEADER_TOPIC, source_headers
from pipeline.analytics.lookups import _rounds
from pipeline.analytics.timeline import _ConsumerGroup
from storage import offsets_records as orec


def assignment(version: int, parts: dict[str, list[int]], user_data: bytes = b"") -> bytes:
    out = struct.pack(">hi", version, len(parts))
    for topic, ps in parts.items():
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", len(user_data)) + user_data


def subscription(topics: list[str]) -> bytes:
    out = struct.pack(">hi", 1, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def test_an_offset_commit_decodes_with_its_commit_time() -> None:
    key = orec.offset_commit_key("g", "orders", 3)
    row = ol.decode_commit(key, orec.offset_commit_value(42, 7, "meta", 1_700_000_000_123))
    assert row == {
        "group": "g",
        "topic": "orders",
        "partition": 3,
        "committed_offset": 42,
        "leader_epoch": 7,
        "metadata": "meta",
        "commit_time_ms": 1_700_000_000_123,
    }
    # v1 with an expire timestamp, and a v0 key (same layout)
    v1 = orec.offset_commit_value(5, -1, "x", 10, expire_timestamp=99)
    assert ol.decode_commit(key, v1)["committed_offset"] == 5
    assert ol.decode_commit(b"\x00\x00" + key[2:], v1)["group"] == "g"


@pytest.mark.parametrize(
    "key,value",
    [
        (None, b"\x00\x03"),
        (b"\x00", b""),
        (orec.offset_commit_key("g", "t", 0), None),  # a deleted or expired offset: no commit
        (orec.offset_commit_key("g", "t", 0), b"\x00\x09" + b"\x00" * 30),  # a future version
        (orec.offset_commit_key("g", "t", 0), orec.offset_commit_value(1, 0, "", 1)[:-3]),  # truncated
        (orec.offset_commit_key("g", "t", 0)[:-2], orec.offset_commit_value(1, 0, "", 1)),  # key too short
        (b"\x00\x01\x00\x02\xff\xfe\x00\x01t\x00\x00\x00\x00", orec.offset_commit_value(1, 0, "", 1)),  # group not UTF-8
        (orec.group_metadata_key("g"), orec.offset_commit_value(1, 0, "", 1)),  # another record type
    ],
)
def test_what_is_not_a_decodable_commit_is_skipped(key: bytes | None, value: bytes | None) -> None:
    assert ol.decode_commit(key, value) is None


def test_group_metadata_decodes_members_subscriptions_and_assignments() -> None:
    members = [
        orec.MemberMetadata("m-2", "static-2", "c2", "/10.0.0.2", 60000, 10000, subscription(["b", "a"]), assignment(3, {"a": [2, 0]})),
        orec.MemberMetadata("m-1", None, "c1", "/10.0.0.1", 60000, 10000, subscription(["a"]), b""),
    ]
    value = orec.group_metadata_value(orec.GroupMetadataValue("consumer", 4, "range", "m-2", 1_700_000_000_000, members))
    row = ol.decode_group(orec.group_metadata_key("g"), value)
    assert row is not None and row["generation"] == 4 and row["protocol"] == "range" and row["leader"] == "m-2"
    assert row["current_state_time_ms"] == 1_700_000_000_000 and not row["deleted"]
    assert row["members"][0]["subscription"] == ["a", "b"] and row["members"][0]["group_instance_id"] == "static-2"
    assert row["members"][0]["assignment"] == [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 2}]
    assert row["members"][1]["assignment"] == []  # not stored (a member that joined after the sync)
    assert ol.decode_group(orec.group_metadata_key("g"), None) == {"group": "g", "deleted": True, "members": []}


def test_group_metadata_of_another_protocol_type_keeps_its_bytes_undecoded() -> None:
    m = orec.MemberMetadata("m", None, "c", "/h", 1, 1, b"\x01\x02", b"\x03")
    row = ol.decode_group(orec.group_metadata_key("g"), orec.group_metadata_value(orec.GroupMetadataValue("connect", 1, "p", "m", -1, [m])))
    assert row is not None and row["members"][0]["subscription"] is None and row["members"][0]["assignment"] is None


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x00\x00\x00\x00\x01\x00\x05ab",
        b"\x00",
        b"\x00\x00\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x05\x00\x00\x00\x01",
        b"\x00\x00\x00\x00\x00\x01\xff\xff",
    ],
)
def test_an_assignment_that_does_not_parse_is_none(data: bytes) -> None:
    assert ol.assignment_partitions(data) is None


def test_a_group_metadata_record_that_does_not_decode_is_skipped() -> None:
    value = orec.group_metadata_value(orec.GroupMetadataValue("consumer", 1, "range", "m", -1, []))
    assert ol.decode_group(orec.group_metadata_key("g"), value[:-3]) is None
    assert ol.decode_group(orec.group_metadata_key("g"), b"\x00\x07" + value[2:]) is None  # unknown version


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(ms: int) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def record(kind: int, member: str | None, value: bytes | None, ms: int) -> dict:
    row = ol.decode_consumer_group(orec.consumer_group_key(kind, "cg", member), value)
    assert row is not None
    row["record_time"] = at(ms)
    return row


def member(client: str, assignor: str | None = "uniform") -> bytes:
    return orec.consumer_member_metadata_value(
        orec.ConsumerMemberMetadataValue(None, None, client, "/127.0.0.1", ["t"], None, 45000, assignor)
    )


def current(epoch: int, parts: list[int], pending: list[int] | None = None, state: int = 0) -> bytes:
    return orec.consumer_current_assignment_value(
        orec.CurrentAssignmentValue(epoch, epoch - 1, state, [(TID, parts)], [(TID, pending)] if pending else [])
    )


TID = uuid.uuid4()


def test_a_consumer_group_epoch_is_stable_once_every_member_reconciled() -> None:
    g = _ConsumerGroup("cg")
    names = orec.consumer_group_partition_metadata_value([orec.TopicMetadata(TID, "t", 2)])
    for row in [
        record(5, "a", member("ca"), 0),
        record(3, None, orec.consumer_group_epoch_value(1), 0),
        record(4, None, names, 0),
        record(7, "a", orec.consumer_target_assignment_value([(TID, [0, 1])]), 0),
        record(8, "a", current(1, [0, 1]), 5),  # epoch 1 stable at 5 ms
        record(5, "b", member("cb"), 100),
        record(3, None, orec.consumer_group_epoch_value(2), 100),
        record(7, "a", orec.consumer_target_assignment_value([(TID, [0])]), 100),
        record(7, "b", orec.consumer_target_assignment_value([(TID, [1])]), 100),
        record(8, "a", current(2, [0], pending=[1], state=1), 110),  # a must revoke 1 first
        record(8, "b", current(2, []), 110),  # b waits for 1: not yet its target
        record(8, "a", current(2, [0]), 150),
        record(8, "b", current(2, [1]), 180),  # epoch 2 stable at 180 ms
        record(5, "a", None, 300),  # a leaves
        record(7, "a", None, 300),
        record(8, "a", None, 300),
        record(3, None, orec.consumer_group_epoch_value(3), 300),
        record(5, "b", None, 400),  # b leaves before it reconciled epoch 3
        record(3, None, orec.consumer_group_epoch_value(4), 400),
        record(3, None, None, 500),  # the group is deleted
    ]:
        g.apply(row)
    rows = {r["generation"]: r for r in g.out}
    assert [r["state"] for r in g.out] == ["Stable", "Stable", "Reconciling", "Empty"]
    one, two = rows[1], rows[2]
    assert one["stable_time"] == at(5) and one["sync_ms"] == one["not_stable_ms"] == 5.0 and one["end_time"] == at(100)
    assert [(m["member_id"], m["client_id"], m["assignment"]) for m in one["members"]] == [
        ("a", "ca", [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}])
    ]
    assert two["stable_time"] == at(180) and two["not_stable_ms"] == 80.0 and two["since_previous_stable_ms"] == 175.0
    assert [(m["member_id"], [p["partition"] for p in m["assignment"]]) for m in two["members"]] == [("a", [0]), ("b", [1])]
    assert two["joined"] == ["b"] and two["left"] == [] and two["protocol"] == "uniform"
    assert rows[3]["left"] == ["a"] and rows[3]["stable_time"] is None and rows[3]["member_count"] == 1
    assert rows[4]["member_count"] == 0 and rows[4]["deleted_time"] == at(500) and rows[4]["end_time"] == at(500)
    assert g.incarnation == 1


def test_source_headers_name_the_source_record() -> None:
    headers = dict(source_headers("orders", 3, 1234, index=2))
    assert headers[HEADER_TOPIC] == b"orders" and headers[HEADER_PARTITION] == b"3" and headers[HEADER_OFFSET] == b"1234"
    assert headers["kaflet.source.index"] == b"2"


def test_lookup_rounds_ask_one_question_per_partition() -> None:
    rounds = _rounds([(("t", 0), 5), (("t", 0), 3), (("t", 1), 9), (("t", 0), 5)])
    assert [sorted(r) for r in rounds] == [[(("t", 0), 3), (("t", 1), 9)], [(("t", 0), 5)]]
