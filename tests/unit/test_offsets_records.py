"""RF-1..RF-4: `__consumer_offsets` keys and values byte for byte as Kafka lays them out."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage import offsets_records as o


def s16(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def test_RF_1_offset_commit_key_is_type_1_then_group_topic_partition() -> None:
    assert o.offset_commit_key("g", "t", 7) == b"\x00\x01" + s16("g") + s16("t") + struct.pack(">i", 7)
    assert o.parse_offset_commit_key(o.offset_commit_key("grüppe", "topic", 3)) == ("grüppe", "topic", 3)


def test_RF_1_type_0_keys_parse_like_type_1() -> None:
    key = b"\x00\x00" + s16("g") + s16("t") + struct.pack(">i", 1)
    assert o.key_type(key) == 0
    assert o.parse_offset_commit_key(key) == ("g", "t", 1)


def test_RF_2_group_metadata_key_is_type_2() -> None:
    assert o.group_metadata_key("my-group") == b"\x00\x02" + s16("my-group")
    assert o.parse_group_metadata_key(o.group_metadata_key("my-group")) == "my-group"


def test_RF_3_value_v3_layout() -> None:
    value = o.offset_commit_value(42, 5, "meta", 1_700_000_000_000)
    assert value == struct.pack(">hqi", 3, 42, 5) + s16("meta") + struct.pack(">q", 1_700_000_000_000)
    assert o.parse_offset_commit_value(value) == o.OffsetValue(42, 5, "meta", 1_700_000_000_000, -1)


def test_RF_3_value_v1_when_expire_timestamp_present() -> None:
    value = o.offset_commit_value(42, 5, "", 100, 200)
    assert value == struct.pack(">hq", 1, 42) + s16("") + struct.pack(">qq", 100, 200)
    assert o.parse_offset_commit_value(value) == o.OffsetValue(42, -1, "", 100, 200)


def test_RF_3_values_v0_v2_and_flexible_v4_decode() -> None:
    v0 = struct.pack(">hq", 0, 9) + s16("m") + struct.pack(">q", 11)
    v2 = struct.pack(">hq", 2, 9) + s16("m") + struct.pack(">q", 11)
    # v4: compact string (length + 1 as unsigned varint) and an empty tagged-field section.
    v4 = struct.pack(">hqi", 4, 9, 3) + bytes([2]) + b"m" + struct.pack(">q", 11) + b"\x00"
    assert o.parse_offset_commit_value(v0) == o.OffsetValue(9, -1, "m", 11, -1)
    assert o.parse_offset_commit_value(v2) == o.OffsetValue(9, -1, "m", 11, -1)
    assert o.parse_offset_commit_value(v4) == o.OffsetValue(9, 3, "m", 11, -1)


def test_RF_4_group_metadata_value_v3_layout() -> None:
    member = o.MemberMetadata("m-1", "inst", "client", "/127.0.0.1", 30000, 10000, b"sub", b"asg")
    value = o.GroupMetadataValue("consumer", 4, "range", "m-1", 1234, [member])
    expected = (
        struct.pack(">h", 3)
        + s16("consumer")
        + struct.pack(">i", 4)
        + s16("range")
        + s16("m-1")
        + struct.pack(">q", 1234)
        + struct.pack(">i", 1)
        + s16("m-1")
        + s16("inst")
        + s16("client")
        + s16("/127.0.0.1")
        + struct.pack(">ii", 30000, 10000)
        + struct.pack(">i", 3)
        + b"sub"
        + struct.pack(">i", 3)
        + b"asg"
    )
    assert o.group_metadata_value(value) == expected
    assert o.parse_group_metadata_value(expected) == value


def test_RF_4_empty_group_has_null_protocol_and_leader() -> None:
    encoded = o.group_metadata_value(o.GroupMetadataValue("", 0, None, None, -1, []))
    assert encoded == struct.pack(">h", 3) + s16("") + struct.pack(">i", 0) + b"\xff\xff\xff\xff" + struct.pack(">qi", -1, 0)


def test_RF_4_old_versions_decode() -> None:
    # v0: no rebalance timeout, no state timestamp, no instance id.
    v0 = struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 2) + s16("range") + s16("a") + struct.pack(">i", 1)
    v0 += s16("a") + s16("c") + s16("/h") + struct.pack(">i", 6000) + struct.pack(">i", 1) + b"s" + struct.pack(">i", 1) + b"x"
    parsed = o.parse_group_metadata_value(v0)
    assert parsed.current_state_timestamp == -1
    assert parsed.members == [o.MemberMetadata("a", None, "c", "/h", -1, 6000, b"s", b"x")]


names = st.text(min_size=0, max_size=40)


@given(
    names,
    names,
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    names,
    st.integers(0, 2**62),
)
def test_offset_records_round_trip(group: str, topic: str, partition: int, offset: int, epoch: int, metadata: str, ts: int) -> None:
    assert o.parse_offset_commit_key(o.offset_commit_key(group, topic, partition)) == (group, topic, partition)
    assert o.parse_offset_commit_value(o.offset_commit_value(offset, epoch, metadata, ts)) == (offset, epoch, metadata, ts, -1)


def test_bad_records_raise_format_errors() -> None:
    with pytest.raises(o.RecordFormatError):
        o.parse_offset_commit_key(b"\x00\x01\x00\x05ab")
    with pytest.raises(o.RecordFormatError):
        o.parse_offset_commit_value(struct.pack(">h", 9) + b"\x00" * 20)
    with pytest.raises(o.RecordFormatError):
        o.parse_group_metadata_value(struct.pack(">h", 3) + b"\x00")
